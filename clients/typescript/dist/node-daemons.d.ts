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
import { Client, type Task } from "./client.js";
import { Worker } from "./worker.js";
/** node-daemons' worker states (`GET /v1/workers` reports the same words). */
export declare const WorkerStates: {
    readonly STATE_IDLE: "idle";
    readonly STATE_WORK: "work";
    readonly STATE_STOP: "stop";
};
export type WorkerState = (typeof WorkerStates)[keyof typeof WorkerStates];
/** What `this.logger` needs: log4js' logger fits, and so does `console`. */
export interface TaskWorkerLogger {
    info(...args: unknown[]): void;
    warn(...args: unknown[]): void;
}
/** A node-daemons worker's config (`config.workers[name]`); other keys are kept in `conf`. */
export interface TaskWorkerConf {
    /** Queue to work ["default"]. */
    queue?: string;
    /** Tasks at once [1]. */
    count?: number;
    /** Ms a claim waits for a task before asking again [1000]; a new task ends the wait at once. */
    sleep?: number;
    /** Attempts of a task; the failure of the last one is final [3]. */
    maxAttempts?: number;
    /** Ms per failed attempt: the default `delay(task)` is `task.attempts × delayRatio` [300000]. */
    delayRatio?: number;
    /** Task kinds to take [[queue]]. */
    kinds?: string[];
    /** The worker's labels, carried by its claims: it takes the tasks they satisfy (`requires`, `prefer`) [none]. */
    labels?: Record<string, string>;
    /** docket's address [$DOCKET_SERVER, else http://127.0.0.1:7070]; the token comes from $DOCKET_TOKEN. */
    server?: string;
    /** A client to use instead of `server`. */
    client?: Client;
    /** [a console logger prefixed with `[worker-NAME]`] */
    logger?: TaskWorkerLogger;
    /** Ms the tasks in hand get to finish after `stop()`; the rest are handed back and run again [30000]. */
    shutdownGraceMs?: number;
    /** Stop on SIGTERM/SIGINT [false: the application calls `stop()`, as node-daemons' master does]. */
    signals?: boolean;
    [key: string]: unknown;
}
/** A task as node-daemons' `handleTask` got it (its `tasks` row), plus docket's `kind` and `task`. */
export interface NodeDaemonsTask {
    id: number;
    /** The node the task is pinned to (docket's `node`), or null. */
    node_id: string | null;
    queue: string;
    /** Always `working` while it is handled. */
    status: "working";
    /** Failed attempts before this one (0 on the first run). */
    attempts: number;
    priority: number;
    /** The payload. */
    body: unknown;
    /** `run_at`. */
    start_at: string;
    /** `expires_at`, or null. */
    finish_at: string | null;
    /** The node that claimed this attempt. */
    worker_node_id: string | null;
    /** When this attempt started. */
    worker_started_at: string | null;
    /** When this attempt started (heartbeats keep docket's lease after that). */
    checked_at: string | null;
    created_at: string;
    updated_at: string;
    /** docket's kind. */
    kind: string;
    /** The task as docket answered the claim. */
    task: Task;
}
/** docket's task in node-daemons' words. */
export declare function nodeDaemonsTask(t: Task): NodeDaemonsTask;
/**
 * node-daemons' `TaskWorker`: subclass it and override {@link handleTask} (and {@link delay}).
 * Events: `stop`, once the worker stopped.
 */
export declare class TaskWorker extends EventEmitter {
    readonly name: string;
    /** The config with node-daemons' defaults filled in. */
    readonly conf: TaskWorkerConf & {
        queue: string;
        count: number;
        sleep: number;
        maxAttempts: number;
        delayRatio: number;
    };
    logger: TaskWorkerLogger;
    /** True before `start()` and after `stop()`. */
    stopped: boolean;
    /** Tasks being handled now. */
    count: number;
    /** The docket worker underneath (set by `start()`). */
    worker: Worker | null;
    private finished;
    constructor(name: string, conf?: TaskWorkerConf);
    /** `idle`, `work` (a task in hand) or `stop`; null before `start()`. */
    get state(): WorkerState | null;
    /** Handles one task: resolve (with the task's result) when done; reject (or throw) to fail the attempt. */
    handleTask(_task: NodeDaemonsTask): unknown | Promise<unknown>;
    /** Ms before a failed task runs again: `task.attempts × delayRatio` (0 after the first failure). */
    delay(task: NodeDaemonsTask): number | Promise<number>;
    /** Starts working the queue in the background; resolves at once. */
    start(): Promise<void>;
    /** Claims nothing more; the tasks in hand finish (within `shutdownGraceMs`), then `stop` is emitted. */
    stop(): void;
    private work;
}
