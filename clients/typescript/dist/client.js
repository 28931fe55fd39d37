/**
 * docket's HTTP API (`/v1`) as a client. Shapes are the OpenAPI document's
 * (`crates/docket-server/openapi.json`); `schema.ts` is generated from it by openapi-typescript.
 * Durations are humantime strings or milliseconds; times are RFC 3339 strings or `Date`s.
 */
import { readFileSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import { Readable } from "node:stream";
import { formatDuration, parseDuration } from "./durations.js";
import { DocketError, errorFor } from "./errors.js";
import { HttpPool } from "./http.js";
const iso = (t) => (t instanceof Date ? t.toISOString() : t);
const seg = (s) => encodeURIComponent(String(s));
/** A `NewTask` body from `kind`, `payload` and {@link TaskOptions}. */
export function taskSpec(kind, payload, o = {}) {
    const spec = { kind, payload: payload ?? null };
    const put = (k, v) => { if (v !== undefined && v !== null)
        spec[k] = v; };
    put("queue", o.queue);
    put("priority", o.priority);
    put("run_at", o.runAt && iso(o.runAt));
    put("run_in", o.runIn !== undefined ? formatDuration(o.runIn) : undefined);
    put("unique_key", o.uniqueKey);
    put("concurrency_key", o.concurrencyKey);
    put("concurrency_limit", o.concurrencyLimit);
    put("rate_limit", o.rateLimit);
    put("partition_key", o.partitionKey);
    put("timeout", o.timeout !== undefined ? formatDuration(o.timeout) : undefined);
    put("backoff", o.backoff);
    put("stage", o.stage);
    put("user_id", o.userId);
    put("trace_id", o.traceId);
    put("max_attempts", o.maxAttempts);
    put("expires_at", o.expiresAt && iso(o.expiresAt));
    put("expires_in", o.expiresIn !== undefined ? formatDuration(o.expiresIn) : undefined);
    put("node", o.node);
    put("progress", o.progress);
    put("debounce", o.debounce && { key: o.debounce.key, period: formatDuration(o.debounce.period),
        ...(o.debounce.maxWait !== undefined ? { max_wait: formatDuration(o.debounce.maxWait) } : {}) });
    put("tags", o.tags);
    put("requires", o.requires);
    put("prefer", o.prefer && { labels: o.prefer.labels, for: formatDuration(o.prefer.for) });
    return spec;
}
/**
 * A `fetch` whose `https://` requests trust `ca` (PEM): node:https under a `Response`, the body
 * streamed (the event stream reads it as it comes); `signal` aborts the request and the body.
 */
function fetchTrusting(ca) {
    return (url, init) => {
        const u = new URL(url);
        if (u.protocol !== "https:")
            return globalThis.fetch(url, init);
        return new Promise((resolve, reject) => {
            const req = httpsRequest(u, { method: init.method ?? "GET", headers: init.headers, ca,
                signal: init.signal ?? undefined }, (res) => {
                const headers = new Headers();
                for (const [k, v] of Object.entries(res.headers)) {
                    for (const one of Array.isArray(v) ? v : v === undefined ? [] : [v])
                        headers.append(k, one);
                }
                const status = res.statusCode ?? 502;
                const bodiless = status === 204 || status === 205 || status === 304 || init.method === "HEAD";
                if (bodiless)
                    res.resume();
                resolve(new Response(bodiless ? null : Readable.toWeb(res), { status, statusText: res.statusMessage, headers }));
            });
            req.on("error", reject);
            req.end(typeof init.body === "string" ? init.body : undefined);
        });
    };
}
/** An answer's headers, as `fetch`'s `Headers` reads them. */
function headersOf(h) {
    const out = new Headers();
    for (const [k, v] of Object.entries(h))
        out.append(k, v);
    return out;
}
/** A header line (CRLF-terminated); a value with a line break is refused. */
function headerLine(k, v) {
    if (/[\r\n]/.test(k) || /[\r\n]/.test(v))
        throw new Error(`header ${k}: a line break in a header`);
    return `${k}: ${v}\r\n`;
}
/** Every operation of docket's API. Errors: {@link DocketError} with docket's `code`. */
export class Client {
    server;
    headers;
    timeoutMs;
    fetch;
    /**
     * Requests go through {@link HttpPool}: node:http(s) on kept-alive connections (a fraction of
     * `fetch`'s CPU per request on Node 20: a worker's round trips are its cost); the event stream
     * through `fetch`.
     */
    pool;
    /** The header lines every request carries (host, content-type, user-agent, authorization). */
    head;
    /** The server URL's path (requests' paths go after it). */
    prefix;
    constructor(opts = {}) {
        this.server = (opts.server ?? process.env.DOCKET_SERVER ?? "http://127.0.0.1:7070").replace(/\/+$/, "");
        const token = opts.token ?? process.env.DOCKET_TOKEN;
        this.headers = { "content-type": "application/json", "user-agent": "docket-client-ts/0.1" };
        if (token)
            this.headers.authorization = `Bearer ${token}`;
        this.timeoutMs = opts.timeoutMs ?? 30_000;
        // Node's fetch takes no CA option: a private CA goes through node:https (the package has
        // no dependencies, so installing it from a folder needs nothing else).
        const ca = opts.caFile ? readFileSync(opts.caFile, "utf8") : undefined;
        this.fetch = ca ? fetchTrusting(ca) : (url, init) => globalThis.fetch(url, init);
        const u = new URL(this.server);
        const tls = u.protocol === "https:";
        if (!tls && u.protocol !== "http:")
            throw new Error(`server must be an http:// or https:// URL, not ${this.server}`);
        this.pool = new HttpPool({ host: u.hostname.replace(/^\[(.*)\]$/, "$1"), port: Number(u.port || (tls ? 443 : 80)), tls, ca,
            maxSockets: opts.maxSockets });
        this.prefix = u.pathname.replace(/\/+$/, "");
        this.head = headerLine("host", u.host) + Object.entries(this.headers).map(([k, v]) => headerLine(k, v)).join("");
    }
    /** Closes the kept-alive connections not in use (they do not keep the process alive anyway). */
    close() { this.pool.close(); }
    /** One request; `waitMs` lengthens the timeout for long polls. */
    async request(method, path, body, o = {}) {
        let url = path;
        if (o.query) {
            const q = new URLSearchParams();
            for (const [k, v] of Object.entries(o.query))
                if (v !== undefined && v !== null)
                    q.set(k, String(v));
            const s = q.toString();
            if (s)
                url += `?${s}`;
        }
        const head = o.headers ? this.head + Object.entries(o.headers).map(([k, v]) => headerLine(k, v)).join("") : this.head;
        const resp = await this.pool.request(method, this.prefix + url, head, body === undefined ? undefined : JSON.stringify(body), this.timeoutMs + (o.waitMs ?? 0), o.signal);
        const text = resp.text;
        let parsed = null;
        if (text) {
            try {
                parsed = JSON.parse(text);
            }
            catch {
                parsed = text;
            }
        }
        if (resp.status >= 400) {
            const ra = resp.headers["retry-after"];
            throw errorFor(resp.status, parsed, typeof ra === "string" && /^\d+$/.test(ra) ? Number(ra) : undefined);
        }
        let headers; // made when read: most callers never do
        return { value: parsed, get headers() { return (headers ??= headersOf(resp.headers)); } };
    }
    async call(method, path, body, query) {
        return (await this.request(method, path, body, { query })).value;
    }
    // --- tasks ---------------------------------------------------------------------------
    /**
     * `POST /v1/tasks`: one task → the stored task (`inserted` false when a unique key returned an
     * existing one; `replaced` true when a debounced enqueue replaced the waiting task).
     */
    enqueue(kind, payload, options) {
        return this.call("POST", "/v1/tasks", taskSpec(kind, payload, options));
    }
    /** `POST /v1/tasks` with `{tasks}` (≤ 10,000, one transaction) → the tasks. */
    async enqueueMany(specs) {
        return (await this.call("POST", "/v1/tasks", { tasks: specs })).tasks;
    }
    /** `GET /v1/tasks/{id}` → the task with its `version` (the ETag). */
    async getTask(id) {
        const { value, headers } = await this.request("GET", `/v1/tasks/${id}`);
        return { ...value, version: headers.get("etag") };
    }
    /** `GET /v1/tasks` → a page `{tasks, next_after}`; `state` takes several states; `tag` one tag. */
    listTasks(filter = {}) {
        const q = { ...filter };
        if (Array.isArray(filter.state))
            q.state = filter.state.join(",");
        return this.call("GET", "/v1/tasks", undefined, q);
    }
    /** `PATCH /v1/tasks/{id}`; with `version` (an ETag) → 412 `version_mismatch` if it moved on. */
    async updateTask(id, patch, version) {
        const { value, headers } = await this.request("PATCH", `/v1/tasks/${id}`, patch, { headers: version ? { "if-match": version } : {} });
        return { ...value, version: headers.get("etag") };
    }
    /** Cancel: a waiting task at once, a running one at its next heartbeat or report. */
    cancelTask(id) { return this.call("POST", `/v1/tasks/${id}/cancel`); }
    /** Run a finished task again. */
    retryTask(id) { return this.call("POST", `/v1/tasks/${id}/retry`); }
    /** A scheduled or retryable task becomes available now. */
    runNow(id) { return this.call("POST", `/v1/tasks/${id}/run-now`); }
    /** `POST /v1/tasks/bulk` (admin): `action` over every task `filter` matches now, in the background; poll `getBulk`. */
    bulk(action, filter = {}) { return this.call("POST", "/v1/tasks/bulk", { action, filter }); }
    /** `POST /v1/tasks/bulk` with `dry_run`: how many tasks `action` would change now. */
    countBulk(action, filter = {}) { return this.call("POST", "/v1/tasks/bulk", { action, filter, dry_run: true }); }
    /** `GET /v1/tasks/bulk/{id}`: state, total, done, skipped. */
    getBulk(id) { return this.call("GET", `/v1/tasks/bulk/${id}`); }
    // --- the work path -------------------------------------------------------------------
    /** `POST /v1/queues/{queue}/claim` → tasks with `lease {token, expires_at, trace_id}`; `wait` long-polls (≤ 60 s). */
    async claim(queue, o) {
        return (await this.claimWith(queue, o)).tasks;
    }
    /**
     * `POST /v1/queues/{queue}/claim`, the whole answer. `complete`/`fail` report what finished in
     * the same round trip (recorded and committed before the claim looks; outcomes in `completed`
     * and `failed`, in order; one bad item refuses the request, nothing written); `lean` answers
     * {@link LeanTask}s in `lean` (and `tasks` empty).
     */
    async claimWith(queue, o) {
        const body = { worker: o.worker, limit: o.limit ?? 1 };
        if (o.lease !== undefined)
            body.lease = formatDuration(o.lease);
        if (o.wait !== undefined)
            body.wait = formatDuration(o.wait);
        if (o.kinds?.length)
            body.kinds = o.kinds;
        if (o.stages?.length)
            body.stages = o.stages;
        if (o.labels && Object.keys(o.labels).length)
            body.labels = o.labels;
        if (o.claimId !== undefined)
            body.claim_id = o.claimId;
        if (o.lean)
            body.lean = true;
        if (o.complete?.length)
            body.complete = o.complete;
        if (o.fail?.length)
            body.fail = o.fail;
        const waitMs = o.wait === undefined ? 0 : typeof o.wait === "number" ? o.wait : 60_000;
        const { value } = await this.request("POST", `/v1/queues/${seg(queue)}/claim`, body, { waitMs, signal: o.signal });
        return value;
    }
    /** `POST /v1/tasks/{id}/heartbeat` → the task (new `lease_expires_at`); 409 `cancelled`/`lease_lost`/`timed_out`. */
    heartbeat(id, lease, o = {}) {
        const body = { lease };
        if (o.progress !== undefined)
            body.progress = o.progress;
        if (o.extend !== undefined)
            body.extend = formatDuration(o.extend);
        return this.call("POST", `/v1/tasks/${id}/heartbeat`, body);
    }
    /** `POST /v1/tasks/{id}/complete`; `next_stage` (+ `payload`, `priority`, `run_in`/`run_at`) hands it on. */
    complete(id, lease, result, next) {
        return this.call("POST", `/v1/tasks/${id}/complete`, { lease, result: result ?? null, ...next });
    }
    /** `POST /v1/tasks/{id}/fail`: retried per its backoff (or after `retry_in`), or discarded when permanent. */
    fail(id, lease, error, o = {}) {
        const body = { lease, error };
        if (o.retryIn !== undefined)
            body.retry_in = formatDuration(o.retryIn);
        if (o.permanent)
            body.permanent = true;
        if (o.worker)
            body.worker = o.worker;
        return this.call("POST", `/v1/tasks/${id}/fail`, body);
    }
    /** `POST /v1/tasks/complete` → one outcome per item (`ok`, `lease_lost`, `cancelled`, `timed_out`, `not_found`). */
    async completeMany(items) {
        return (await this.call("POST", "/v1/tasks/complete", { items })).results;
    }
    /** `POST /v1/tasks/fail` → one outcome per item. */
    async failMany(items) {
        return (await this.call("POST", "/v1/tasks/fail", { items })).results;
    }
    /**
     * `POST /v1/queues/{queue}/claims/{claimId}/release` → the ids handed back: what a claim sent
     * with `claimId` took (its answer never arrived), available again at once, no attempt counted
     * — also when this arrives before the claim commits.
     */
    async releaseClaim(queue, claimId) {
        return (await this.call("POST", `/v1/queues/${seg(queue)}/claims/${seg(claimId)}/release`)).released;
    }
    /** `POST /v1/tasks/release`: tasks held but not started, handed back (no attempt counted) → one outcome per item (`ok`, `lease_lost`). */
    async releaseMany(items) {
        return (await this.call("POST", "/v1/tasks/release", { items })).results;
    }
    /** `POST /v1/workers/{name}/report`. */
    reportWorker(name, report) {
        return this.call("POST", `/v1/workers/${seg(name)}/report`, report);
    }
    /** `GET /v1/workers`. */
    async listWorkers() {
        return (await this.call("GET", "/v1/workers")).workers;
    }
    // --- queues --------------------------------------------------------------------------
    async listQueues() { return (await this.call("GET", "/v1/queues")).queues; }
    /** `GET /v1/queues/{queue}` → `{name, counts, settings}`. */
    getQueue(queue) { return this.call("GET", `/v1/queues/${seg(queue)}`); }
    putQueue(queue, settings) { return this.call("PUT", `/v1/queues/${seg(queue)}`, settings); }
    pauseQueue(queue) { return this.call("POST", `/v1/queues/${seg(queue)}/pause`); }
    resumeQueue(queue) { return this.call("POST", `/v1/queues/${seg(queue)}/resume`); }
    // --- batches -------------------------------------------------------------------------
    /** `POST /v1/batches`: tasks in one transaction, callbacks enqueued once when every task finished. */
    createBatch(spec) { return this.call("POST", "/v1/batches", spec); }
    /** `POST /v1/batches/{id}/tasks`: more tasks for a batch that has not settled (409 `conflict` once it has). */
    addToBatch(id, tasks, seal = false) {
        return this.call("POST", `/v1/batches/${id}/tasks`, { tasks, seal });
    }
    /** `POST /v1/batches/{id}/seal`. */
    sealBatch(id) { return this.call("POST", `/v1/batches/${id}/seal`); }
    /** `GET /v1/batches/{id}`: `total`, `done`, `counts` by state, `fired`. */
    getBatch(id) { return this.call("GET", `/v1/batches/${id}`); }
    /** `GET /v1/batches`: newest first. */
    async listBatches(opts = {}) {
        const q = new URLSearchParams();
        if (opts.before !== undefined)
            q.set("before", String(opts.before));
        if (opts.limit !== undefined)
            q.set("limit", String(opts.limit));
        const s = q.toString();
        return (await this.call("GET", `/v1/batches${s ? "?" + s : ""}`)).batches;
    }
    // --- workflows -----------------------------------------------------------------------
    /** `POST /v1/workflows`: tasks with `ref` and `depends_on`; a task runs once its dependencies completed. */
    createWorkflow(spec) { return this.call("POST", "/v1/workflows", spec); }
    /** `GET /v1/workflows/{id}`: its batch and each task's ref, state and edges. */
    getWorkflow(id) { return this.call("GET", `/v1/workflows/${id}`); }
    cancelWorkflow(id) {
        return typeof id === "string" ? this.call("POST", `/v1/workflow-runs/${seg(id)}/cancel`) : this.call("POST", `/v1/workflows/${id}/cancel`);
    }
    /** `POST /v1/workflows/{id}/tasks`: tasks (and sub-workflows) added at run time; `depends_on` may name the workflow's refs. */
    addToWorkflow(id, add) { return this.call("POST", `/v1/workflows/${id}/tasks`, add); }
    retryWorkflow(id) {
        return typeof id === "string" ? this.call("POST", `/v1/workflow-runs/${seg(id)}/retry`) : this.call("POST", `/v1/workflows/${id}/retry`);
    }
    // --- durable functions (workflow runs) -----------------------------------------------
    /**
     * `POST /v1/workflow-runs`: a run of workflow `name` with `input` (any JSON) → the run, with
     * `created` false when a run of that `id` existed already (that run; `conflict` when it is
     * another workflow's). `maxAttempts`: how often its task may crash or time out [25];
     * `timeout`: its task's attempt timeout [the queue's].
     */
    async startWorkflow(name, input, o = {}) {
        const body = { workflow: name, input: input ?? null };
        if (o.timeout !== undefined)
            body.timeout = formatDuration(o.timeout);
        if (o.id !== undefined)
            body.id = o.id;
        if (o.queue !== undefined)
            body.queue = o.queue;
        if (o.priority !== undefined)
            body.priority = o.priority;
        if (o.maxAttempts !== undefined)
            body.max_attempts = o.maxAttempts;
        const r = await this.call("POST", "/v1/workflow-runs", body);
        return { ...r.run, created: r.created };
    }
    /** `GET /v1/workflow-runs/{id}` → the run (`not_found` when there is none). */
    workflowRun(id) { return this.call("GET", `/v1/workflow-runs/${seg(id)}`); }
    /**
     * `GET /v1/workflow-runs/{id}/result?wait=` → the run once it finished, or when `wait` passed
     * [30 s; at most 60 s] — check its `state` (`completed`: `result`; `failed`/`cancelled`: `error`).
     */
    async workflowResult(id, o = {}) {
        const wait = o.wait ?? "30s";
        const waitMs = typeof wait === "number" ? wait : parseDuration(wait);
        return (await this.request("GET", `/v1/workflow-runs/${seg(id)}/result`, undefined, { query: { wait: formatDuration(wait) }, waitMs })).value;
    }
    /** `GET /v1/workflow-runs/{id}/steps` → its journal. */
    async workflowSteps(id) {
        return (await this.call("GET", `/v1/workflow-runs/${seg(id)}/steps`)).steps;
    }
    /**
     * `POST /v1/workflow-runs/{id}/events`: event `name` (not starting with `docket:`) with
     * `payload` for the run → `{id, delivered}` (delivered: the run was waiting for it and was
     * woken; else it waits in the run's mailbox for a wait of that name). `invalid_state` once the run ended.
     */
    sendEvent(runId, name, payload) {
        return this.call("POST", `/v1/workflow-runs/${seg(runId)}/events`, { name, payload: payload ?? null });
    }
    /** `GET /v1/workflow-runs` → runs, newest first, by `workflow`, `state`, `parentId`, creation time. */
    async listWorkflowRuns(f = {}) {
        return (await this.call("GET", "/v1/workflow-runs", undefined, {
            workflow: f.workflow, state: f.state, parent_id: f.parentId, created_after: f.createdAfter && iso(f.createdAfter),
            created_before: f.createdBefore && iso(f.createdBefore), limit: f.limit
        })).runs;
    }
    // --- rate limits ---------------------------------------------------------------------
    /** `PUT /v1/rate-limits/{name}` (admin): `kind` window | bucket (with `period`) | concurrent. */
    putRateLimit(name, spec) { return this.call("PUT", `/v1/rate-limits/${seg(name)}`, spec); }
    /** `GET /v1/rate-limits/{name}`: with `keys`, `admitted`, `delayed`, `blocked`. */
    getRateLimit(name) { return this.call("GET", `/v1/rate-limits/${seg(name)}`); }
    async listRateLimits() { return (await this.call("GET", "/v1/rate-limits")).rate_limits; }
    /** `DELETE /v1/rate-limits/{name}` (admin): its tasks run unlimited. */
    deleteRateLimit(name) { return this.call("DELETE", `/v1/rate-limits/${seg(name)}`); }
    // --- schedules -----------------------------------------------------------------------
    /** `POST /v1/schedules`: create or replace (`every` or `cron`, `timezone`, …). */
    putSchedule(spec) { return this.call("POST", "/v1/schedules", spec); }
    async listSchedules() { return (await this.call("GET", "/v1/schedules")).schedules; }
    getSchedule(name) { return this.call("GET", `/v1/schedules/${seg(name)}`); }
    deleteSchedule(name) { return this.call("DELETE", `/v1/schedules/${seg(name)}`); }
    pauseSchedule(name) { return this.call("POST", `/v1/schedules/${seg(name)}/pause`); }
    resumeSchedule(name) { return this.call("POST", `/v1/schedules/${seg(name)}/resume`); }
    // --- processes -----------------------------------------------------------------------
    /** `PUT /v1/namespaces/{ns}`: the processor's URL and the namespace's settings. */
    putNamespace(ns, processorUrl, config = {}) {
        return this.call("PUT", `/v1/namespaces/${seg(ns)}`, { processor: { url: processorUrl }, ...config });
    }
    getNamespace(ns) { return this.call("GET", `/v1/namespaces/${seg(ns)}`); }
    /** `POST /v1/namespaces/{ns}/processes` → the processor's `response` to `init`. */
    async initProcess(ns, id, args, o = {}) {
        const body = { id, args: args ?? null, context: o.context ?? null, idempotency_key: o.idempotencyKey };
        return (await this.call("POST", `/v1/namespaces/${seg(ns)}/processes`, body)).response;
    }
    /** A synchronous call → the processor's `response`. */
    async callProcess(ns, id, args, o = {}) {
        const body = { args: args ?? null, context: o.context ?? null, idempotency_key: o.idempotencyKey, range: o.range };
        return (await this.call("POST", `/v1/namespaces/${seg(ns)}/processes/${seg(id)}/call`, body)).response;
    }
    /** Repair an `error` process through the processor. */
    repairProcess(ns, id, args, context) {
        return this.call("POST", `/v1/namespaces/${seg(ns)}/processes/${seg(id)}/repair`, { args: args ?? null, context: context ?? null });
    }
    /** `{process, history, last_event_id}`. */
    getProcess(ns, id) { return this.call("GET", `/v1/namespaces/${seg(ns)}/processes/${seg(id)}`); }
    traceProcess(ns, id) { return this.call("GET", `/v1/namespaces/${seg(ns)}/processes/${seg(id)}/trace`); }
    /**
     * `GET /v1/events` (server-sent events) as an endless async iterator of notifications,
     * reconnecting after the last `seq` seen. Break out of the loop (or abort `signal`) to stop.
     */
    async *events(o = {}) {
        let after = o.after;
        for (;;) {
            const q = new URLSearchParams();
            if (o.namespace)
                q.set("namespace", o.namespace);
            if (after !== undefined)
                q.set("after", String(after));
            const ctl = new AbortController();
            const signal = o.signal ? AbortSignal.any([ctl.signal, o.signal]) : ctl.signal;
            const resp = await this.fetch(`${this.server}/v1/events?${q}`, { headers: this.headers, signal });
            if (resp.status >= 400)
                throw errorFor(resp.status, await resp.json().catch(() => null));
            const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
            let buf = "";
            try {
                for (;;) {
                    const { value, done } = await reader.read();
                    if (done)
                        break;
                    buf += value;
                    let end;
                    while ((end = buf.indexOf("\n\n")) >= 0) {
                        const block = buf.slice(0, end);
                        buf = buf.slice(end + 2);
                        const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n");
                        if (!data)
                            continue;
                        const n = JSON.parse(data);
                        if (typeof n?.seq !== "number")
                            continue;
                        after = n.seq;
                        yield n;
                    }
                }
            }
            finally {
                ctl.abort();
            }
        }
    }
    // --- tokens and the cluster ------------------------------------------------------------
    /** `POST /v1/tokens` (admin) → the token, shown once. */
    createToken(req) { return this.call("POST", "/v1/tokens", req); }
    async listTokens() { return (await this.call("GET", "/v1/tokens")).tokens; }
    revokeToken(name) { return this.call("DELETE", `/v1/tokens/${seg(name)}`); }
    status() { return this.call("GET", "/v1/status"); }
    health() { return this.call("GET", "/healthz"); }
}
export { DocketError };
