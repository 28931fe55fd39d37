// The replay logic of durable functions (src/durable.ts) against a fake server: no docket needed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ChildFailed, DocketError, NonDeterminismError, StepFailed, executeWorkflow } from "../dist/index.js";

/** A fake of the run's routes: answers by `answer(op, body)`, records every call. */
function fake(answer = () => ({})) {
  const calls = [];
  const post = async (op, body) => {
    calls.push([op, structuredClone(body)]);
    const a = await answer(op, body);
    if (a instanceof Error) throw a;
    return a;
  };
  return { calls, post };
}
const run = (o) => executeWorkflow({ runId: "r1", workflow: "wf", input: { n: 1 }, fresh: true, lease: "L", ...o });
const step = (seq, name, output, extra = {}) => ({ seq, kind: "step", name, state: "completed", output, attempts: 1, ...extra });
const resumeWith = (steps, now = new Date().toISOString(), state = "running") =>
  (op) => (op === "resume" ? { run: { id: "r1", state }, steps, now } : op === "finish" ? { run: {} } : { recorded: 1 });

test("a fresh run: each step's entry goes with the next call, the last with the finish", async () => {
  const f = fake(() => ({ recorded: 1 }));
  const ran = [];
  const out = await run({ post: f.post, fn: async (ctx, input) => {
    const a = await ctx.step("a", () => { ran.push("a"); return input.n + 1; });
    const b = await ctx.step("b", () => { ran.push("b"); return { a, d: new Date(0) }; });
    const c = await ctx.step("c", () => { ran.push("c"); });
    return { a, b, c };
  } });
  assert.equal(out, "finished");
  assert.deepEqual(ran, ["a", "b", "c"]);
  assert.deepEqual(f.calls.map(([op, b]) => [op, b.steps.map((s) => s.seq)]), [["steps", [0]], ["steps", [1]], ["finish", [2]]]);
  const [, fin] = f.calls[2];
  assert.equal(fin.lease, "L");
  // What the code saw is what a replay will see: JSON (a Date is its string, undefined null).
  assert.deepEqual(fin.result, { a: 2, b: { a: 2, d: "1970-01-01T00:00:00.000Z" }, c: null });
  const s0 = f.calls[0][1].steps[0];
  assert.deepEqual([s0.kind, s0.name, s0.output, s0.attempts], ["step", "a", 2, 1]);
  assert.ok(Date.parse(s0.started_at));
});

test("deferSteps false: each step recorded on its own as it ends", async () => {
  const f = fake(() => ({ recorded: 1 }));
  await run({ post: f.post, deferSteps: false, fn: async (ctx) => {
    await ctx.now();
    await ctx.step("a", () => 1);
    await ctx.step("b", () => 2);
    return "x";
  } });
  assert.deepEqual(f.calls.map(([op, b]) => [op, b.steps.map((s) => s.kind)]), [["steps", ["now", "step"]], ["steps", ["step"]], ["finish", []]]);
});

test("a replay returns what the journal holds and runs only what is past it", async () => {
  const journal = [step(0, "a", 2), { seq: 1, kind: "now", name: "now", state: "completed", output: "2020-01-02T03:04:05.000Z" },
    step(2, "b", null, { state: "failed", error: "Error: boom\n  at x", attempts: 3 })];
  const f = fake(resumeWith(journal));
  const ran = [];
  const out = await run({ fresh: false, post: f.post, fn: async (ctx) => {
    assert.equal(ctx.replaying, true);
    const a = await ctx.step("a", () => { ran.push("a"); return 99; });
    const t = await ctx.now();
    let failed;
    try { await ctx.step("b", () => { ran.push("b"); }); } catch (e) { failed = e; }
    assert.ok(failed instanceof StepFailed);
    assert.equal(failed.error, "Error: boom\n  at x"); assert.equal(failed.attempts, 3);
    assert.equal(ctx.replaying, false);
    const c = await ctx.step("c", () => { ran.push("c"); return "new"; });
    return [a, t.toISOString(), c];
  } });
  assert.equal(out, "finished");
  assert.deepEqual(ran, ["c"]);
  assert.deepEqual(f.calls.map(([op]) => op), ["resume", "finish"]);
  assert.deepEqual(f.calls[0][1], { lease: "L" });
  assert.deepEqual(f.calls[1][1].result, [2, "2020-01-02T03:04:05.000Z", "new"]);
  assert.deepEqual(f.calls[1][1].steps.map((s) => [s.seq, s.name]), [[3, "c"]]);
});

test("a replay asking for another call than the journal holds fails the run, naming both", async () => {
  const f = fake(resumeWith([step(0, "a", 1), { seq: 1, kind: "sleep", name: "sleep", state: "completed", wake_at: "2020-01-01T00:00:00Z" }, step(2, "charge", 5)]));
  let seen;
  const out = await executeWorkflow({ runId: "r1", workflow: "checkout", input: null, fresh: false, lease: "L", post: f.post, fn: async (ctx) => {
    await ctx.step("a", () => 1);
    await ctx.sleep("1h");
    try { await ctx.step("refund", () => 0); } catch (e) { seen = e; }
    await ctx.step("after", () => 0); // swallowing it changes nothing
    return "ok";
  } });
  assert.equal(out, "finished");
  assert.ok(seen instanceof NonDeterminismError);
  assert.deepEqual(f.calls.map(([op]) => op), ["resume", "finish"]);
  assert.equal(f.calls[1][1].error, 'non-determinism: workflow checkout run r1: journal entry 2 is step "charge" but the code asked for step "refund"');
  assert.equal("result" in f.calls[1][1], false);
});

test("a function that returns with journal entries it did not ask for fails the run", async () => {
  const f = fake(resumeWith([step(0, "a", 1), step(1, "b", 2)]));
  const out = await executeWorkflow({ runId: "r1", workflow: "checkout", input: null, fresh: false, lease: "L", post: f.post, fn: async (ctx) => {
    await ctx.step("a", () => 1);
    return "early";
  } });
  assert.equal(out, "finished");
  assert.deepEqual(f.calls.map(([op]) => op), ["resume", "finish"]);
  assert.equal(f.calls[1][1].error, 'non-determinism: workflow checkout run r1: the code returned after 1 call(s) but the journal has 2; entry 1 is step "b"');
  assert.equal("result" in f.calls[1][1], false);
});

test("the server's nondeterministic refusal fails the run too", async () => {
  const f = fake((op) => (op === "steps" ? new DocketError(409, "nondeterministic", 'non-determinism: workflow wf run r1: journal entry 0 is step "x" but the code asked for step "a"') : { run: {} }));
  const out = await run({ post: f.post, deferSteps: false, fn: async (ctx) => { await ctx.step("a", () => 1); return 1; } });
  assert.equal(out, "finished");
  assert.equal(f.calls.at(-1)[1].error, 'non-determinism: workflow wf run r1: journal entry 0 is step "x" but the code asked for step "a"');
});

test("patched: an old run replays the old path, a new run records the marker and takes the new one", async () => {
  const wf = async (ctx) => {
    const path = (await ctx.patched("v2")) ? "new" : "old";
    await ctx.step(path === "new" ? "a2" : "a", () => path);
    return path;
  };
  const old = fake(resumeWith([step(0, "a", "old")]));
  assert.equal(await run({ fresh: false, post: old.post, fn: wf }), "finished");
  assert.equal(old.calls.at(-1)[1].result, "old");
  const fresh = fake(() => ({}));
  assert.equal(await run({ post: fresh.post, fn: wf }), "finished");
  assert.deepEqual(fresh.calls.map(([op, b]) => [op, b.steps.map((s) => [s.seq, s.kind, s.name])]),
    [["steps", [[0, "patch", "v2"]]], ["finish", [[1, "step", "a2"]]]]);
  assert.equal(fresh.calls.at(-1)[1].result, "new");
  // Replaying the new run: the marker is consumed, the new path again.
  const again = fake(resumeWith([{ seq: 0, kind: "patch", name: "v2", state: "completed", output: null }, step(1, "a2", "new")]));
  assert.equal(await run({ fresh: false, post: again.post, fn: wf }), "finished");
  assert.equal(again.calls.at(-1)[1].result, "new");
  assert.deepEqual(again.calls.at(-1)[1].steps, []);
});

test("sleep: suspended ends the execution; a due sleep in the journal goes on without a call", async () => {
  const f = fake((op) => (op === "suspend" ? { outcome: "suspended", entry: {} } : {}));
  const ran = [];
  let caught = 0;
  const out = await run({ post: f.post, fn: async (ctx) => {
    await ctx.step("a", () => 1);
    const t = await ctx.now();
    try { await ctx.sleep("2s"); } catch { caught++; } // a catch-all does not resume it
    await ctx.step("b", () => { ran.push("b"); }).catch(() => caught++);
    return "x";
  } });
  assert.equal(out, "suspended");
  assert.deepEqual(ran, []); assert.equal(caught, 2);
  assert.deepEqual(f.calls.map(([op]) => op), ["suspend"]);
  const [, s] = f.calls[0];
  assert.deepEqual(s.steps.map((e) => e.kind), ["step", "now"]);
  assert.deepEqual([s.wait.seq, s.wait.kind, s.wait.name], [2, "sleep", "sleep"]);
  assert.ok(Math.abs(Date.parse(s.wait.until) - Date.now() - 2000) < 1000);

  const now = new Date().toISOString();
  const g = fake(resumeWith([step(0, "a", 1), { seq: 1, kind: "now", name: "now", state: "completed", output: now },
    { seq: 2, kind: "sleep", name: "sleep", state: "waiting", wake_at: new Date(Date.now() - 10).toISOString() }], now));
  assert.equal(await run({ fresh: false, post: g.post, fn: async (ctx) => {
    await ctx.step("a", () => 1); await ctx.now(); await ctx.sleep("2s"); return ctx.step("b", () => "woke");
  } }), "finished");
  assert.deepEqual(g.calls.map(([op]) => op), ["resume", "finish"]);
  assert.equal(g.calls[1][1].result, "woke");
  // Not due at the server's now: suspend is asked (the server reads its entry).
  const h = fake((op, b) => (op === "resume" ? resumeWith([{ seq: 0, kind: "sleep", name: "sleep", state: "waiting", wake_at: "2999-01-01T00:00:00Z" }])(op) : op === "suspend" ? { outcome: "due" } : {}));
  assert.equal(await run({ fresh: false, post: h.post, fn: async (ctx) => { await ctx.sleep(5); return 1; } }), "finished");
  assert.deepEqual(h.calls.map(([op]) => op), ["resume", "suspend", "finish"]);
});

test("events: received, timed out, and replayed", async () => {
  const answers = [{ outcome: "event", payload: { ok: 1 } }, { outcome: "timed_out" }];
  const f = fake((op) => (op === "suspend" ? answers.shift() : {}));
  assert.equal(await run({ post: f.post, fn: async (ctx) => {
    const a = await ctx.waitForEvent("approved");
    const b = await ctx.waitForEvent("second", { timeout: "5m" });
    return [a, b === undefined];
  } }), "finished");
  assert.deepEqual(f.calls.map(([op, b]) => [op, b.wait]), [["suspend", { seq: 0, kind: "event", name: "approved" }],
    ["suspend", { seq: 1, kind: "event", name: "second", timeout: "5m" }], ["finish", undefined]]);
  assert.deepEqual(f.calls[2][1].result, [{ ok: 1 }, true]);
  const g = fake(resumeWith([{ seq: 0, kind: "event", name: "approved", state: "completed", output: null },
    { seq: 1, kind: "event", name: "second", state: "timed_out", output: null }]));
  assert.equal(await run({ fresh: false, post: g.post, fn: async (ctx) => [await ctx.waitForEvent("approved"), await ctx.waitForEvent("second")] }), "finished");
  assert.deepEqual(g.calls.at(-1)[1].result, [null, null]); // [null payload, undefined → null in JSON]
});

test("children: started in the same call, awaited durably; a failed child raises ChildFailed", async () => {
  const answers = [{ outcome: "event", payload: { state: "completed", result: 7, error: null } },
    { outcome: "event", payload: { state: "failed", result: null, error: "Error: no" } }];
  const f = fake((op) => (op === "suspend" ? answers.shift() : {}));
  let failed;
  assert.equal(await run({ post: f.post, fn: async (ctx) => {
    const a = await ctx.startChild("sub", { x: 1 });
    const b = await ctx.startChild("sub", 2, { id: "mine", queue: "q2" });
    assert.deepEqual([a.id, b.id], ["r1:0", "mine"]);
    const ra = await a.result();
    try { await b.result(); } catch (e) { failed = e; }
    return ra;
  } }), "finished");
  assert.ok(failed instanceof ChildFailed); assert.equal(failed.state, "failed"); assert.equal(failed.childId, "mine");
  assert.deepEqual(f.calls.map(([op, b]) => [op, b.steps, b.wait]), [
    ["steps", [{ seq: 0, kind: "child", name: "sub", child: { id: "r1:0", input: { x: 1 } } }], undefined],
    ["steps", [{ seq: 1, kind: "child", name: "sub", child: { id: "mine", input: 2, queue: "q2" } }], undefined],
    ["suspend", [], { seq: 2, kind: "child_wait", name: "sub", child_id: "r1:0" }],
    ["suspend", [], { seq: 3, kind: "child_wait", name: "sub", child_id: "mine" }],
    ["finish", [], undefined]]);
  assert.equal(f.calls.at(-1)[1].result, 7);
});

test("steps retry in process with backoff; exhausted or Permanent: recorded failed", async () => {
  const f = fake(() => ({}));
  let n = 0, p = 0;
  const t0 = Date.now();
  assert.equal(await run({ post: f.post, fn: async (ctx) => {
    const v = await ctx.step("flaky", ({ attempt }) => { n++; if (attempt < 3) throw new Error(`no ${attempt}`); return attempt; },
      { maxAttempts: 5, backoff: { initial: 20, factor: 2 } });
    const perm = await ctx.step("perm", () => { p++; const e = new Error("declined"); e.name = "Permanent"; throw e; }).catch((e) => e);
    const out = await ctx.step("never", () => { throw new Error("always"); }, { maxAttempts: 2, backoff: { initial: 1 } }).catch((e) => e);
    return [v, perm.message, out.attempts];
  } }), "finished");
  assert.equal(n, 3); assert.equal(p, 1);
  assert.ok(Date.now() - t0 >= 60);
  const entries = f.calls.flatMap(([, b]) => b.steps);
  assert.deepEqual(entries.map((e) => [e.name, e.attempts, e.output ?? null, (e.error ?? "").split("\n")[0]]),
    [["flaky", 3, 3, ""], ["perm", 1, null, "Permanent: declined"], ["never", 2, null, "Error: always"]]);
  assert.deepEqual(f.calls.at(-1)[1].result, [3, "step 'perm' failed after 1 attempt: Permanent: declined", 2]);
});

test("an uncaught error fails the run with it; a result that is not JSON too", async () => {
  const f = fake(() => ({}));
  assert.equal(await run({ post: f.post, fn: async (ctx) => { await ctx.step("x", () => { throw new Error("bad"); }, { maxAttempts: 1 }); } }), "finished");
  assert.match(f.calls.at(-1)[1].error, /^StepFailed: step 'x' failed after 1 attempt: Error: bad/);
  const g = fake(() => ({}));
  assert.equal(await run({ post: g.post, fn: async () => 10n }), "finished");
  assert.match(g.calls.at(-1)[1].error, /not JSON/);
});

test("lease refusals end the execution quietly; a finished run is finished again from its record", async () => {
  const f = fake((op) => (op === "steps" ? new DocketError(409, "lease_lost", "gone") : {}));
  const ran = [];
  assert.equal(await run({ post: f.post, fn: async (ctx) => {
    await ctx.step("a", () => { ran.push("a"); });
    await ctx.step("b", () => { ran.push("b"); });
    await ctx.step("c", () => { ran.push("c"); });
  } }), "lost");
  assert.deepEqual(ran, ["a"]);
  assert.deepEqual(f.calls.map(([op]) => op), ["steps"]);

  const g = fake(resumeWith([], undefined, "completed"));
  let ran2 = false;
  const r = await executeWorkflow({ runId: "r1", workflow: "wf", input: null, fresh: false, lease: "L", post: async (op, b) => {
    if (op === "resume") return { run: { id: "r1", state: "completed", result: { v: 1 } }, steps: [], now: "" };
    return g.post(op, b);
  }, fn: () => { ran2 = true; } });
  assert.equal(r, "finished"); assert.equal(ran2, false);
  assert.deepEqual(g.calls[0], ["finish", { lease: "L", steps: [], result: { v: 1 } }]);

  // The worker's abort (a heartbeat answered cancelled) ends it between calls.
  const h = fake(() => ({}));
  let abort;
  const out = executeWorkflow({ runId: "r1", workflow: "wf", input: null, fresh: true, lease: "L", post: h.post, fn: async (ctx) => {
    await ctx.step("a", async () => { abort(); return 1; });
    await ctx.step("b", () => 2);
  } }, (onAbort) => { abort = onAbort; });
  assert.equal(await out, "lost");
  assert.deepEqual(h.calls, []);
});

test("now, random and uuid are recorded lazily and replayed", async () => {
  const f = fake(() => ({}));
  let first;
  await run({ post: f.post, fn: async (ctx) => { first = [(await ctx.now()).toISOString(), await ctx.random(), await ctx.uuid()]; return first; } });
  const sent = f.calls[0][1].steps;
  assert.deepEqual(f.calls.map(([op]) => op), ["finish"]);
  assert.deepEqual(sent.map((e) => [e.seq, e.kind, e.name]), [[0, "now", "now"], [1, "random", "random"], [2, "uuid", "uuid"]]);
  const g = fake(resumeWith(sent.map((e) => ({ ...e, state: "completed" }))));
  let again;
  await run({ fresh: false, post: g.post, fn: async (ctx) => { again = [(await ctx.now()).toISOString(), await ctx.random(), await ctx.uuid()]; } });
  assert.deepEqual(again, first);
});

test("durable calls made at once run one after another, in call order", async () => {
  const f = fake(() => ({}));
  const order = [];
  await run({ post: f.post, fn: async (ctx) => {
    const slow = (name, ms) => ctx.step(name, async () => { order.push(`+${name}`); await new Promise((r) => setTimeout(r, ms)); order.push(`-${name}`); return name; });
    return Promise.all([slow("a", 30), slow("b", 1), slow("c", 10)]);
  } });
  assert.deepEqual(order, ["+a", "-a", "+b", "-b", "+c", "-c"]);
  assert.deepEqual(f.calls.flatMap(([, b]) => b.steps.map((s) => s.seq)), [0, 1, 2]);
});
