import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { createServer } from "node:http";
import { randomUUID } from "node:crypto";
import { fileURLToPath } from "node:url";
import { Client, DocketError, NextStage, autoPrefetch, Permanent, Processor, ProcessorFailure, Retry, Worker, parseDuration, taskSpec, timer } from "../dist/index.js";
import { SERVERS, runUntil, sleep, uniq, waitFor } from "./helpers.mjs";

for (const [backend, server] of Object.entries(SERVERS)) {
  const c = new Client({ server });

  test(`${backend}: enqueue takes every option; errors carry codes; PATCH with versions`, async () => {
    const queue = uniq();
    const runAt = new Date(Date.now() + 3600_000);
    const t = await c.enqueue("email", { to: "a@b.c" }, { queue, priority: 7, runAt, uniqueKey: `${queue}-u`,
      concurrencyKey: "k", concurrencyLimit: 2, timeout: 90_000, backoff: { initial: "2s", max: "1m" }, stage: "render",
      userId: "u-1", traceId: "0af7651916cd43dd8448eb211c80319c", maxAttempts: 4, expiresIn: "2h", progress: { p: 0 } });
    const got = await c.getTask(t.id);
    assert.equal(got.queue, queue); assert.equal(got.priority, 7); assert.equal(got.state, "scheduled");
    assert.ok(Math.abs(Date.parse(got.run_at) - runAt.getTime()) < 1000);
    assert.equal(got.unique_key, `${queue}-u`); assert.equal(got.concurrency_key, "k"); assert.equal(got.concurrency_limit, 2);
    assert.equal(parseDuration(got.timeout), 90_000); assert.equal(got.stage, "render"); assert.equal(got.user_id, "u-1");
    assert.equal(got.trace_id, "0af7651916cd43dd8448eb211c80319c"); assert.equal(got.max_attempts, 4);
    assert.ok(got.expires_at); assert.deepEqual(got.progress, { p: 0 }); assert.ok(got.version);
    const again = await c.enqueue("email", null, { queue, uniqueKey: `${queue}-u` });
    assert.equal(again.id, t.id); assert.equal(again.inserted, false);

    await assert.rejects(c.getTask(987654321), (e) => e instanceof DocketError && e.code === "not_found" && e.status === 404);
    await assert.rejects(c.complete(t.id, "not-a-lease", {}), (e) => e.code === "lease_lost");
    const p = await c.updateTask(t.id, { priority: 5 }, got.version);
    assert.equal(p.priority, 5);
    await assert.rejects(c.updateTask(t.id, { priority: 6 }, got.version), (e) => e.code === "version_mismatch" && e.status === 412);
    assert.equal((await c.runNow(t.id)).state, "available");
    assert.equal((await c.cancelTask(t.id)).state, "cancelled");
    assert.equal((await c.retryTask(t.id)).state, "available");

    const many = await c.enqueueMany([1, 2, 3].map((i) => taskSpec("n", i, { queue })));
    assert.deepEqual(many.map((x) => x.payload), [1, 2, 3]);
    const page = await c.listTasks({ queue, kind: "n", state: ["available", "running"], limit: 2 });
    assert.equal(page.tasks.length, 2);
    const rest = await c.listTasks({ queue, kind: "n", limit: 10, after: page.next_after });
    assert.equal(rest.tasks.length, 1);

    await c.putQueue(queue, { concurrency_limit: 3 });
    assert.equal((await c.getQueue(queue)).settings.concurrency_limit, 3);
    const name = `${queue}-nightly`;
    await c.putSchedule({ name, task: taskSpec("report", null, { queue }), cron: "0 3 * * *" });
    assert.equal((await c.getSchedule(name)).cron, "0 3 * * *");
    await c.deleteSchedule(name);
    await assert.rejects(c.getSchedule(name), (e) => e.code === "not_found");
  });

  test(`${backend}: debounce: a waiting task with the key is replaced; another key makes a new task`, async () => {
    const queue = uniq();
    const debounce = { key: `${queue}-d`, period: "10s", maxWait: 60_000 };
    const first = await c.enqueue("sync", { n: 1 }, { queue, debounce });
    assert.equal(first.inserted, true); assert.equal(first.replaced, false); assert.equal(first.debounce_key, `${queue}-d`);
    assert.equal(first.state, "scheduled");
    const second = await c.enqueue("sync", { n: 2 }, { queue, debounce });
    assert.equal(second.id, first.id); assert.equal(second.inserted, false); assert.equal(second.replaced, true);
    assert.deepEqual(second.payload, { n: 2 }); assert.ok(Date.parse(second.run_at) >= Date.parse(first.run_at));
    const got = await c.getTask(first.id);
    assert.deepEqual(got.payload, { n: 2 }); assert.equal(got.debounce_key, `${queue}-d`);
    const other = await c.enqueue("sync", { n: 3 }, { queue, debounce: { key: `${queue}-e`, period: "10s" } });
    assert.notEqual(other.id, first.id); assert.equal(other.inserted, true); assert.equal(other.replaced, false);
    await assert.rejects(c.enqueue("sync", null, { queue, runIn: "5s", debounce }),
      (e) => e instanceof DocketError && e.code === "invalid_task" && e.status === 422);
  });

  test(`${backend}: listTasks finds tasks by trace id, unique key and worker`, async () => {
    const queue = uniq();
    const trace = randomUUID().replaceAll("-", ""), worker = `w-${queue}`;
    const a = (await c.enqueue("s", 1, { queue, traceId: trace, uniqueKey: `${queue}-a` })).id;
    const b = (await c.enqueue("s", 2, { queue, uniqueKey: `${queue}-b` })).id;
    const cc = (await c.enqueue("s", 3, { queue })).id;
    // The same trace in another queue: a trace id names no single task.
    const d = (await c.enqueue("s", 4, { queue: `${queue}-x`, traceId: trace })).id;
    const got = await c.claim(queue, { worker, limit: 2, kinds: ["s"] });
    assert.deepEqual(got.map((t) => t.id).sort((x, y) => x - y), [a, b]);
    await c.complete(a, got.find((t) => t.id === a).lease.token, "ok");
    assert.equal((await c.getTask(a)).state, "completed"); assert.equal((await c.getTask(cc)).state, "available");
    const ids = async (f) => (await c.listTasks({ limit: 100, ...f })).tasks.map((t) => t.id);
    assert.deepEqual(await ids({ trace_id: trace }), [a, d]);
    assert.deepEqual(await ids({ trace_id: trace.toUpperCase() }), [a, d]);
    assert.deepEqual(await ids({ trace_id: trace, queue }), [a]);
    assert.deepEqual(await ids({ trace_id: randomUUID().replaceAll("-", "") }), []);
    assert.deepEqual(await ids({ unique_key: `${queue}-a` }), [a]);
    assert.deepEqual(await ids({ unique_key: `${queue}-b`, state: "running" }), [b]);
    assert.deepEqual(await ids({ unique_key: `${queue}-b`, state: ["completed", "available"] }), []);
    assert.deepEqual(await ids({ worker }), [a, b]);
    assert.deepEqual(await ids({ worker, order: "desc" }), [b, a]);
    assert.deepEqual(await ids({ worker, state: "completed" }), [a]);
    assert.deepEqual(await ids({ worker, trace_id: trace }), [a]);
    assert.deepEqual(await ids({ worker, unique_key: `${queue}-b` }), [b]);
    assert.deepEqual(await ids({ worker: `nobody-${queue}` }), []);
  });

  test(`${backend}: tags: listTasks and bulk counts by tag; too many tags or an empty one refused`, async () => {
    const queue = uniq();
    const a = (await c.enqueue("t", 1, { queue, tags: [`${queue}:a`, `shared-${queue}`] })).id;
    const b = (await c.enqueue("t", 2, { queue, tags: [`${queue}:a`] })).id;
    const other = await c.enqueue("t", 3, { queue, tags: [`${queue}:b`] });
    assert.deepEqual(other.tags, [`${queue}:b`]);
    assert.deepEqual((await c.getTask(a)).tags, [`${queue}:a`, `shared-${queue}`]);
    const ids = async (f) => (await c.listTasks({ limit: 100, ...f })).tasks.map((t) => t.id);
    assert.deepEqual(await ids({ tag: `${queue}:a` }), [a, b]);
    assert.deepEqual(await ids({ tag: `shared-${queue}` }), [a]);
    const refused = (e) => e instanceof DocketError && e.status >= 400 && e.status < 500;
    await assert.rejects(c.enqueue("t", null, { queue, tags: Array.from({ length: 21 }, (_, i) => `${queue}:${i}`) }), refused);
    await assert.rejects(c.enqueue("t", null, { queue, tags: [""] }), refused);
    assert.deepEqual(await ids({ queue }), [a, b, other.id]);
    assert.equal((await c.countBulk("cancel", { tag: `${queue}:a` })).total, 2);
  });

  test(`${backend}: worker labels: requires and prefer echoed; claims take what their labels satisfy; bad labels refused`, async () => {
    const queue = uniq();
    const gpu = await c.enqueue("t", 1, { queue, requires: { gpu: "a100" } });
    const plain = await c.enqueue("t", 2, { queue });
    const eu = (await c.enqueueMany([taskSpec("t", 3, { queue, prefer: { labels: { region: "eu" }, for: "1h" } })]))[0];
    assert.deepEqual(gpu.requires, { gpu: "a100" });
    assert.equal(gpu.prefer ?? null, null);
    assert.deepEqual(eu.prefer, { labels: { region: "eu" }, for: "1h" });
    assert.equal(eu.requires ?? null, null);
    assert.equal(plain.requires ?? null, null); assert.equal(plain.prefer ?? null, null);
    assert.deepEqual((await c.getTask(gpu.id)).requires, { gpu: "a100" });
    assert.deepEqual((await c.getTask(eu.id)).prefer, { labels: { region: "eu" }, for: "1h" });
    const ids = async (f) => (await c.listTasks({ limit: 100, ...f })).tasks.map((t) => t.id);
    const refused = (status, code) => (e) => e instanceof DocketError && e.status === status && e.code === code;
    // Worst values: 21 labels, an empty value; on enqueue 422 invalid_task, on a claim 400 invalid_request.
    const many = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`l${i}`, "x"]));
    await assert.rejects(c.enqueue("t", null, { queue, requires: many }), refused(422, "invalid_task"));
    await assert.rejects(c.enqueue("t", null, { queue, requires: { gpu: "" } }), refused(422, "invalid_task"));
    await assert.rejects(c.enqueue("t", null, { queue, prefer: { labels: { region: "" }, for: "1h" } }), refused(422, "invalid_task"));
    await assert.rejects(c.claim(queue, { worker: "ts", limit: 10, labels: { gpu: "" } }), refused(400, "invalid_request"));
    await assert.rejects(c.claim(queue, { worker: "ts", limit: 10, labels: many }), refused(400, "invalid_request"));
    assert.deepEqual(await ids({ queue }), [gpu.id, plain.id, eu.id]);
    assert.deepEqual(await ids({ queue, state: "running" }), []);
    // A claim without labels takes only the plain task; one with both labels the other two.
    assert.deepEqual((await c.claim(queue, { worker: "ts", limit: 10 })).map((t) => t.id), [plain.id]);
    const labelled = await c.claim(queue, { worker: "ts", limit: 10, labels: { gpu: "a100", region: "eu" } });
    assert.deepEqual(labelled.map((t) => t.id).sort((a, b) => a - b), [gpu.id, eu.id]);
    // A worker's labels go with its claims, and with its reports (GET /v1/workers).
    const wq = uniq();
    const need = await c.enqueue("t", 4, { queue: wq, requires: { gpu: "a100" } });
    const w = new Worker({ client: c, queue: wq, concurrency: 1, wait: "200ms", name: `${wq}-w`, signals: false,
      labels: { gpu: "a100" } });
    w.handle("t", (job) => job.payload);
    await runUntil(w, () => w.stats.completed === 1);
    assert.equal((await c.getTask(need.id)).state, "completed");
    assert.deepEqual((await c.listWorkers()).find((x) => x.name === `${wq}-w`)?.report.labels, { gpu: "a100" });
  });

  test(`${backend}: claimWith: lean tasks, and what finished reported in the same round trip`, async () => {
    const queue = uniq();
    const ids = (await c.enqueueMany([0, 1, 2].map((i) => taskSpec("k", i, { queue, maxAttempts: 1 })))).map((t) => t.id);
    const first = await c.claimWith(queue, { worker: "ts", limit: 2, lean: true });
    assert.deepEqual(first.tasks, []);
    assert.deepEqual(first.lean.map((t) => [t.id, t.payload, t.attempt]), [[ids[0], 0, 1], [ids[1], 1, 1]]);
    assert.equal(first.lean[0].created_at, undefined); // lean: no more than a handler needs
    const second = await c.claimWith(queue, { worker: "ts", limit: 5, lean: true,
      complete: [{ id: ids[0], lease: first.lean[0].lease.token, result: "r" }],
      fail: [{ id: ids[1], lease: first.lean[1].lease.token, error: "e" }] });
    assert.deepEqual(second.completed.map((o) => [o.id, o.outcome, o.state]), [[ids[0], "ok", "completed"]]);
    assert.deepEqual(second.failed.map((o) => [o.id, o.outcome, o.state]), [[ids[1], "ok", "discarded"]]);
    assert.deepEqual(second.lean.map((t) => t.id), [ids[2]]);
    assert.equal((await c.getTask(ids[0])).result, "r");
    // One bad item refuses the request: nothing reported, nothing claimed.
    await assert.rejects(c.claimWith(queue, { worker: "ts", complete: [{ id: ids[2], lease: "" }] }), (e) => e.status === 400);
    assert.equal((await c.getTask(ids[2])).state, "running");
  });

  test(`${backend}: batches: tasks, progress, a callback once every task finished`, async () => {
    const queue = uniq();
    const made = await c.createBatch({ name: "import", tasks: [taskSpec("row", 1, { queue }), taskSpec("row", 2, { queue })],
      callbacks: { completed: { kind: "report", queue: `${queue}-cb`, payload: { to: "ops" } } } });
    assert.equal(made.batch.total, 2); assert.equal(made.batch.open, false);
    assert.ok(made.tasks.every((t) => t.batch_id === made.batch.id));
    assert.equal((await c.addToBatch(made.batch.id, [taskSpec("row", 3, { queue })])).batch.total, 3);
    const got = await c.claim(queue, { worker: "ts", limit: 10 });
    assert.equal(got.length, 3);
    await c.completeMany(got.map((t) => ({ id: t.id, lease: t.lease.token })));
    const done = await waitFor(async () => { const b = await c.getBatch(made.batch.id); return b.settled_at ? b : null; }, 20_000);
    assert.equal(done.done, 3); assert.deepEqual(Object.keys(done.fired), ["completed"]);
    const report = await c.getTask(done.fired.completed);
    assert.equal(report.payload.to, "ops"); assert.equal(report.payload.batch.completed, 3);
    assert.ok((await c.listBatches({ limit: 100 })).some((b) => b.id === made.batch.id));
    await assert.rejects(c.addToBatch(made.batch.id, [taskSpec("row", 4, { queue })]), (e) => e.code === "conflict" && e.status === 409);
    await assert.rejects(c.createBatch({ tasks: [{ ...taskSpec("row", 5, { queue }), unique_key: "u" }] }), (e) => e.status === 400);
    const open = (await c.createBatch({ open: true })).batch;
    assert.equal(open.open, true); assert.equal((await c.sealBatch(open.id)).open, false);
  });

  test(`${backend}: a fair queue takes partitions in turn`, async () => {
    const queue = uniq();
    await c.putQueue(queue, { fair: true });
    await c.enqueueMany([...Array(5).keys()].map((i) => taskSpec("a", i, { queue, partitionKey: "a" })));
    await c.enqueue("b", null, { queue, partitionKey: "b" });
    const got = await c.claim(queue, { worker: "ts", limit: 2 });
    assert.deepEqual(got.map((t) => t.kind).sort(), ["a", "b"]);
  });

  test(`${backend}: a dead-letter queue takes a task discarded after its last attempt`, async () => {
    const queue = uniq();
    const dead = `${queue}-dead`;
    await c.putQueue(queue, { dead_letter: dead });
    assert.equal((await c.getQueue(queue)).settings.dead_letter, dead);
    const t = await c.enqueue("charge", { order: 7 }, { queue, maxAttempts: 1 });
    const [claimed] = await c.claim(queue, { worker: "ts" });
    assert.equal(claimed.id, t.id);
    await c.fail(t.id, claimed.lease.token, "card declined");
    const letters = (await c.listTasks({ queue: dead, limit: 100 })).tasks;
    assert.equal(letters.length, 1, JSON.stringify(letters));
    const [letter] = letters;
    assert.deepEqual([letter.kind, letter.payload, letter.state], ["charge", { order: 7 }, "available"]);
    const of = letter.dead_letter_of;
    assert.deepEqual([of.task_id, of.queue, of.kind, of.attempts], [t.id, queue, "charge", 1]);
    assert.equal(of.errors[0].message, "card declined"); assert.ok(of.discarded_at);
    assert.equal((await c.getTask(t.id)).state, "discarded");
    assert.equal((await c.retryTask(t.id)).state, "available");
    await assert.rejects(c.putQueue(queue, { dead_letter: queue }),
      (e) => e instanceof DocketError && e.status >= 400 && e.status < 500);
  });

  test(`${backend}: rate limits hold tasks over the limit`, async () => {
    const queue = uniq();
    const name = `rl-${queue}`.replace(/[^A-Za-z0-9_.-]/g, "-").slice(0, 90);
    const made = await c.putRateLimit(name, { kind: "window", limit: 2, period: "1h" });
    assert.equal(made.period, "1h");
    for (let i = 0; i < 3; i++) await c.enqueue("call", i, { queue, rateLimit: `${name}:acme` });
    assert.equal((await c.claim(queue, { worker: "ts", limit: 10 })).length, 2);
    assert.equal((await c.claim(queue, { worker: "ts", limit: 10 })).length, 0);
    const got = await c.getRateLimit(name);
    assert.deepEqual([got.admitted, got.keys, got.blocked], [2, 1, 1]);
    assert.ok((await c.listRateLimits()).some((l) => l.name === name));
    await assert.rejects(c.putRateLimit(name, { kind: "window", limit: 2 }), (e) => e.status === 400);
    await c.deleteRateLimit(name);
    assert.equal((await c.claim(queue, { worker: "ts", limit: 10 })).length, 1);
  });

  test(`${backend}: bulk actions over a filter: counted, asked, followed to the end`, async () => {
    const queue = uniq();
    await c.enqueueMany(Array.from({ length: 30 }, (_, i) => taskSpec("k", { i }, { queue })));
    const counted = await c.countBulk("cancel", { queue });
    assert.deepEqual([counted.total, counted.more], [30, false]);
    let job = await c.bulk("cancel", { queue, states: ["available"] });
    const deadline = Date.now() + 60000;
    while (job.state !== "completed") {
      assert.ok(Date.now() < deadline, JSON.stringify(job));
      await new Promise((r) => setTimeout(r, 100));
      job = await c.getBulk(job.id);
    }
    assert.deepEqual([job.done, job.skipped, job.action], [30, 0, "cancel"]);
    await assert.rejects(c.bulk("retry", { queue, states: ["running"] }), (e) => e.status === 400);
  });

  test(`${backend}: workflows: a task runs once its dependencies completed and sees their results`, async () => {
    const queue = uniq();
    const made = await c.createWorkflow({ name: "etl", tasks: [
      { ...taskSpec("extract", null, { queue }), ref: "x" },
      { ...taskSpec("load", null, { queue }), ref: "y", depends_on: ["x"] },
    ] });
    assert.deepEqual(made.workflow.tasks.map((t) => t.waiting), [false, true]);
    const first = await c.claim(queue, { worker: "ts", limit: 10 });
    assert.deepEqual(first.map((t) => t.kind), ["extract"]);
    await c.complete(first[0].id, first[0].lease.token, { rows: 3 });
    const second = await c.claim(queue, { worker: "ts", limit: 10, wait: "10s" });
    assert.deepEqual(second.map((t) => t.kind), ["load"]); assert.deepEqual(second[0].deps, { x: { rows: 3 } });
    const w = await c.getWorkflow(made.workflow.batch.id);
    assert.deepEqual(w.tasks.map((t) => t.state), ["completed", "running"]);
    const wid = made.workflow.batch.id;
    const added = await c.addToWorkflow(wid, {
      tasks: [{ ...taskSpec("report", null, { queue }), ref: "z", depends_on: ["y"] }],
      workflows: [{ ref: "s", depends_on: ["z"], tasks: [{ ...taskSpec("q", null, { queue }), ref: "q" }] }],
    });
    assert.deepEqual(added.workflow.tasks.map((t) => t.ref), ["x", "y", "z", "s/q"]);
    assert.equal((await c.cancelWorkflow(wid)).batch.id, wid);
    // z and s/q were cancelled; a retry makes them wait for y again.
    assert.deepEqual((await c.retryWorkflow(wid)).tasks.map((t) => t.waiting), [false, false, true, true]);
    await assert.rejects(c.createWorkflow({ tasks: [{ ...taskSpec("a", null), ref: "a", depends_on: ["a"] }] }), (e) => e.status === 400);
  });

  test(`${backend}: a worker runs handlers and records results, retries, failures`, async () => {
    const queue = uniq();
    const ids = (await c.enqueueMany([...Array(30).keys()].map((i) => taskSpec("add", [i, i], { queue })))).map((t) => t.id);
    const flaky = await c.enqueue("flaky", null, { queue, maxAttempts: 5 });
    const perm = await c.enqueue("bad", null, { queue, maxAttempts: 10 });
    const boom = await c.enqueue("boom", null, { queue, maxAttempts: 1 });
    const w = new Worker({ client: c, queue, concurrency: 8, wait: "500ms", name: `${queue}-w`, signals: false });
    w.handle("add", (job) => job.payload[0] + job.payload[1]);
    w.handle("flaky", async (job) => { if (job.attempt < 3) throw new Retry(1500, `not yet (${job.attempt})`); return "third time"; });
    w.handle("bad", () => { throw new Permanent("card declined"); });
    w.handle("boom", function boomHandler() { return null.missing; });
    await runUntil(w, async () => (await c.listTasks({ queue, state: ["completed", "discarded"], limit: 100 })).tasks.length === 33);
    for (const [i, id] of ids.entries()) assert.equal((await c.getTask(id)).result, 2 * i);
    const f = await c.getTask(flaky.id);
    assert.equal(f.result, "third time"); assert.equal(f.attempt, 3);
    assert.deepEqual(f.errors.map((e) => e.message), ["not yet (1)", "not yet (2)"]);
    assert.ok(Date.parse(f.runs[1].started_at) - Date.parse(f.runs[0].finished_at) >= 1400, JSON.stringify(f.runs));
    const p = await c.getTask(perm.id);
    assert.equal(p.state, "discarded"); assert.equal(p.attempt, 1); assert.match(p.errors[0].message, /^Permanent: card declined/);
    const b = await c.getTask(boom.id);
    assert.match(b.errors[0].message, /^TypeError: .*missing/); assert.match(b.errors[0].message, /boomHandler/);
    const seen = (await c.listWorkers()).find((x) => x.name === `${queue}-w`);
    assert.ok(seen);
    assert.equal(seen.report.labels, undefined); // a worker without labels reports none
  });

  test(`${backend}: timeout aborts the handler; cancellation is seen at the next heartbeat; stages hand off`, async () => {
    const queue = uniq();
    const slow = await c.enqueue("sleepy", null, { queue, timeout: "1s", maxAttempts: 1 });
    const long = await c.enqueue("long", null, { queue, timeout: "60s" });
    const order = await c.enqueue("order", { n: 1 }, { queue, stage: "reserve" });
    const aborted = [];
    const w = new Worker({ client: c, queue, wait: "200ms", lease: "1s", signals: false });
    const hold = (job) => new Promise((resolve) => { job.signal.addEventListener("abort", () => { aborted.push(job.kind); resolve(); }); setTimeout(resolve, 30_000); });
    w.handle("sleepy", hold);
    w.handle("long", (job) => { job.progress({ step: 1 }); return hold(job); });
    w.handle("order", (job) => new NextStage("charge", { payload: { ...job.payload, reserved: true } }), { stage: "reserve" });
    w.handle("order", (job) => ({ charged: job.payload }), { stage: "charge" });
    let cancelled = false;
    await runUntil(w, async () => {
      const l = await c.getTask(long.id);
      if (!cancelled && l.state === "running" && l.progress?.step === 1) { await c.cancelTask(long.id); cancelled = true; }
      const s = await c.getTask(slow.id), o = await c.getTask(order.id), l2 = await c.getTask(long.id);
      return s.state === "discarded" && o.state === "completed" && l2.state === "cancelled" && aborted.length === 2;
    }, 20_000);
    assert.match((await c.getTask(slow.id)).errors[0].message, /timeout/);
    assert.deepEqual(aborted.sort(), ["long", "sleepy"]);
    const o = await c.getTask(order.id);
    assert.deepEqual(o.result, { charged: { n: 1, reserved: true } }); assert.ok(o.stages_done.includes("reserve"));
  });

  test(`${backend}: prefetch holds tasks and hands back the unstarted ones on stop`, async () => {
    const queue = uniq();
    const ids = (await c.enqueueMany([0, 1, 2, 3].map((i) => taskSpec("one", i, { queue })))).map((t) => t.id);
    const w = new Worker({ client: c, queue, concurrency: 1, prefetch: 3, wait: "200ms", signals: false });
    const started = [];
    w.handle("one", async (job) => { started.push(job.id); await sleep(1000); return "done"; });
    const running = w.run();
    await waitFor(async () => started.length === 1 && (await Promise.all(ids.map((id) => c.getTask(id)))).every((t) => t.state === "running"), 10_000);
    w.stop();
    await running;
    assert.deepEqual(started, [ids[0]]);
    const first = await c.getTask(ids[0]);
    assert.equal(first.state, "completed"); assert.equal(first.result, "done");
    for (const id of ids.slice(1)) {
      const t = await c.getTask(id); // released: no attempt counted, no error
      assert.deepEqual([t.state, t.attempt, t.errors], ["available", 0, []]);
    }
  });

  test(`${backend}: prefetch "auto" holds short tasks ahead and never long ones`, async () => {
    // Short handlers: the worker holds ahead (up to 1000); handlers of 300 ms with concurrency 2
    // hold none: this worker never has more tasks running in docket than handlers.
    const quick = uniq();
    await c.enqueueMany([...Array(300).keys()].map((i) => taskSpec("quick", i, { queue: quick })));
    const wq = new Worker({ client: c, queue: quick, concurrency: 2, wait: "200ms", reportIntervalMs: 0, signals: false });
    wq.handle("quick", (job) => job.payload);
    assert.equal(wq.prefetching, 0, "nothing held ahead before a handler ran");
    await runUntil(wq, async () => wq.stats.completed === 300);
    assert.ok(wq.prefetching >= 100, `short tasks: ${wq.prefetching} held ahead`);
    assert.equal(autoPrefetch(2, 0.01), 1000); assert.equal(autoPrefetch(2, 300), 0); assert.equal(autoPrefetch(10, 50), 20);

    const slow = uniq(), name = `${slow}-w`;
    await c.enqueueMany([...Array(6).keys()].map((i) => taskSpec("slow", i, { queue: slow })));
    const ws = new Worker({ client: c, queue: slow, name, concurrency: 2, wait: "200ms", reportIntervalMs: 0, signals: false });
    let most = 0;
    ws.handle("slow", async () => {
      const held = await c.listTasks({ queue: slow, state: "running", worker: name, limit: 100 });
      most = Math.max(most, held.tasks.length);
      await sleep(300);
    });
    await runUntil(ws, async () => ws.stats.completed === 6);
    assert.ok(most >= 1 && most <= 2, `at most 2 of this worker's tasks running, saw ${most}`);
    assert.equal(ws.prefetching, 0);
    assert.throws(() => new Worker({ client: c, prefetch: -1 }), /prefetch/);
    assert.throws(() => new Worker({ client: c, prefetch: 1.5 }), /prefetch/);
  });

  test(`${backend}: two claims in flight: every task once, and a stop mid-stream strands nothing`, async () => {
    const queue = uniq();
    const ids = (await c.enqueueMany([...Array(3000).keys()].map((i) => taskSpec("n", i, { queue })))).map((t) => t.id);
    const w = new Worker({ client: c, queue, concurrency: 4, claims: 2, wait: "200ms", reportIntervalMs: 0, signals: false });
    const seen = new Map();
    w.handle("n", (job) => { seen.set(job.id, (seen.get(job.id) ?? 0) + 1); return job.payload * 2; });
    await runUntil(w, async () => w.stats.completed >= 1000);
    assert.equal(w.stats.lost, 0);
    assert.ok([...seen.values()].every((n) => n === 1), "a task ran twice");
    const done = (await c.listTasks({ queue, state: "completed", limit: 10_000 })).tasks;
    assert.equal(done.length, w.stats.completed, "every completion reported is recorded, no more");
    const hurt = [];
    for (const t of (await c.listTasks({ queue, limit: 10_000 })).tasks) {
      const ok = t.state === "completed" ? t.attempt === 1 && t.result === t.payload * 2 && seen.has(t.id)
        : t.state === "available" && t.attempt === 0;
      if (!ok || t.errors?.length) hurt.push([t.id, t.state, t.attempt]);
    }
    assert.deepEqual(hurt, [], `${hurt.length} of ${ids.length} tasks hurt by the stop`);
  });

  test(`${backend}: reports are retried while the lease lasts`, async () => {
    // A proxy answers the first three requests carrying completions with 503: batched ones
    // and claims that report what finished.
    let refused = 0;
    const proxy = createServer(async (req, res) => {
      const chunks = [];
      for await (const ch of req) chunks.push(ch);
      const carries = req.url === "/v1/tasks/complete" || (req.url.endsWith("/claim") && "complete" in JSON.parse(Buffer.concat(chunks).toString()));
      if (req.method === "POST" && carries && refused < 3) {
        refused++;
        res.writeHead(503, { "content-type": "application/json" });
        res.end('{"error": {"code": "unavailable", "message": "injected"}}');
        return;
      }
      const body = chunks.length ? Buffer.concat(chunks) : undefined;
      const r = await fetch(server + req.url, { method: req.method, headers: { "content-type": "application/json" }, body });
      res.writeHead(r.status, { "content-type": r.headers.get("content-type") ?? "application/json" });
      res.end(Buffer.from(await r.arrayBuffer()));
    });
    await new Promise((r) => proxy.listen(0, "127.0.0.1", r));
    try {
      const queue = uniq();
      const ids = (await c.enqueueMany([0, 1, 2, 3, 4].map((i) => taskSpec("ok", i, { queue })))).map((t) => t.id);
      const via = new Client({ server: `http://127.0.0.1:${proxy.address().port}` });
      const w = new Worker({ client: via, queue, concurrency: 5, wait: "200ms", lease: "30s", signals: false });
      w.handle("ok", (job) => job.payload);
      await runUntil(w, async () => (await Promise.all(ids.map((id) => c.getTask(id)))).every((t) => t.state === "completed"));
      assert.equal(refused, 3);
      for (const id of ids) {
        const t = await c.getTask(id);
        assert.equal(t.attempt, 1); assert.deepEqual(t.errors, []);
      }
    } finally { proxy.close(); }
  });

  const spawnWorker = (queue, sleepMs, lease) => {
    const child = spawn(process.execPath, [fileURLToPath(new URL("./worker-proc.mjs", import.meta.url)), server, queue, String(sleepMs), lease], { stdio: ["ignore", "pipe", "inherit"] });
    const lines = [];
    createInterface({ input: child.stdout }).on("line", (l) => lines.push(l));
    const exited = new Promise((r) => child.on("exit", (code, sig) => r({ code, sig })));
    return { child, lines, exited };
  };

  test(`${backend}: SIGKILL loses nothing; SIGTERM finishes what it holds`, async () => {
    const queue = uniq();
    const ids = (await c.enqueueMany([0, 1, 2, 3].map((i) => taskSpec("slow", i, { queue, maxAttempts: 5 })))).map((t) => t.id);
    const a = spawnWorker(queue, 30_000, "3s"); // a heartbeat a second: a busy machine keeps the lease until the kill
    await waitFor(() => a.lines.filter((l) => l.startsWith("started")).length === 4, 20_000);
    a.child.kill("SIGKILL");
    await a.exited;
    const b = spawnWorker(queue, 100, "5s");
    await waitFor(async () => (await Promise.all(ids.map((id) => c.getTask(id)))).every((t) => t.state === "completed"), 40_000);
    b.child.kill("SIGTERM");
    assert.equal((await b.exited).code, 0);
    for (const id of ids) {
      const t = await c.getTask(id);
      assert.equal(t.attempt, 2); assert.equal(t.errors[0].message, "lease expired");
    }

    const q2 = uniq();
    const ids2 = (await c.enqueueMany([...Array(6).keys()].map((i) => taskSpec("slow", i, { queue: q2 })))).map((t) => t.id);
    const d = spawnWorker(q2, 1500, "30s");
    await waitFor(() => d.lines.filter((l) => l.startsWith("started")).length === 4, 20_000);
    const started = d.lines.filter((l) => l.startsWith("started")).map((l) => Number(l.split(" ")[1]));
    d.child.kill("SIGTERM");
    assert.equal((await d.exited).code, 0);
    assert.ok(d.lines.includes("exited"));
    assert.deepEqual(d.lines.filter((l) => l.startsWith("finished")).map((l) => Number(l.split(" ")[1])).sort(), [...started].sort());
    for (const id of ids2) assert.equal((await c.getTask(id)).state, started.includes(id) ? "completed" : "available");
  });

  test(`${backend}: a process through the processor helper, and the event stream`, async () => {
    const p = new Processor()
      .on("init", (req) => ({ events: [{ created: req.args }], auxState: { paid: 0 }, response: "created", action: timer("1s") }))
      .on("call", async (req) => {
        if (req.args.fail) throw new ProcessorFailure({ reason: "card declined" });
        const paid = req.auxState.paid + req.args.amount;
        return { events: [{ paid: req.args.amount }], auxState: { paid }, response: { paid, seen: req.events.length } };
      })
      .on("timeout", () => ({ events: ["reminded"], metadata: { reminded: true } }))
      .on("repair", () => ({ response: "repaired" }));
    const srv = await p.listen(0);
    try {
      const ns = uniq();
      await c.putNamespace(ns, `http://127.0.0.1:${srv.address().port}/`, { process_step_timeout: "10s" });
      assert.equal(await c.initProcess(ns, "order-1", { sku: "x" }), "created");
      await assert.rejects(c.initProcess(ns, "order-1", {}), (e) => e.code === "process_exists");
      assert.deepEqual(await c.callProcess(ns, "order-1", { amount: 5 }), { paid: 5, seen: 1 });
      assert.deepEqual(await c.callProcess(ns, "order-1", { amount: 7 }), { paid: 12, seen: 2 });
      const view = await waitFor(async () => { const v = await c.getProcess(ns, "order-1"); return v.process.metadata?.reminded ? v : null; }, 20_000);
      assert.deepEqual(view.history.map((e) => e.payload), [{ created: { sku: "x" } }, { paid: 5 }, { paid: 7 }, "reminded"]);
      await assert.rejects(c.callProcess(ns, "order-1", { fail: true }), (e) => e.code === "processor_error" && e.status === 422);
      assert.equal((await c.getProcess(ns, "order-1")).process.status, "error");
      await c.repairProcess(ns, "order-1", {});
      assert.equal((await c.getProcess(ns, "order-1")).process.status, "running");
      const kinds = [];
      for await (const n of c.events({ namespace: ns })) { kinds.push(n.kind); if (n.kind === "repaired") break; }
      assert.equal(kinds[0], "created"); assert.equal(kinds.filter((k) => k === "event").length, 4); assert.ok(kinds.includes("failed"));
    } finally { srv.close(); }
  });
}

// Issue 37: a worker (concurrency 4) told to stop within ±30 ms of the moment 20 tasks become
// available, 30 times; a claim given up on is released by its claim_id. The backends' rounds run
// at once (each on its own server and queue): a round mostly waits, and one after another they
// took 90 s.
async function stopRounds(backend, server) {
  const c = new Client({ server });
  const queue = uniq();
  let seed = 37;
  const rand = () => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed / 2147483648; };
  const ids = [];
  for (let round = 0; round < 30; round++) {
    const client = new Client({ server });
    const w = new Worker({ client, queue, concurrency: 4, wait: "5s", shutdownGraceMs: 5000, reportIntervalMs: 0, signals: false });
    w.handle("k", async (job) => job.payload);
    const running = w.run();
    await sleep(300); // its claim is long-polling
    const off = Math.round(rand() * 60 - 30);
    const specs = Array.from({ length: 20 }, (_, i) => taskSpec("k", i, { queue }));
    if (off < 0) {
      w.stop(); await sleep(-off); ids.push(...(await c.enqueueMany(specs)).map((t) => t.id));
    } else {
      const made = c.enqueueMany(specs); await sleep(off); w.stop(); ids.push(...(await made).map((t) => t.id));
    }
    const ended = await Promise.race([running.then(() => true), sleep(10_000).then(() => false)]);
    assert.ok(ended, `${backend}, round ${round}: the stop took over its 5 s grace`);
  }
  const hurt = [];
  for (const id of ids) {
    const t = await c.getTask(id);
    if (!["available", "completed"].includes(t.state) || t.errors.length || t.attempt !== (t.state === "completed" ? 1 : 0)) hurt.push([id, t.state, t.attempt]);
  }
  assert.deepEqual(hurt, [], `${backend}: ${hurt.length} of ${ids.length} tasks hurt by a stop`);
}

test(`${Object.keys(SERVERS).join(", ")}: a stop as tasks arrive strands nothing and ends within its grace`, async () => {
  await Promise.all(Object.entries(SERVERS).map(([backend, server]) => stopRounds(backend, server)));
});

test("tokens and TLS with a private CA", async () => {
  const url = process.env.DOCKET_TEST_TLS_URL, caFile = process.env.DOCKET_TEST_CA, token = process.env.DOCKET_TEST_TOKEN;
  const admin = new Client({ server: url, token, caFile });
  const created = await admin.createToken({ name: "ts-enqueue", scopes: ["enqueue"] });
  assert.ok(created.token);
  assert.ok((await admin.listTokens()).some((t) => t.name === "ts-enqueue"));
  const t = await admin.enqueue("tls", 1, { queue: "ts-tls" });
  assert.equal((await admin.getTask(t.id)).payload, 1);
  const limited = new Client({ server: url, token: created.token, caFile });
  await limited.enqueue("tls", 2, { queue: "ts-tls" });
  await assert.rejects(limited.listTokens(), (e) => e.code === "forbidden");
  await assert.rejects(new Client({ server: url, token: "", caFile }).enqueue("tls", 3), (e) => e.code === "unauthenticated" && e.status === 401);
  await assert.rejects(new Client({ server: url, token }).status(), (e) => !(e instanceof DocketError));
  process.env.DOCKET_TOKEN = token;
  try { await new Client({ server: url, caFile }).revokeToken("ts-enqueue"); } finally { delete process.env.DOCKET_TOKEN; }
});
