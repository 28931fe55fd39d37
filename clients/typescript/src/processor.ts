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
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { formatDuration, type Duration } from "./durations.js";
import type { Schemas } from "./client.js";

export type TaskType = "init" | "call" | "repair" | "timeout";
export type Action = "unset_timer" | { set_timer?: string; timeout?: string; remove?: boolean } | null;

/** Wake the process (a `timeout` step) after `after`; `remove` deletes it then. */
export function timer(after: Duration, remove = false): Action {
  return remove ? { timeout: formatDuration(after), remove: true } : { timeout: formatDuration(after) };
}
/** Wake the process at `at`. */
export function timerAt(at: Date, remove = false): Action {
  return remove ? { set_timer: at.toISOString(), remove: true } : { set_timer: at.toISOString() };
}
export const UNSET_TIMER: Action = "unset_timer";

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
export class ProcessorFailure extends Error {
  constructor(readonly error: unknown) { super(typeof error === "string" ? error : JSON.stringify(error)); this.name = "ProcessorFailure"; }
}

export type ProcessHandler = (req: Request) => Result | void | Promise<Result | void>;

export class Processor {
  private readonly handlers = new Map<TaskType, ProcessHandler>();

  on(taskType: TaskType, fn: ProcessHandler): this {
    if (!["init", "call", "repair", "timeout"].includes(taskType)) throw new Error(`unknown task_type ${taskType}`);
    this.handlers.set(taskType, fn);
    return this;
  }

  /** One request body → the answer to send (always HTTP 200, JSON). */
  async handle(body: unknown): Promise<Record<string, unknown>> {
    const b = body as Schemas["ProcessorRequest"];
    if (!b || typeof b !== "object" || !b.process || typeof b.task_type !== "string") return { error: "not a processor request" };
    const fn = this.handlers.get(b.task_type as TaskType);
    if (!fn) return { error: `no ${b.task_type} handler` };
    const history = (b.process.history ?? []) as { payload?: unknown }[];
    const req: Request = { taskType: b.task_type as TaskType, args: b.args, context: b.context, process: b.process,
      processId: b.process.id, auxState: b.process.aux_state, events: history.map((e) => e.payload) };
    let out: Result | void;
    try {
      out = await fn(req);
    } catch (e) {
      if (e instanceof ProcessorFailure) return { error: e.error };
      return { error: e instanceof Error ? `${e.name}: ${e.message}` : String(e) };
    }
    if (!out) return { events: [] };
    const answer: Record<string, unknown> = {
      events: (out.events ?? []).map((e) => (e && typeof e === "object" && "payload" in e && Object.keys(e).every((k) => k === "payload" || k === "metadata") ? e : { payload: e })),
      response: out.response ?? null,
    };
    if (out.auxState !== undefined) answer.aux_state = out.auxState;
    if (out.metadata !== undefined) answer.metadata = out.metadata;
    if (out.action !== undefined && out.action !== null) answer.action = out.action;
    return answer;
  }

  /** Serves docket's POSTs with node:http on `port` (0: a free one, see `address().port`). */
  listen(port = 8081, host = "127.0.0.1"): Promise<Server> {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", async () => {
        let answer: Record<string, unknown>;
        try { answer = await this.handle(JSON.parse(Buffer.concat(chunks).toString("utf8"))); } catch (e) { answer = { error: `invalid JSON: ${e}` }; }
        const data = JSON.stringify(answer);
        res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(data) });
        res.end(data);
      });
    });
    return new Promise((resolve) => server.listen(port, host, () => resolve(server)));
  }
}

export type { AddressInfo };
