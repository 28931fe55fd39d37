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
import { createServer } from "node:http";
import { formatDuration } from "./durations.js";
/** Wake the process (a `timeout` step) after `after`; `remove` deletes it then. */
export function timer(after, remove = false) {
    return remove ? { timeout: formatDuration(after), remove: true } : { timeout: formatDuration(after) };
}
/** Wake the process at `at`. */
export function timerAt(at, remove = false) {
    return remove ? { set_timer: at.toISOString(), remove: true } : { set_timer: at.toISOString() };
}
export const UNSET_TIMER = "unset_timer";
/** Throw from a handler to answer `{"error": error}` (any JSON). */
export class ProcessorFailure extends Error {
    error;
    constructor(error) {
        super(typeof error === "string" ? error : JSON.stringify(error));
        this.error = error;
        this.name = "ProcessorFailure";
    }
}
export class Processor {
    handlers = new Map();
    on(taskType, fn) {
        if (!["init", "call", "repair", "timeout"].includes(taskType))
            throw new Error(`unknown task_type ${taskType}`);
        this.handlers.set(taskType, fn);
        return this;
    }
    /** One request body → the answer to send (always HTTP 200, JSON). */
    async handle(body) {
        const b = body;
        if (!b || typeof b !== "object" || !b.process || typeof b.task_type !== "string")
            return { error: "not a processor request" };
        const fn = this.handlers.get(b.task_type);
        if (!fn)
            return { error: `no ${b.task_type} handler` };
        const history = (b.process.history ?? []);
        const req = { taskType: b.task_type, args: b.args, context: b.context, process: b.process,
            processId: b.process.id, auxState: b.process.aux_state, events: history.map((e) => e.payload) };
        let out;
        try {
            out = await fn(req);
        }
        catch (e) {
            if (e instanceof ProcessorFailure)
                return { error: e.error };
            return { error: e instanceof Error ? `${e.name}: ${e.message}` : String(e) };
        }
        if (!out)
            return { events: [] };
        const answer = {
            events: (out.events ?? []).map((e) => (e && typeof e === "object" && "payload" in e && Object.keys(e).every((k) => k === "payload" || k === "metadata") ? e : { payload: e })),
            response: out.response ?? null,
        };
        if (out.auxState !== undefined)
            answer.aux_state = out.auxState;
        if (out.metadata !== undefined)
            answer.metadata = out.metadata;
        if (out.action !== undefined && out.action !== null)
            answer.action = out.action;
        return answer;
    }
    /** Serves docket's POSTs with node:http on `port` (0: a free one, see `address().port`). */
    listen(port = 8081, host = "127.0.0.1") {
        const server = createServer((req, res) => {
            const chunks = [];
            req.on("data", (c) => chunks.push(c));
            req.on("end", async () => {
                let answer;
                try {
                    answer = await this.handle(JSON.parse(Buffer.concat(chunks).toString("utf8")));
                }
                catch (e) {
                    answer = { error: `invalid JSON: ${e}` };
                }
                const data = JSON.stringify(answer);
                res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(data) });
                res.end(data);
            });
        });
        return new Promise((resolve) => server.listen(port, host, () => resolve(server)));
    }
}
