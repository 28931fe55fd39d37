/**
 * A processor for docket's durable processes, without hand-writing the protocol
 * (docs/src/concepts/processes.md, "The processor contract").
 *
 * ```ts
 * const p = new Processor()
 *   .on("init", (req) => ({ events: [{ created: req.args }], auxState: { paid: 0 }, response: "ok", action: timer("5m") }))
 *   .on("call", async (req) => ({ response: req.auxState }));
 * const server = await p.listen(8081);   // node:http; or p.handle(body) inside any framework
 * ```
 * A handler returns a {@link Result} (or nothing: no change); throwing {@link ProcessorFailure}
 * (or any error) answers `{"error": …}`: the process goes to `error` (init/call) or its timer is
 * retried per the namespace's retry policy.
 */
import { type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type Duration } from "./durations.js";
import type { Schemas } from "./client.js";
export type TaskType = "init" | "call" | "repair" | "timeout";
export type Action = "unset_timer" | {
    set_timer?: string;
    timeout?: string;
    remove?: boolean;
} | null;
/** Wake the process (a `timeout` step) after `after`; `remove` deletes it then. */
export declare function timer(after: Duration, remove?: boolean): Action;
/** Wake the process at `at`. */
export declare function timerAt(at: Date, remove?: boolean): Action;
export declare const UNSET_TIMER: Action;
/** docket's request, with the process's parts at hand. */
export interface Request {
    taskType: TaskType;
    args: unknown;
    context: unknown;
    process: Schemas["ProcessorProcess"];
    processId: string;
    auxState: unknown;
    /** Payloads of the history sent, in order. */
    events: unknown[];
}
/** What a handler answers: new events (payloads or `{payload, metadata}`), aux state and metadata (absent: unchanged), the caller's response, a timer action. */
export interface Result {
    events?: unknown[];
    auxState?: unknown;
    metadata?: unknown;
    response?: unknown;
    action?: Action;
}
/** Throw from a handler to answer `{"error": error}` (any JSON). */
export declare class ProcessorFailure extends Error {
    readonly error: unknown;
    constructor(error: unknown);
}
export type ProcessHandler = (req: Request) => Result | void | Promise<Result | void>;
export declare class Processor {
    private readonly handlers;
    on(taskType: TaskType, fn: ProcessHandler): this;
    /** One request body → the answer to send (always HTTP 200, JSON). */
    handle(body: unknown): Promise<Record<string, unknown>>;
    /** Serves docket's POSTs with node:http on `port` (0: a free one, see `address().port`). */
    listen(port?: number, host?: string): Promise<Server>;
}
export type { AddressInfo };
