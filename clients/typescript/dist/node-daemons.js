/**
 * node-daemons' task worker (seed 003) on docket's {@link Worker}: a worker written for
 * node-daemons — a subclass of its `TaskWorker` overriding `handleTask(task)` and `delay(task)` —
 * moves over by changing its import:
 *
 * ```js
 * const { TaskWorker } = require("@docket/client"); // was: require('../components/task_worker')
 *
 * class Sample extends TaskWorker {
 *   handleTask(task) {                     // task.body, task.attempts, … as node-daemons passed them
 *     this.logger.info("Sample Task:", task);
 *     return doTheWork(task.body);         // resolves: done; rejects: retried after delay(task)
 *   }
 * }
 * const worker = new Sample("sample", { queue: "video", count: 2, maxAttempts: 3, delayRatio: 60000 });
 * worker.start();
 * worker.on("stop", () => process.exit());  // after worker.stop(), once the tasks in hand finished
 * ```
 *
 * Its config keeps node-daemons' names and defaults: `queue`, `count` (tasks at once, 1),
 * `sleep` (ms, 1000: how long a claim waits for a task before asking again), `maxAttempts` (3)
 * and `delayRatio` (ms, 300000: `delay(task)` is `task.attempts × delayRatio`). docket's own:
 * `server` (else `$DOCKET_SERVER`) or `client`, `kinds` (the task kinds to take, `[queue]` by
 * default: a node-daemons task has no kind), `labels` (the worker's labels), `logger`,
 * `shutdownGraceMs` and `signals`.
 */
import { EventEmitter } from "node:events";
import { hostname } from "node:os";
import { Client } from "./client.js";
import { Permanent, Retry, Worker } from "./worker.js";
/** node-daemons' worker states (`GET /v1/workers` reports the same words). */
export const WorkerStates = { STATE_IDLE: "idle", STATE_WORK: "work", STATE_STOP: "stop" };
/** docket's task in node-daemons' words. */
export function nodeDaemonsTask(t) {
    return {
        id: t.id, node_id: t.node ?? null, queue: t.queue, status: "working", attempts: Math.max(0, t.attempt - 1),
        priority: t.priority, body: t.payload, start_at: t.run_at, finish_at: t.expires_at ?? null,
        worker_node_id: t.attempt_node ?? null, worker_started_at: t.attempted_at ?? null, checked_at: t.attempted_at ?? null,
        created_at: t.created_at, updated_at: t.updated_at ?? t.created_at, kind: t.kind, task: t,
    };
}
function errorText(e) {
    if (e instanceof Error)
        return e.stack?.startsWith(`${e.name}: ${e.message}`) ? e.stack : `${e.name}: ${e.message}\n${e.stack ?? ""}`;
    return String(e);
}
/**
 * node-daemons' `TaskWorker`: subclass it and override {@link handleTask} (and {@link delay}).
 * Events: `stop`, once the worker stopped.
 */
export class TaskWorker extends EventEmitter {
    name;
    /** The config with node-daemons' defaults filled in. */
    conf;
    logger;
    /** True before `start()` and after `stop()`. */
    stopped = true;
    /** Tasks being handled now. */
    count = 0;
    /** The docket worker underneath (set by `start()`). */
    worker = null;
    finished = false;
    constructor(name, conf = {}) {
        super();
        this.name = name;
        const defined = Object.fromEntries(Object.entries(conf).filter(([, v]) => v !== undefined));
        this.conf = { sleep: 1000, maxAttempts: 3, delayRatio: 300_000, count: 1, ...defined, queue: conf.queue || "default" };
        const tag = `[worker-${name}]`;
        this.logger = conf.logger ?? { info: (...a) => console.log(tag, ...a), warn: (...a) => console.warn(tag, ...a) };
    }
    /** `idle`, `work` (a task in hand) or `stop`; null before `start()`. */
    get state() {
        if (this.finished)
            return WorkerStates.STATE_STOP;
        if (!this.worker)
            return null;
        return this.count > 0 ? WorkerStates.STATE_WORK : WorkerStates.STATE_IDLE;
    }
    /** Handles one task: resolve (with the task's result) when done; reject (or throw) to fail the attempt. */
    handleTask(_task) {
        return Promise.resolve();
    }
    /** Ms before a failed task runs again: `task.attempts × delayRatio` (0 after the first failure). */
    delay(task) {
        return Promise.resolve(task.attempts * this.conf.delayRatio);
    }
    /** Starts working the queue in the background; resolves at once. */
    start() {
        if (this.worker || this.finished)
            return Promise.resolve();
        this.logger.info("Start");
        this.stopped = false;
        const c = this.conf;
        const worker = new Worker({
            client: c.client ?? new Client({ server: c.server }), queue: c.queue, concurrency: c.count, wait: c.sleep,
            name: `${hostname()}-${process.pid}-${this.name}`, shutdownGraceMs: c.shutdownGraceMs, signals: c.signals ?? false,
            labels: c.labels,
            fullTasks: true, // node-daemons' task row (queue, priority, start_at, ...)
            // node-daemons takes `count` tasks at a time and holds none it cannot start (its other
            // nodes run them): no tasks held ahead, one claim at a time.
            prefetch: 0, claims: 1,
        });
        for (const kind of c.kinds ?? [c.queue])
            worker.handle(kind, (job) => this.work(job));
        this.worker = worker;
        worker.run().catch((e) => this.logger.warn("Loop error:", e)).finally(() => {
            this.finished = true;
            this.stopped = true;
            this.emit("stop");
        });
        return Promise.resolve();
    }
    /** Claims nothing more; the tasks in hand finish (within `shutdownGraceMs`), then `stop` is emitted. */
    stop() {
        this.logger.info("Stop");
        this.stopped = true;
        if (this.worker) {
            this.worker.stop();
        }
        else if (!this.finished) {
            this.finished = true;
            this.emit("stop");
        }
    }
    async work(job) {
        const task = nodeDaemonsTask(job.task); // fullTasks, above
        this.count++;
        try {
            const result = await this.handleTask(task);
            this.logger.info("Task completed:", task.id);
            return result;
        }
        catch (err) {
            this.logger.warn("Handle error:", err);
            const text = errorText(err);
            if (task.attempts + 1 >= this.conf.maxAttempts) {
                this.logger.warn("Task failed:", task.id);
                throw new Permanent(text);
            }
            const ms = Number(await this.delay(task));
            this.logger.warn("Task failed:", task.id);
            throw new Retry(Number.isFinite(ms) && ms > 0 ? Math.round(ms) : 0, text);
        }
        finally {
            this.count--;
        }
    }
}
