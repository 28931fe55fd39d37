import { Client, type LeanTask, type Task } from "./client.js";
import { type Duration } from "./durations.js";
import { type WorkflowFunction } from "./durable.js";
/**
 * Heartbeats per lease: one every third of it, never more often than {@link MIN_HEARTBEAT_EVERY_MS}.
 * docket's rule (`docket_core::lease::heartbeat_every`; the engine's worker and `docket worker`
 * use it): one late or lost heartbeat still leaves a third of the lease.
 */
export declare const HEARTBEATS_PER_LEASE = 3;
/** The shortest interval between heartbeats, ms (docket's `MIN_HEARTBEAT_EVERY`). */
export declare const MIN_HEARTBEAT_EVERY_MS = 100;
/** Ms between heartbeats for a lease of `leaseMs` (docket's rule). */
export declare function heartbeatEvery(leaseMs: number): number;
/** `prefetch: "auto"` holds ahead what the handlers start within this many ms at their recent pace. */
export declare const PREFETCH_AUTO_WAIT_MS = 100;
/** The most tasks `prefetch: "auto"` holds ahead. */
export declare const PREFETCH_AUTO_MAX = 1000;
/**
 * Tasks held ahead under `prefetch: "auto"` (the same rule in every docket client): as many as
 * `concurrency` handlers taking `avgMs` each start within {@link PREFETCH_AUTO_WAIT_MS} —
 * `floor(concurrency × 100 / avgMs)`, at most {@link PREFETCH_AUTO_MAX}; none before a handler
 * has finished (`avgMs` undefined). A held task's lease and timeout run while it waits, so long
 * tasks are never held (handlers of ≥ 100 ms × concurrency hold none) and short ones are fetched
 * in claims of up to a thousand.
 */
export declare function autoPrefetch(concurrency: number, avgMs: number | undefined): number;
/** Throw from a handler: fail this attempt and retry after `delay` (ms or humantime) instead of the backoff. */
export declare class Retry extends Error {
    readonly delay: Duration;
    constructor(delay: Duration, message?: string);
}
/** Throw from a handler: fail the task for good (discarded, no more attempts). */
export declare class Permanent extends Error {
    constructor(message: string);
}
/** Return from a handler: hand the task on to `stage` (asyncflow's multi-stage tasks). */
export declare class NextStage {
    readonly stage: string;
    readonly o: {
        payload?: unknown;
        priority?: number;
        runIn?: Duration;
        result?: unknown;
    };
    constructor(stage: string, o?: {
        payload?: unknown;
        priority?: number;
        runIn?: Duration;
        result?: unknown;
    });
}
/** A claimed task as a handler sees it: lean (the default), or in full with `fullTasks`. */
export type ClaimedTask = LeanTask | Task;
/** What a handler gets. */
export declare class Job {
    readonly task: ClaimedTask;
    private readonly worker;
    /** @internal */ progressValue: unknown;
    private ctl?;
    private abortedWith?;
    /** @internal Called once when the attempt is aborted (the worker's race). */
    onAbort?: (reason: unknown) => void;
    /** The claimed task: a {@link LeanTask} unless the worker was made with `fullTasks`. */
    constructor(task: ClaimedTask, worker: Worker);
    /** Aborted when the attempt times out, docket cancels the task or its lease is lost, or the worker hands it back. */
    get signal(): AbortSignal;
    /** @internal */ get aborted(): boolean;
    /** @internal */ abort(reason: unknown): void;
    get id(): number;
    get kind(): string;
    get payload(): unknown;
    get attempt(): number;
    get stage(): string | null;
    get lease(): string;
    /** Record progress (any JSON): sent with the next heartbeat (`await job.heartbeat()` sends it now). */
    progress(value: unknown): void;
    /** Send a heartbeat now. */
    heartbeat(): Promise<void>;
}
export type Handler = (job: Job) => unknown | Promise<unknown>;
export interface WorkerOptions {
    /** [a Client from `$DOCKET_SERVER`/`$DOCKET_TOKEN`] */
    client?: Client;
    /** Queue to work ["default"]. */
    queue?: string;
    /** Handlers at once [10]. */
    concurrency?: number;
    /** Worker name recorded on tasks [host-pid-random]. */
    name?: string;
    /** Most tasks per claim [concurrency + prefetch, at most 1000]. */
    batch?: number;
    /**
     * Tasks claimed ahead of free handlers and held locally (their leases run, heartbeats keep
     * them; the handler's timeout counts from the claim) ["auto"]. Like graphile-worker's local
     * queue: fewer, larger claims for short tasks. `"auto"`: what the handlers start within 100 ms
     * at their recent pace ({@link autoPrefetch}: none for long tasks, up to 1000 for short ones);
     * a number: that many. On stop, held tasks not started are handed back.
     */
    prefetch?: number | "auto";
    /**
     * Claim tasks with every field of `Task` [false: lean tasks — id, kind, payload, attempt,
     * max_attempts, stage, timeout, attempted_at, lease, and trace_id, process, batch_id, deps
     * where present; `client.getTask(job.id)` reads the rest].
     */
    fullTasks?: boolean;
    /**
     * Claims in flight at once while the queue has work [2]. The first claim loop long-polls when
     * the queue is empty; the others claim only while the last claim found tasks and never wait,
     * so an idle worker holds one request. Each asks for at most its share of the free room
     * (`(concurrency + prefetch) / claims`), so together they never take more than the worker holds.
     * More than one hides the claim's round trip behind the handlers (+25–35% for short tasks).
     */
    claims?: number;
    /**
     * The worker's labels, carried by every claim (`{ gpu: "a100", region: "eu" }`: at most 20,
     * names 1..64 and values 1..128 characters): it takes the tasks whose `requires` (and, for a
     * while, `prefer`) these include [none: only tasks that require nothing and prefer nothing,
     * or whose preference ran out]. Its reports (`GET /v1/workers`) carry them too.
     */
    labels?: Record<string, string>;
    /** Long-poll per claim ["10s"]. */
    wait?: Duration;
    /** Lease per claim [the task's timeout; for the workflow queue `workflowLease`]. */
    lease?: Duration;
    /**
     * Lease per claim of the workflow queue [`lease`, else "30s"]: a run's task has a long timeout
     * (an hour), and a killed worker's runs are taken up once their lease ends.
     */
    workflowLease?: Duration;
    /** Time tasks in hand get on stop, ms [30000]. */
    shutdownGraceMs?: number;
    /** Reports to `/v1/workers` every this many ms [10000; 0: none]. */
    reportIntervalMs?: number;
    /** Stop gracefully on SIGTERM/SIGINT [true]. */
    signals?: boolean;
    /** The queue of the workflows registered with {@link Worker.workflow} ["workflows"]. */
    workflowQueue?: string;
    /**
     * Send a workflow step's entry with the run's next server call (before its next step runs, or
     * with the wait or the finish that follows) [true]; false: each on its own as the step ends.
     */
    deferSteps?: boolean;
}
export declare class Worker {
    readonly client: Client;
    readonly concurrency: number;
    readonly name: string;
    readonly queue: string;
    /** The queue of the registered workflows. */
    readonly workflowQueue: string;
    /**
     * Tasks reported `completed`/`failed` and reports answered otherwise (`lost`); workflow
     * executions that `finished` their run, `suspended` it (a sleep or a wait) or were
     * `abandoned` (the run was cancelled, the lease lost, an outage).
     */
    readonly stats: {
        completed: number;
        failed: number;
        lost: number;
        finished: number;
        suspended: number;
        abandoned: number;
    };
    private readonly batch;
    private readonly prefetch;
    /** Moving average of the handlers' run time, ms (for `prefetch: "auto"`). */
    private avgRunMs;
    private readonly fullTasks;
    private readonly claims;
    /**
     * Claims in flight that carry reports: they do not wait (the queue had work a moment ago), so
     * what finishes meanwhile goes with the next one. With none (a long poll, no free handler, the
     * stop) the reporter sends them on its own.
     */
    private carriers;
    /** Tasks asked by the claims in flight: counted as held, so the loops never take too many. */
    private asked;
    /** What the claim loops claim (set by {@link run}). */
    private sources;
    private waiters;
    private readonly buffer;
    private executing;
    private readonly wait;
    private readonly lease?;
    private readonly labels?;
    private readonly graceMs;
    private readonly reportMs;
    private readonly signals;
    private readonly handlers;
    private readonly workflows;
    private readonly deferSteps;
    private readonly workflowLease;
    private readonly running;
    private reports;
    private readonly stopping;
    /** The claim loop and the drain are over: the reporter may end. */
    private drained;
    private reportWake;
    private readonly startedAt;
    constructor(o?: WorkerOptions);
    /** `fn` handles tasks of `kind` (at `stage`, when given; without one, every stage of the kind). */
    handle(kind: string, fn: Handler, o?: {
        stage?: string;
    }): this;
    /**
     * `fn(ctx, input)` is workflow `name` (docs/src/durable/typescript.md): the worker claims the
     * tasks of its runs from the workflow queue and runs each through a {@link WorkflowContext}.
     */
    workflow(name: string, fn: WorkflowFunction): this;
    /** Ask the worker to stop gracefully. */
    stop(): void;
    /** Wakes every claim loop waiting for room (a handler ended, a claim found work, the stop). */
    private wake;
    private get carrier();
    /** Tasks held ahead of free handlers now: `prefetch`, or under "auto" {@link autoPrefetch}'s. */
    get prefetching(): number;
    private handlerKinds;
    private kinds;
    private stages;
    private handlerFor;
    /** Runs until {@link stop} (or SIGTERM/SIGINT); resolves once every report is out. */
    run(): Promise<void>;
    private claimLoop;
    /**
     * One claim loop. The first (`first`) long-polls while the queue is empty; the others claim
     * only while it has work and never wait.
     */
    private claimLane;
    /** Folds a handler's run time (ms) into the moving average `prefetch: "auto"` follows. */
    private ran;
    /** Counts reports answered (`outcomes`, one per item) and warns of those not `ok`. */
    private settle;
    /** `workflow`: the queue of a workflow run's task (run by {@link executeWorkflow}, not a handler). */
    private start;
    /** Starts held tasks while handlers are free. */
    private pump;
    private execute;
    /**
     * One execution of a workflow run: never reported through the completions and failures (docket
     * completes the task in `finish` and hands it back in `suspend`). No timer: docket's heartbeat
     * answers `timed_out` when the task's timeout passed, and the execution ends there.
     */
    private executeWorkflow;
    private reporter;
    /**
     * Until delivered or the lease is over (then the rescuer owns the task anyway). What went
     * through is done; only a part that met an outage (5xx, 429, no answer) is sent again, and a
     * part refused for what it is (4xx) is dropped.
     */
    private deliver;
    /** @internal */
    beat(job: Job): Promise<void>;
    private heartbeats;
    /** Hands back what claim `claimId` took, retrying an outage within the grace (at most 10 s). */
    private releaseClaim;
    private drain;
    /** Fails a task in hand with `retry_in: 0`: it runs again at once. */
    private handBack;
    private presence;
    private sendPresence;
}
