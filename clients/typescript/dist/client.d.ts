import { type Duration } from "./durations.js";
import { DocketError } from "./errors.js";
import type { components } from "./schema.js";
import type { JournalEntry, WorkflowRun } from "./durable.js";
export type Schemas = components["schemas"];
export type Task = Schemas["Task"] & {
    version?: string | null;
};
export type NewTask = Schemas["NewTask"];
export type TaskPage = Schemas["TaskPage"];
export type ItemOutcome = Schemas["ItemOutcome"];
export type Notification = Schemas["Notification"];
export type ProcessView = Schemas["ProcessView"];
export type QueueStats = Schemas["QueueStats"];
export type Schedule = Schemas["Schedule"];
export type WorkerReport = Schemas["WorkerReport"];
export type CompleteItem = Schemas["CompleteRequest"] & {
    id: number;
};
export type FailItem = Schemas["FailRequest"] & {
    id: number;
};
/** A claimed task as a lean claim answers it: id, kind, payload, attempt, max_attempts, stage, timeout, attempted_at, lease (+ trace_id, process, batch_id, deps where present). */
export type LeanTask = Schemas["LeanTask"];
/** The whole answer of a claim: `tasks` (full), or `lean` when asked; the outcomes of the reports it carried. */
export type ClaimAnswer = Schemas["ClaimResponse"];
/** Options of a claim ({@link Client.claim}, {@link Client.claimWith}). */
export interface ClaimOptions {
    worker: string;
    limit?: number;
    lease?: Duration;
    wait?: Duration;
    kinds?: string[];
    stages?: string[];
    /**
     * The claim's labels (`{ gpu: "a100", region: "eu" }`: at most 20, names 1..64 and values
     * 1..128 characters): it takes the tasks whose `requires` (and, for a while, `prefer`) these
     * include. Without labels a claim takes only tasks that require nothing and prefer nothing
     * (or whose preference ran out).
     */
    labels?: Record<string, string>;
    /** A random UUID naming the claim, for {@link Client.releaseClaim}. */
    claimId?: string;
    signal?: AbortSignal;
}
/** Options of one task (every `NewTask` field but `kind` and `payload`). */
export interface TaskOptions {
    queue?: string;
    priority?: number;
    runAt?: string | Date;
    runIn?: Duration;
    uniqueKey?: string;
    concurrencyKey?: string;
    concurrencyLimit?: number;
    /** Rate limit key: a limit's name, or `name:partition`. */
    rateLimit?: string;
    /** The partition (tenant) of the task: fair queues take partitions in turn. */
    partitionKey?: string;
    timeout?: Duration;
    backoff?: Schemas["Backoff"];
    stage?: string;
    userId?: string;
    traceId?: string;
    maxAttempts?: number;
    expiresAt?: string | Date;
    expiresIn?: Duration;
    node?: string;
    progress?: unknown;
    /**
     * Debounce by key: while a task with `key` waits (never claimed), enqueueing again replaces
     * it (`replaced` true, the same id) and moves its run_at to now + `period`, never past its
     * first enqueue + `maxWait`. Excludes `runAt`, `runIn` and `uniqueKey`; one task per request.
     */
    debounce?: {
        key: string;
        period: Duration;
        maxWait?: Duration;
    };
    /**
     * Tags (`"customer:42"`, `"plan:pro"`): at most 20, each 1..128 characters, no duplicates;
     * each a filter of {@link Client.listTasks} (`tag`) and of bulk actions.
     */
    tags?: string[];
    /**
     * Labels a claim must carry to take the task, ever (`{ gpu: "a100" }`: at most 20, names
     * 1..64 and values 1..128 characters, no control characters); see {@link ClaimOptions.labels}.
     */
    requires?: Record<string, string>;
    /**
     * Labels a claim should carry: for `for` after the task is due (ms or humantime, 0..30 days)
     * only a claim with `labels` takes it, then any claim may.
     */
    prefer?: {
        labels: Record<string, string>;
        for: Duration;
    };
}
export interface ClientOptions {
    /** Server URL [`$DOCKET_SERVER`, else `http://127.0.0.1:7070`]. */
    server?: string;
    /** API token [`$DOCKET_TOKEN`]. */
    token?: string;
    /** PEM file of CA certificates to trust for `https://` (besides the system's). */
    caFile?: string;
    /** Per-request timeout in ms, long polls excepted [30000]. */
    timeoutMs?: number;
    /** Most connections to the server at once [256]; they are kept alive and reused. */
    maxSockets?: number;
}
/** A `NewTask` body from `kind`, `payload` and {@link TaskOptions}. */
export declare function taskSpec(kind: string, payload?: unknown, o?: TaskOptions): NewTask;
/** Every operation of docket's API. Errors: {@link DocketError} with docket's `code`. */
export declare class Client {
    readonly server: string;
    private readonly headers;
    private readonly timeoutMs;
    private readonly fetch;
    /**
     * Requests go through {@link HttpPool}: node:http(s) on kept-alive connections (a fraction of
     * `fetch`'s CPU per request on Node 20: a worker's round trips are its cost); the event stream
     * through `fetch`.
     */
    private readonly pool;
    /** The header lines every request carries (host, content-type, user-agent, authorization). */
    private readonly head;
    /** The server URL's path (requests' paths go after it). */
    private readonly prefix;
    constructor(opts?: ClientOptions);
    /** Closes the kept-alive connections not in use (they do not keep the process alive anyway). */
    close(): void;
    /** One request; `waitMs` lengthens the timeout for long polls. */
    request<T = unknown>(method: string, path: string, body?: unknown, o?: {
        query?: Record<string, unknown>;
        headers?: Record<string, string>;
        waitMs?: number;
        signal?: AbortSignal;
    }): Promise<{
        value: T;
        headers: Headers;
    }>;
    private call;
    /**
     * `POST /v1/tasks`: one task → the stored task (`inserted` false when a unique key returned an
     * existing one; `replaced` true when a debounced enqueue replaced the waiting task).
     */
    enqueue(kind: string, payload?: unknown, options?: TaskOptions): Promise<Task>;
    /** `POST /v1/tasks` with `{tasks}` (≤ 10,000, one transaction) → the tasks. */
    enqueueMany(specs: NewTask[]): Promise<Task[]>;
    /** `GET /v1/tasks/{id}` → the task with its `version` (the ETag). */
    getTask(id: number): Promise<Task>;
    /** `GET /v1/tasks` → a page `{tasks, next_after}`; `state` takes several states; `tag` one tag. */
    listTasks(filter?: {
        queue?: string;
        state?: string | string[];
        kind?: string;
        limit?: number;
        after?: number;
        user_id?: string;
        text?: string;
        concurrency_key?: string;
        order?: string;
        trace_id?: string;
        unique_key?: string;
        worker?: string;
        tag?: string;
    }): Promise<TaskPage>;
    /** `PATCH /v1/tasks/{id}`; with `version` (an ETag) → 412 `version_mismatch` if it moved on. */
    updateTask(id: number, patch: Schemas["TaskPatch"], version?: string): Promise<Task>;
    /** Cancel: a waiting task at once, a running one at its next heartbeat or report. */
    cancelTask(id: number): Promise<Task>;
    /** Run a finished task again. */
    retryTask(id: number): Promise<Task>;
    /** A scheduled or retryable task becomes available now. */
    runNow(id: number): Promise<Task>;
    /** `POST /v1/tasks/bulk` (admin): `action` over every task `filter` matches now, in the background; poll `getBulk`. */
    bulk(action: Schemas["BulkAction"], filter?: Schemas["BulkFilter"]): Promise<Schemas["BulkJob"]>;
    /** `POST /v1/tasks/bulk` with `dry_run`: how many tasks `action` would change now. */
    countBulk(action: Schemas["BulkAction"], filter?: Schemas["BulkFilter"]): Promise<Schemas["BulkCount"]>;
    /** `GET /v1/tasks/bulk/{id}`: state, total, done, skipped. */
    getBulk(id: number): Promise<Schemas["BulkJob"]>;
    /** `POST /v1/queues/{queue}/claim` → tasks with `lease {token, expires_at, trace_id}`; `wait` long-polls (≤ 60 s). */
    claim(queue: string, o: ClaimOptions): Promise<Task[]>;
    /**
     * `POST /v1/queues/{queue}/claim`, the whole answer. `complete`/`fail` report what finished in
     * the same round trip (recorded and committed before the claim looks; outcomes in `completed`
     * and `failed`, in order; one bad item refuses the request, nothing written); `lean` answers
     * {@link LeanTask}s in `lean` (and `tasks` empty).
     */
    claimWith(queue: string, o: ClaimOptions & {
        lean?: boolean;
        complete?: CompleteItem[];
        fail?: FailItem[];
    }): Promise<ClaimAnswer>;
    /** `POST /v1/tasks/{id}/heartbeat` → the task (new `lease_expires_at`); 409 `cancelled`/`lease_lost`/`timed_out`. */
    heartbeat(id: number, lease: string, o?: {
        progress?: unknown;
        extend?: Duration;
    }): Promise<Task>;
    /** `POST /v1/tasks/{id}/complete`; `next_stage` (+ `payload`, `priority`, `run_in`/`run_at`) hands it on. */
    complete(id: number, lease: string, result?: unknown, next?: Omit<Schemas["CompleteRequest"], "lease" | "result" | "id">): Promise<Task>;
    /** `POST /v1/tasks/{id}/fail`: retried per its backoff (or after `retry_in`), or discarded when permanent. */
    fail(id: number, lease: string, error: string, o?: {
        retryIn?: Duration;
        permanent?: boolean;
        worker?: string;
    }): Promise<Task>;
    /** `POST /v1/tasks/complete` → one outcome per item (`ok`, `lease_lost`, `cancelled`, `timed_out`, `not_found`). */
    completeMany(items: CompleteItem[]): Promise<ItemOutcome[]>;
    /** `POST /v1/tasks/fail` → one outcome per item. */
    failMany(items: FailItem[]): Promise<ItemOutcome[]>;
    /**
     * `POST /v1/queues/{queue}/claims/{claimId}/release` → the ids handed back: what a claim sent
     * with `claimId` took (its answer never arrived), available again at once, no attempt counted
     * — also when this arrives before the claim commits.
     */
    releaseClaim(queue: string, claimId: string): Promise<number[]>;
    /** `POST /v1/tasks/release`: tasks held but not started, handed back (no attempt counted) → one outcome per item (`ok`, `lease_lost`). */
    releaseMany(items: {
        id: number;
        lease: string;
    }[]): Promise<ItemOutcome[]>;
    /** `POST /v1/workers/{name}/report`. */
    reportWorker(name: string, report: WorkerReport): Promise<unknown>;
    /** `GET /v1/workers`. */
    listWorkers(): Promise<Schemas["WorkerView"][]>;
    listQueues(): Promise<QueueStats[]>;
    /** `GET /v1/queues/{queue}` → `{name, counts, settings}`. */
    getQueue(queue: string): Promise<QueueStats>;
    putQueue(queue: string, settings: Schemas["QueueSettings"]): Promise<QueueStats>;
    pauseQueue(queue: string): Promise<unknown>;
    resumeQueue(queue: string): Promise<unknown>;
    /** `POST /v1/batches`: tasks in one transaction, callbacks enqueued once when every task finished. */
    createBatch(spec: Schemas["NewBatch"]): Promise<Schemas["BatchCreated"]>;
    /** `POST /v1/batches/{id}/tasks`: more tasks for a batch that has not settled (409 `conflict` once it has). */
    addToBatch(id: number, tasks: Schemas["NewTask"][], seal?: boolean): Promise<Schemas["BatchCreated"]>;
    /** `POST /v1/batches/{id}/seal`. */
    sealBatch(id: number): Promise<Schemas["Batch"]>;
    /** `GET /v1/batches/{id}`: `total`, `done`, `counts` by state, `fired`. */
    getBatch(id: number): Promise<Schemas["Batch"]>;
    /** `GET /v1/batches`: newest first. */
    listBatches(opts?: {
        before?: number;
        limit?: number;
    }): Promise<Schemas["Batch"][]>;
    /** `POST /v1/workflows`: tasks with `ref` and `depends_on`; a task runs once its dependencies completed. */
    createWorkflow(spec: Schemas["NewWorkflow"]): Promise<Schemas["WorkflowCreated"]>;
    /** `GET /v1/workflows/{id}`: its batch and each task's ref, state and edges. */
    getWorkflow(id: number): Promise<Schemas["Workflow"]>;
    /**
     * A workflow run's id (a string): `POST /v1/workflow-runs/{id}/cancel` → the run, cancelled
     * with its unfinished children. A task workflow's id (a number): `POST /v1/workflows/{id}/cancel`,
     * every unfinished task cancelled.
     */
    cancelWorkflow(id: string): Promise<WorkflowRun>;
    cancelWorkflow(id: number): Promise<Schemas["Workflow"]>;
    /** `POST /v1/workflows/{id}/tasks`: tasks (and sub-workflows) added at run time; `depends_on` may name the workflow's refs. */
    addToWorkflow(id: number, add: Schemas["WorkflowAddition"]): Promise<Schemas["WorkflowCreated"]>;
    /**
     * A workflow run's id (a string): `POST /v1/workflow-runs/{id}/retry` → the run: a failed or
     * cancelled run runs again (replaying its journal). A task workflow's id (a number):
     * `POST /v1/workflows/{id}/retry`, discarded and cancelled tasks run again, those with
     * dependencies once these complete.
     */
    retryWorkflow(id: string): Promise<WorkflowRun>;
    retryWorkflow(id: number): Promise<Schemas["Workflow"]>;
    /**
     * `POST /v1/workflow-runs`: a run of workflow `name` with `input` (any JSON) → the run, with
     * `created` false when a run of that `id` existed already (that run; `conflict` when it is
     * another workflow's). `maxAttempts`: how often its task may crash or time out [25];
     * `timeout`: its task's attempt timeout [the queue's].
     */
    startWorkflow(name: string, input?: unknown, o?: {
        id?: string;
        queue?: string;
        priority?: number;
        maxAttempts?: number;
        timeout?: Duration;
    }): Promise<WorkflowRun & {
        created: boolean;
    }>;
    /** `GET /v1/workflow-runs/{id}` → the run (`not_found` when there is none). */
    workflowRun(id: string): Promise<WorkflowRun>;
    /**
     * `GET /v1/workflow-runs/{id}/result?wait=` → the run once it finished, or when `wait` passed
     * [30 s; at most 60 s] — check its `state` (`completed`: `result`; `failed`/`cancelled`: `error`).
     */
    workflowResult(id: string, o?: {
        wait?: Duration;
    }): Promise<WorkflowRun>;
    /** `GET /v1/workflow-runs/{id}/steps` → its journal. */
    workflowSteps(id: string): Promise<JournalEntry[]>;
    /**
     * `POST /v1/workflow-runs/{id}/events`: event `name` (not starting with `docket:`) with
     * `payload` for the run → `{id, delivered}` (delivered: the run was waiting for it and was
     * woken; else it waits in the run's mailbox for a wait of that name). `invalid_state` once the run ended.
     */
    sendEvent(runId: string, name: string, payload?: unknown): Promise<{
        id: number;
        delivered: boolean;
    }>;
    /** `GET /v1/workflow-runs` → runs, newest first, by `workflow`, `state`, `parentId`, creation time. */
    listWorkflowRuns(f?: {
        workflow?: string;
        state?: string;
        parentId?: string;
        createdAfter?: string | Date;
        createdBefore?: string | Date;
        limit?: number;
    }): Promise<WorkflowRun[]>;
    /** `PUT /v1/rate-limits/{name}` (admin): `kind` window | bucket (with `period`) | concurrent. */
    putRateLimit(name: string, spec: Schemas["RateLimitSpec"]): Promise<Schemas["RateLimit"]>;
    /** `GET /v1/rate-limits/{name}`: with `keys`, `admitted`, `delayed`, `blocked`. */
    getRateLimit(name: string): Promise<Schemas["RateLimit"]>;
    listRateLimits(): Promise<Schemas["RateLimit"][]>;
    /** `DELETE /v1/rate-limits/{name}` (admin): its tasks run unlimited. */
    deleteRateLimit(name: string): Promise<unknown>;
    /** `POST /v1/schedules`: create or replace (`every` or `cron`, `timezone`, …). */
    putSchedule(spec: Schemas["ScheduleSpec"]): Promise<Schedule>;
    listSchedules(): Promise<Schedule[]>;
    getSchedule(name: string): Promise<Schedule>;
    deleteSchedule(name: string): Promise<unknown>;
    pauseSchedule(name: string): Promise<unknown>;
    resumeSchedule(name: string): Promise<unknown>;
    /** `PUT /v1/namespaces/{ns}`: the processor's URL and the namespace's settings. */
    putNamespace(ns: string, processorUrl: string, config?: Partial<Omit<Schemas["NamespaceConfig"], "processor">>): Promise<unknown>;
    getNamespace(ns: string): Promise<Schemas["NamespaceView"]>;
    /** `POST /v1/namespaces/{ns}/processes` → the processor's `response` to `init`. */
    initProcess(ns: string, id: string, args?: unknown, o?: {
        context?: unknown;
        idempotencyKey?: string;
    }): Promise<unknown>;
    /** A synchronous call → the processor's `response`. */
    callProcess(ns: string, id: string, args?: unknown, o?: {
        context?: unknown;
        idempotencyKey?: string;
        range?: Schemas["HistoryRange"];
    }): Promise<unknown>;
    /** Repair an `error` process through the processor. */
    repairProcess(ns: string, id: string, args?: unknown, context?: unknown): Promise<unknown>;
    /** `{process, history, last_event_id}`. */
    getProcess(ns: string, id: string): Promise<ProcessView>;
    traceProcess(ns: string, id: string): Promise<Schemas["ProcessTrace"]>;
    /**
     * `GET /v1/events` (server-sent events) as an endless async iterator of notifications,
     * reconnecting after the last `seq` seen. Break out of the loop (or abort `signal`) to stop.
     */
    events(o?: {
        namespace?: string;
        after?: number;
        signal?: AbortSignal;
    }): AsyncGenerator<Notification>;
    /** `POST /v1/tokens` (admin) → the token, shown once. */
    createToken(req: Schemas["TokenCreateRequest"]): Promise<Schemas["TokenCreated"]>;
    listTokens(): Promise<Schemas["TokenView"][]>;
    revokeToken(name: string): Promise<unknown>;
    status(): Promise<Schemas["StatusView"]>;
    health(): Promise<Schemas["Health"]>;
}
export { DocketError };
