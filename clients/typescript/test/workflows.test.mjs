// Durable functions (issue 41) against real `docket serve`s: the shared ones of clients/test.sh
// (each test on a queue of its own), and for the restart and two-node tests servers of their
// own on a fresh database (own-servers.mjs).
import { after, test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { ChildFailed, Client, Worker } from "../dist/index.js";
import { SERVERS, runUntil, sleep, uniq, waitFor } from "./helpers.mjs";
import { dropDatabase, freshDatabase, serve, stopAll } from "./own-servers.mjs";
import { fiveSteps } from "./workflow-defs.mjs";

const drops = [];
after(async () => {
  await stopAll();
  for (const d of drops) { try { d(); } catch (e) { console.warn(`could not drop a test database: ${e}`); } }
});

const worker = (client, queue, o = {}) =>
  new Worker({ client, workflowQueue: queue, wait: "500ms", reportIntervalMs: 0, signals: false, ...o });
const stateOf = async (c, id) => (await c.workflowRun(id)).state;

for (const [backend, server] of Object.entries(SERVERS)) {
  const c = new Client({ server });

  test(`${backend}: workflows: a worker killed in step 3 of 5: steps 1-2 are not run again, the result is the same`, async () => {
    const queue = uniq(), dir = mkdtempSync(join(tmpdir(), "docket-ts-wf-"));
    try {
      const run = await c.startWorkflow("five", 1, { queue });
      const child = spawn(process.execPath, [fileURLToPath(new URL("./workflow-proc.mjs", import.meta.url)), server, queue, dir],
        { stdio: ["ignore", "pipe", "inherit"] });
      const lines = [];
      createInterface({ input: child.stdout }).on("line", (l) => lines.push(l));
      const exited = new Promise((r) => child.on("exit", r));
      await waitFor(() => lines.includes("in step 3"), 30_000);
      child.kill("SIGKILL");
      await exited;
      writeFileSync(join(dir, "go"), "");
      const w = worker(c, queue);
      w.workflow("five", fiveSteps(dir));
      await runUntil(w, async () => (await stateOf(c, run.id)) === "completed", 60_000);
      const log = readFileSync(join(dir, "log"), "utf8").trim().split("\n");
      assert.deepEqual(log, ["s1", "s2", "s3", "s3", "s4", "s5"]);
      const done = await c.workflowRun(run.id);
      assert.equal(done.result, 89); // 1 → 3 → 8 → 19 → 42 → 89, as a run without the kill
      const steps = await c.workflowSteps(run.id);
      assert.deepEqual(steps.map((e) => [e.seq, e.kind, e.name, e.state, e.output, e.attempts]),
        [[0, "step", "s1", "completed", 3, 1], [1, "step", "s2", "completed", 8, 1], [2, "step", "s3", "completed", 19, 1],
          [3, "step", "s4", "completed", 42, 1], [4, "step", "s5", "completed", 89, 1]]);
      assert.equal((await c.getTask(done.task_id)).attempt, 2);
    } finally { rmSync(dir, { recursive: true, force: true }); }
  });

  test(`${backend}: workflows: events sent before and after the wait starts are both received; a wait times out`, async () => {
    const queue = uniq();
    const w = worker(c, queue);
    w.workflow("approval", async (ctx) => {
      const a = await ctx.waitForEvent("early");
      const b = await ctx.waitForEvent("late");
      return { a, b };
    });
    w.workflow("timer", async (ctx) => {
      const v = await ctx.waitForEvent("never", { timeout: "1s" });
      return v === undefined ? "timed out" : v;
    });
    const run = await c.startWorkflow("approval", null, { queue });
    const early = await c.sendEvent(run.id, "early", { n: 1 });
    assert.equal(early.delivered, false); // kept in the mailbox: the run waits for nothing yet
    const t = await c.startWorkflow("timer", null, { queue });
    let late;
    await runUntil(w, async () => {
      const r = await c.workflowRun(run.id);
      if (!late && r.state === "waiting" && r.waiting_for === "late") late = await c.sendEvent(run.id, "late", { n: 2 });
      return r.state === "completed" && (await stateOf(c, t.id)) === "completed";
    }, 30_000);
    assert.equal(late.delivered, true); // the run was waiting for it: woken
    assert.deepEqual((await c.workflowRun(run.id)).result, { a: { n: 1 }, b: { n: 2 } });
    assert.equal((await c.workflowRun(t.id)).result, "timed out");
    const steps = await c.workflowSteps(t.id);
    assert.deepEqual(steps.map((e) => [e.kind, e.name, e.state]), [["event", "never", "timed_out"]]);
    await assert.rejects(c.sendEvent(run.id, "late", 3), (e) => e.code === "invalid_state" && e.status === 409);
    await assert.rejects(c.sendEvent(t.id, "docket:child:x", 3), (e) => e.code === "invalid_request" && e.status === 400);
  });

  test(`${backend}: workflows: a child awaited, one started without awaiting, a failed child raises ChildFailed`, async () => {
    const queue = uniq();
    const w = worker(c, queue);
    w.workflow("parent", async (ctx, n) => {
      const h = await ctx.startChild("double", n);
      const free = await ctx.startChild("double", n + 100, { id: `${ctx.runId}-free` });
      const bad = await ctx.startChild("broken", null);
      let failed;
      try { await bad.result(); } catch (e) { failed = e instanceof ChildFailed ? [e.state, e.childId] : String(e); }
      return { got: await h.result(), free: free.id, failed };
    });
    w.workflow("double", async (ctx, n) => ctx.step("double", () => n * 2));
    w.workflow("broken", async () => { throw new Error("no luck"); });
    const run = await c.startWorkflow("parent", 5, { queue });
    await runUntil(w, async () => (await stateOf(c, run.id)) === "completed" && (await stateOf(c, `${run.id}-free`)) === "completed", 30_000);
    const done = await c.workflowRun(run.id);
    assert.deepEqual(done.result, { got: 10, free: `${run.id}-free`, failed: ["failed", `${run.id}:2`] });
    const kids = await c.listWorkflowRuns({ parentId: run.id });
    assert.deepEqual(kids.map((k) => k.id).sort(), [`${run.id}-free`, `${run.id}:0`, `${run.id}:2`].sort());
    assert.equal((await c.workflowRun(`${run.id}-free`)).result, 210);
    assert.match((await c.workflowRun(`${run.id}:2`)).error, /no luck/);
    const steps = await c.workflowSteps(run.id);
    assert.deepEqual(steps.map((e) => [e.seq, e.kind, e.name]),
      [[0, "child", "double"], [1, "child", "double"], [2, "child", "broken"], [3, "child_wait", "broken"], [4, "child_wait", "double"]]);
  });

  test(`${backend}: workflows: a changed function whose replay asks for another step fails the run naming both; retry after the fix`, async () => {
    const queue = uniq();
    const v1 = async (ctx) => { await ctx.step("charge", () => 1); await ctx.sleep("1s"); await ctx.step("ship", () => 2); return "v1"; };
    const w1 = worker(c, queue).workflow("checkout", v1);
    const run = await c.startWorkflow("checkout", null, { queue });
    await runUntil(w1, async () => (await stateOf(c, run.id)) === "sleeping", 30_000);
    const w2 = worker(c, queue).workflow("checkout", async (ctx) => { await ctx.step("refund", () => 1); return "v2"; });
    await runUntil(w2, async () => (await stateOf(c, run.id)) === "failed", 30_000);
    const failed = await c.workflowRun(run.id);
    assert.equal(failed.error, `non-determinism: workflow checkout run ${run.id}: journal entry 0 is step "charge" but the code asked for step "refund"`);
    assert.equal((await c.retryWorkflow(run.id)).id, run.id);
    const w3 = worker(c, queue).workflow("checkout", v1);
    await runUntil(w3, async () => (await stateOf(c, run.id)) === "completed", 30_000);
    assert.equal((await c.workflowRun(run.id)).result, "v1");
  });

  test(`${backend}: workflows: patched() — an old run replays the old path, a new run takes the new one`, async () => {
    const queue = uniq();
    const v1 = async (ctx) => { const r = await ctx.step("old", () => "old"); await ctx.sleep("1s"); await ctx.step("end", () => 0); return r; };
    const v2 = async (ctx) => {
      const r = (await ctx.patched("use-new")) ? await ctx.step("new", () => "new") : await ctx.step("old", () => "old");
      await ctx.sleep("1s");
      await ctx.step("end", () => 0);
      return r;
    };
    const old = await c.startWorkflow("patchy", null, { queue });
    await runUntil(worker(c, queue).workflow("patchy", v1), async () => (await stateOf(c, old.id)) === "sleeping", 30_000);
    const fresh = await c.startWorkflow("patchy", null, { queue });
    await runUntil(worker(c, queue).workflow("patchy", v2),
      async () => (await stateOf(c, old.id)) === "completed" && (await stateOf(c, fresh.id)) === "completed", 30_000);
    assert.equal((await c.workflowRun(old.id)).result, "old");
    assert.equal((await c.workflowRun(fresh.id)).result, "new");
    assert.deepEqual((await c.workflowSteps(old.id)).map((e) => [e.kind, e.name]), [["step", "old"], ["sleep", "sleep"], ["step", "end"]]);
    assert.deepEqual((await c.workflowSteps(fresh.id)).map((e) => [e.kind, e.name]),
      [["patch", "use-new"], ["step", "new"], ["sleep", "sleep"], ["step", "end"]]);
  });

  test(`${backend}: workflows: start is idempotent by id; result waits; cancel; list by workflow and state; now/random/uuid replay`, async () => {
    const queue = uniq(), name = `calls-${uniq()}`, id = `order-${uniq()}`;
    const a = await c.startWorkflow(name, { x: 1 }, { id, queue });
    assert.deepEqual([a.id, a.created, a.workflow, a.queue, a.state], [id, true, name, queue, "running"]);
    const b = await c.startWorkflow(name, { x: 2 }, { id, queue });
    assert.deepEqual([b.id, b.created, b.input], [id, false, { x: 1 }]);
    await assert.rejects(c.startWorkflow(`${name}-other`, null, { id, queue }), (e) => e.code === "conflict" && e.status === 409);
    await assert.rejects(c.workflowRun(`nope-${uniq()}`), (e) => e.code === "not_found" && e.status === 404);
    const seen = [];
    const w = worker(c, queue).workflow(name, async (ctx) => {
      const vals = [(await ctx.now()).toISOString(), await ctx.random(), await ctx.uuid()];
      await ctx.step("one", () => 1);
      seen.push(vals);
      const go = await ctx.waitForEvent("go");
      return { go, vals };
    });
    const running = w.run();
    try {
      await waitFor(async () => (await stateOf(c, id)) === "waiting", 30_000);
      const other = await c.startWorkflow(name, null, { queue });
      await waitFor(async () => (await stateOf(c, other.id)) === "waiting", 30_000);
      // A result call waits for the end (here: the event 700 ms on).
      setTimeout(() => c.sendEvent(other.id, "go", "now"), 700);
      const t0 = Date.now();
      const res = await c.workflowResult(other.id, { wait: "20s" });
      assert.equal(res.state, "completed"); assert.ok(Date.now() - t0 >= 500);
      assert.equal(res.result.go, "now");
      // The values were made once: the replay after the event returned the recorded ones.
      assert.deepEqual(seen.filter((v) => v[2] === res.result.vals[2]), [res.result.vals, res.result.vals]);
      const steps = await c.workflowSteps(other.id);
      assert.deepEqual(steps.map((e) => [e.seq, e.kind]), [[0, "now"], [1, "random"], [2, "uuid"], [3, "step"], [4, "event"]]);
      assert.deepEqual(steps.slice(0, 3).map((e) => e.output), res.result.vals);

      const cancelled = await c.cancelWorkflow(id);
      assert.equal(cancelled.state, "cancelled");
      const r = await c.workflowResult(id, { wait: "1s" });
      assert.equal(r.state, "cancelled");
      // Still unfinished after its wait: the run as it is.
      const third = await c.startWorkflow(name, null, { queue });
      await waitFor(async () => (await stateOf(c, third.id)) === "waiting", 30_000);
      const still = await c.workflowResult(third.id, { wait: "300ms" });
      assert.equal(still.state, "waiting");
      await c.cancelWorkflow(third.id);
    } finally { w.stop(); await running; }
    const ids = async (f) => (await c.listWorkflowRuns({ workflow: name, ...f })).map((r) => r.id);
    assert.equal((await ids({})).length, 3);
    assert.deepEqual((await ids({ state: "cancelled" })).includes(id), true);
    assert.equal((await ids({ state: "completed" })).length, 1);
    assert.deepEqual(await ids({ state: "running" }), []);
    assert.equal((await ids({ limit: 1 })).length, 1);
  });

  // Servers of these tests' own on a fresh database: node A restarted by the first, node B
  // beside it in the second, which stops both and drops the database.
  const own = {};
  const ownDb = () => {
    if (!own.db) { own.db = freshDatabase(backend); drops.push(() => { if (!own.dropped) own.db.drop(); }); }
    return own.db;
  };

  test(`${backend}: workflows: a sleep across a docket serve restart`, async () => {
    const a = own.a ??= await serve(ownDb(), `ts-dur-${backend}-a`);
    const ca = new Client({ server: a.url });
    const queue = uniq();
    const w = worker(ca, queue).workflow("napper", async (ctx) => {
      const t0 = await ctx.step("before", () => Date.now());
      await ctx.sleep("2s");
      return (await ctx.step("after", () => Date.now())) - t0;
    });
    const running = w.run();
    try {
      const run = await ca.startWorkflow("napper", null, { queue });
      await waitFor(async () => (await stateOf(ca, run.id)) === "sleeping", 30_000);
      await a.stop();
      await a.start();
      const done = await waitFor(async () => { const r = await ca.workflowResult(run.id, { wait: "5s" }); return r.state === "completed" && r; }, 60_000);
      assert.ok(done.result >= 1900, `slept ${done.result} ms`);
    } finally { w.stop(); await running; }
  });

  test(`${backend}: workflows: 1,000 runs of 3 steps on two nodes, a worker on each: every step once`, async () => {
    const a = own.a ??= await serve(ownDb(), `ts-dur-${backend}-a`);
    const b = own.b ??= await serve(ownDb(), `ts-dur-${backend}-b`);
    const ca = new Client({ server: a.url }), cb = new Client({ server: b.url });
    const queue = uniq(), N = 1000;
    const runs = new Map();
    const tri = async (ctx, i) => {
      let sum = 0;
      for (let k = 0; k < 3; k++) {
        sum += await ctx.step(`s${k}`, () => {
          const key = `${ctx.runId}/${k}`;
          runs.set(key, (runs.get(key) ?? 0) + 1);
          return i + k;
        });
      }
      return sum;
    };
    const wa = worker(ca, queue, { concurrency: 50 }).workflow("tri", tri);
    const wb = worker(cb, queue, { concurrency: 50 }).workflow("tri", tri);
    const ra = wa.run(), rb = wb.run();
    const t0 = Date.now();
    try {
      const ids = [];
      await Promise.all(Array.from({ length: 10 }, async (_, k) => {
        for (let i = k; i < N; i += 10) ids[i] = (await (i % 2 ? cb : ca).startWorkflow("tri", i, { queue })).id;
      }));
      await waitFor(() => wa.stats.finished + wb.stats.finished >= N, 300_000);
      const secs = (Date.now() - t0) / 1000;
      console.log(`# ${backend}: ${N} runs of 3 steps on two nodes in ${secs.toFixed(1)} s (${(N / secs).toFixed(0)}/s; node A's worker ${wa.stats.finished}, B's ${wb.stats.finished})`);
      assert.ok(wa.stats.finished > 0 && wb.stats.finished > 0, `${wa.stats.finished} and ${wb.stats.finished}`);
      assert.equal(runs.size, 3 * N);
      assert.deepEqual([...runs.values()].filter((n) => n !== 1), [], "a step ran twice");
      const done = await ca.listWorkflowRuns({ workflow: "tri", state: "completed", limit: 1000 });
      assert.equal(done.length, N);
      for (const r of done) assert.equal(r.result, 3 * r.input + 3);
      assert.deepEqual([...new Set(done.map((r) => r.id))].sort(), [...ids].sort());
    } finally {
      wa.stop(); wb.stop(); await Promise.all([ra, rb]);
      await dropDatabase(own.db, a, b);
      own.dropped = true;
    }
  });
}
