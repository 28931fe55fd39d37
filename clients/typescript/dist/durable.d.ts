import { type Duration } from "./durations.js";
import type { components } from "./schema.js";
/** A journal entry as docket answers it (`GET /v1/workflow-runs/{id}/steps`). */
export type JournalEntry = components["schemas"]["Entry"];
/** A workflow run (`GET /v1/workflow-runs/{id}`). */
export type WorkflowRun = components["schemas"]["WorkflowRun"];
/** The terminal states of a run. */
export declare const FINISHED_RUN_STATES: readonly string[];
/** Options of {@link WorkflowContext.step}. */
export interface StepOptions {
    /** Runs of the function before the step is recorded as failed [3]. */
    maxAttempts?: number;
    /** Delay before the second run [1 s], multiplied by `factor` [2] per further run, at most `max` [60 s]. */
    backoff?: {
        initial?: Duration;
        factor?: number;
        max?: Duration;
    };
}
/** What a step's function gets. */
export interface StepInfo {
    /** This run of the function (1 = the first). */
    attempt: number;
    /** Aborted when the execution ends here (the run was cancelled, the lease lost, the worker stops). */
    signal: AbortSignal;
}
/** The function of a workflow: `(ctx, input) => result` (any JSON). */
export type WorkflowFunction = (ctx: WorkflowContext, input: any) => unknown | Promise<unknown>;
/** A step whose function failed `maxAttempts` times (or threw `Permanent`); also raised on replay of such a step. */
export declare class StepFailed extends Error {
    readonly step: string;
    readonly error: string;
    readonly attempts: number;
    constructor(step: string, error: string, attempts: number);
}
/** A child run that ended failed or cancelled, raised by {@link ChildHandle.result}. */
export declare class ChildFailed extends Error {
    readonly childId: string;
    readonly workflow: string;
    readonly state: string;
    readonly error: string | null;
    constructor(childId: string, workflow: string, state: string, error: string | null);
}
/** The code asked for another durable call than the journal holds at that number: the run fails with it. */
export declare class NonDeterminismError extends Error {
    constructor(message: string);
}
/**
 * Thrown inside the function when its execution ends here (the run sleeps or waits, the run was
 * cancelled, the lease was lost): not an error of the workflow. Do not catch it (a `catch` that
 * swallows it changes nothing: every later durable call throws it again and the function's
 * outcome is ignored).
 */
declare class Ended extends Error {
    readonly why: "suspended" | "lost";
    constructor(why: "suspended" | "lost");
}
/** A server call of an execution: `op` is `resume`, `steps`, `suspend` or `finish` of the run. */
export type WorkflowPost = (op: "resume" | "steps" | "suspend" | "finish", body: Record<string, unknown>) => Promise<any>;
/** How one execution ended. */
export type ExecutionOutcome = "finished" | "suspended" | "lost";
export interface ExecutionOptions {
    runId: string;
    workflow: string;
    /** The run's queue: its children's, unless they name one. */
    queue?: string;
    input: unknown;
    /** The task's first attempt and no stage: the journal is empty, no `resume` call. */
    fresh: boolean;
    lease: string;
    fn: WorkflowFunction;
    post: WorkflowPost;
    /**
     * Send a step's entry with the next server call (before the next step runs, or with the
     * wait or the finish that follows) instead of on its own [true]: one round trip fewer per
     * run; a step is still recorded before anything durable follows it.
     */
    deferSteps?: boolean;
    /** Warnings (an execution abandoned on an outage). */
    warn?: (msg: string) => void;
}
/** A child run started by {@link WorkflowContext.startChild}. */
export declare class ChildHandle {
    readonly id: string;
    readonly workflow: string;
    private readonly ctx;
    /** @internal */
    constructor(id: string, workflow: string, ctx: WorkflowContext);
    /** Waits (durably) for the child's end: its result, or {@link ChildFailed}. */
    result<T = unknown>(): Promise<T>;
}
/** What a workflow's function gets: its durable calls. */
export declare class WorkflowContext {
    private readonly o;
    readonly runId: string;
    readonly workflow: string;
    readonly input: unknown;
    private readonly journal;
    private readonly journalLength;
    /** The server's clock at `resume`: a sleep whose `wake_at` is past it is over. */
    private readonly serverNow;
    private seq;
    private pending;
    private chain;
    private ctl?;
    /** @internal */ ended?: Ended;
    /** @internal */ nondet?: NonDeterminismError;
    /** @internal A call refused for what it carried (400, 413, a child's id taken): the run fails with it. */
    fatal?: Error;
    /** @internal */
    constructor(o: ExecutionOptions, journal: JournalEntry[], serverNow: number);
    /** True while the function replays what the journal holds (no new call has been made yet). */
    get replaying(): boolean;
    /** Aborted when this execution ends (suspended, cancelled, lease lost, the worker stops). */
    get signal(): AbortSignal;
    /** @internal Ends the execution here: every later durable call throws, the outcome is ignored. */
    end(why: "suspended" | "lost"): Ended;
    /** @internal Resolves once every durable call made so far is settled. */
    idle(): Promise<void>;
    /**
     * @internal At the function's return: the journal's entries it did not ask for (the code
     * changed under the run), as a non-determinism error's text; undefined when there are none.
     */
    leftover(): string | undefined;
    /** @internal The entries not yet sent (they go with `finish`). */
    takePending(): Record<string, unknown>[];
    /** Durable calls run one at a time, in call order (the order numbers them). */
    private serial;
    /** The journal's entry at the current number, checked against what the code asks for. */
    private expect;
    private post;
    /**
     * @internal What a refused or failed server call becomes: the lease's refusals end the
     * execution quietly; the server's non-determinism fails the run; a call refused for what it
     * carried fails the run with the refusal (its entries were not recorded); an outage the
     * worker could not get past abandons the execution (the task runs again once its lease ends).
     */
    refused(e: unknown): Error;
    private flush;
    private suspend;
    /**
     * A step: runs `fn` once for the run (its result, any JSON, is recorded and returned on every
     * replay). A failure is retried here with backoff (`maxAttempts` 3, 1 s ×2, at most 60 s;
     * `Permanent` is not retried); the last one is recorded and thrown as {@link StepFailed}
     * (the function may catch it; uncaught, the run fails with it).
     */
    step<T>(name: string, fn: (info: StepInfo) => T | Promise<T>, opts?: StepOptions): Promise<T>;
    /** Sleeps durably (`"5s"`, `"1d"` or ms): the run is handed back to docket and taken up again when it is due. */
    sleep(duration: Duration): Promise<void>;
    /**
     * Waits durably for an event `name` sent to the run (`client.sendEvent`; one sent before the
     * wait started waits in the run's mailbox): its payload, or `undefined` when `timeout` passed
     * first (a payload is JSON, never `undefined`). Without `timeout` it waits for ever.
     */
    waitForEvent<T = unknown>(name: string, o?: {
        timeout?: Duration;
    }): Promise<T | undefined>;
    /**
     * Starts a child run of `workflow` (id: `id`, else `<this run's id>:<number>`; its queue:
     * `queue`, else this run's). The child is created with this call; `await handle.result()`
     * waits for it. A child not awaited runs on its own.
     */
    startChild(workflow: string, input?: unknown, o?: {
        id?: string;
        queue?: string;
    }): Promise<ChildHandle>;
    /** @internal {@link ChildHandle.result}. */
    awaitChild(h: ChildHandle): Promise<unknown>;
    /** The time, recorded: a replay returns the same `Date`. */
    now(): Promise<Date>;
    /** A random number in [0, 1), recorded. */
    random(): Promise<number>;
    /** A random UUID, recorded. */
    uuid(): Promise<string>;
    private small;
    /**
     * Whether this run takes the code path of patch `id` (Temporal's rule): a run that reached
     * this point before the patch existed replays the old path (false); every other run records
     * the marker and takes the new one (true). Once no old run is left, drop the check.
     */
    patched(id: string): Promise<boolean>;
}
/**
 * Runs one execution of a run: `resume` unless fresh, the function from the top, then `finish`
 * (or nothing: suspended, or no longer this worker's). Never throws.
 */
export declare function executeWorkflow(o: ExecutionOptions, abort?: (onAbort: () => void) => void): Promise<ExecutionOutcome>;
export {};
