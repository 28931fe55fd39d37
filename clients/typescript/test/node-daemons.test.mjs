// node-daemons' TaskWorker (seed 003) on docket: the seed's example worker, ported by changing its
// import (test/node-daemons/sample.cjs, CommonJS as node-daemons' workers are), and the rules
// docs/src/compat/node-daemons.md states, against real servers (SQLite, PostgreSQL and MariaDB).
import { test } from "node:test";
import assert from "node:assert/strict";
import { once } from "node:events";
import { createRequire } from "node:module";
import { Client, TaskWorker, WorkerStates } from "../dist/index.js";
import { SERVERS, sleep, uniq, waitFor } from "./helpers.mjs";

const Sample = createRequire(import.meta.url)("./node-daemons/sample.cjs");

/** A logger that keeps what it was given (node-daemons' workers log through this.logger). */
function keeper() {
  const lines = [];
  return { lines, info: (...a) => lines.push(["info", ...a]), warn: (...a) => lines.push(["warn", ...a]) };
}

test("node-daemons: the config's names and defaults", () => {
  const w = new TaskWorker("sample", { enabled: true, queue: "video" });
  assert.deepEqual({ queue: w.conf.queue, count: w.conf.count, sleep: w.conf.sleep, maxAttempts: w.conf.maxAttempts,
    delayRatio: w.conf.delayRatio, enabled: w.conf.enabled }, { queue: "video", count: 1, sleep: 1000, maxAttempts: 3,
    delayRatio: 300_000, enabled: true });
  assert.equal(w.name, "sample");
  assert.equal(w.state, null);
  assert.equal(w.stopped, true);
  assert.ok(new Sample("s", {}) instanceof TaskWorker);
  // The default logger: the console, prefixed with [worker-NAME].
  const log = console.log, lines = [];
  console.log = (...a) => lines.push(a);
  try { w.logger.info("Sample Task:", 1); } finally { console.log = log; }
  assert.deepEqual(lines, [["[worker-sample]", "Sample Task:", 1]]);
});

for (const [backend, server] of Object.entries(SERVERS)) {
  const c = new Client({ server });

  test(`${backend}: node-daemons' Sample worker, its import changed, works its queue`, async () => {
    const queue = uniq("nd");
    const tasks = await Promise.all([1, 2, 3, 4].map((n) => c.enqueue(queue, { n }, { queue, priority: n })));
    const logger = keeper();
    // docket's `client` in the config: this one records each claim's wait.
    const waits = [];
    class Recording extends Client {
      claimWith(q, o) { waits.push(o.wait); return super.claimWith(q, o); }
    }
    const sigterm = process.listenerCount("SIGTERM");
    // As node-daemons' app.js: new WorkerClass(name, config.workers[name]); start(); on('stop').
    const worker = new Sample("sample", { enabled: true, queue, count: 2, sleep: 3_000, client: new Recording({ server }), logger });
    const stopped = once(worker, "stop");
    worker.start();
    assert.equal(worker.stopped, false);
    assert.equal(process.listenerCount("SIGTERM"), sigterm, "signals: false by default");
    let most = 0;
    const states = new Set();
    const done = await waitFor(async () => {
      most = Math.max(most, worker.count);
      states.add(worker.state);
      const got = await Promise.all(tasks.map((t) => c.getTask(t.id)));
      return got.every((t) => t.state === "completed") && got;
    });
    assert.equal(most, 2, "count: 2 tasks at once, not more");
    assert.ok(states.has(WorkerStates.STATE_WORK));
    for (const t of done) {
      assert.equal(t.result, null); // handleTask resolved with nothing
      assert.equal(t.attempt, 1);
      assert.match(t.worker, /-sample$/);
    }
    // handleTask got the task as node-daemons' tasks row; highest priority first.
    const seen = logger.lines.filter((l) => l[1] === "Sample Task:").map((l) => l[2]);
    assert.deepEqual(seen.map((t) => t.body.n).slice(0, 2).sort(), [3, 4]);
    const t4 = seen.find((t) => t.body.n === 4);
    const stored = done.find((t) => t.id === t4.id);
    assert.deepEqual({ ...t4, task: undefined }, {
      id: stored.id, node_id: null, queue, status: "working", attempts: 0, priority: 4, body: { n: 4 },
      start_at: stored.run_at, finish_at: null, worker_node_id: stored.attempt_node, worker_started_at: stored.attempted_at,
      checked_at: stored.attempted_at, created_at: stored.created_at, updated_at: t4.task.updated_at, kind: queue, task: undefined,
    });
    assert.ok(stored.attempt_node);
    assert.equal(logger.lines.filter((l) => l[1] === "Task completed:").length, 4);
    await waitFor(() => worker.count === 0);
    assert.equal(worker.state, WorkerStates.STATE_IDLE);
    // `sleep` is each long poll's wait (a claim right after one that found tasks does not wait).
    await waitFor(() => waits.filter((w) => w !== "0s").length >= 3);
    assert.ok(waits.every((w) => w === "3000ms" || w === "0s"), JSON.stringify(waits));
    // GET /v1/workers names it with the node-daemons name at the end.
    assert.ok((await c.listWorkers()).some((w) => w.name.endsWith("-sample") && w.report.queue === queue));
    // Stopped while idle, in the middle of a claim's 3 s wait: `stop` comes at once.
    await sleep(300);
    const t0 = Date.now();
    worker.stop();
    await stopped;
    assert.ok(Date.now() - t0 < 2000, `stop took ${Date.now() - t0} ms`);
    assert.equal(worker.state, WorkerStates.STATE_STOP);
    assert.equal(worker.stopped, true);
    assert.deepEqual(logger.lines.map((l) => l[1]).filter((w) => w === "Start" || w === "Stop"), ["Start", "Stop"]);
  });

  test(`${backend}: node-daemons: a failed task runs again after delay(task) = attempts × delayRatio, maxAttempts`, async () => {
    const queue = uniq("nd");
    const starts = {};
    class Flaky extends TaskWorker {
      handleTask(task) {
        (starts[task.body.name] ??= []).push({ attempts: task.attempts, at: Date.now() });
        if (task.attempts < task.body.fail) return Promise.reject(new Error(`boom ${task.attempts}`));
        return Promise.resolve({ ok: task.attempts });
      }
    }
    const ok = await c.enqueue(queue, { name: "ok", fail: 2 }, { queue });
    const never = await c.enqueue(queue, { name: "never", fail: 99 }, { queue, maxAttempts: 10 });
    const worker = new Flaky("flaky", { queue, maxAttempts: 3, delayRatio: 1500, server, logger: keeper() });
    const stopped = once(worker, "stop");
    worker.start();
    const [a, b] = await waitFor(async () => {
      const got = await Promise.all([c.getTask(ok.id), c.getTask(never.id)]);
      return got[0].state === "completed" && got[1].state === "discarded" && got;
    });
    // The resolved value is the result; each failure is kept with the handler's error.
    assert.deepEqual(a.result, { ok: 2 });
    assert.deepEqual(a.errors.map((e) => e.message.split("\n")[0]), ["Error: boom 0", "Error: boom 1"]);
    assert.match(a.errors[0].message, /at Flaky\.handleTask/);
    assert.deepEqual(starts.ok.map((s) => s.attempts), [0, 1, 2]);
    // delay: 0 × 1500 after the first failure (again at once), 1 × 1500 after the second.
    assert.ok(starts.ok[1].at - starts.ok[0].at < 1000, `${starts.ok[1].at - starts.ok[0].at} ms`);
    assert.ok(starts.ok[2].at - starts.ok[1].at >= 1400, `${starts.ok[2].at - starts.ok[1].at} ms`);
    // maxAttempts 3: the third failure is final (discarded), whatever the task's own max_attempts.
    assert.deepEqual(starts.never.map((s) => s.attempts), [0, 1, 2]);
    assert.equal(b.max_attempts, 10);
    assert.equal(b.errors.length, 3);
    worker.stop();
    await stopped;
  });

  test(`${backend}: node-daemons: an overridden delay() sets the retry; stop() lets the task in hand finish`, async () => {
    const queue = uniq("nd");
    let release;
    const held = new Promise((r) => { release = r; });
    class Custom extends TaskWorker {
      handleTask(task) {
        if (task.body === "slow") return held.then(() => "finished");
        return Promise.reject(new Error("not yet"));
      }
      delay(task) { return 60_000 + task.attempts; } // a plain number works as well as a promise
    }
    // `kinds`: these two kinds of the queue, not the tasks whose kind is the queue's name.
    const other = await c.enqueue(queue, "not mine", { queue });
    const retried = await c.enqueue("fails", "fails", { queue });
    const worker = new Custom("custom", { queue, kinds: ["fails", "slow"], server, logger: keeper() });
    const stopped = once(worker, "stop");
    worker.start();
    const r = await waitFor(async () => { const t = await c.getTask(retried.id); return t.errors.length === 1 && t; });
    assert.notEqual(r.state, "running");
    const wait = Date.parse(r.run_at) - Date.parse(r.errors[0].at);
    assert.ok(Math.abs(wait - 60_000) < 1000, `run_at is ${wait} ms after the failure`);

    const slow = await c.enqueue("slow", "slow", { queue });
    await waitFor(() => worker.count === 1);
    assert.equal(worker.state, WorkerStates.STATE_WORK);
    worker.stop();
    let emitted = false;
    stopped.then(() => { emitted = true; });
    const later = await c.enqueue("slow", "later", { queue });
    await sleep(500);
    assert.equal(emitted, false, "stop waits for the task in hand");
    release();
    await stopped;
    assert.equal((await c.getTask(slow.id)).state, "completed");
    assert.equal((await c.getTask(slow.id)).result, "finished");
    assert.equal((await c.getTask(later.id)).state, "available", "a stopped worker claims nothing more");
    assert.equal((await c.getTask(other.id)).state, "available", "kinds: not the queue's name");
  });
}
