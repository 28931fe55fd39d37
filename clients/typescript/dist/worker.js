/**
 * A worker: handlers per kind, claimed in long-polled batches, heartbeats while a handler runs,
 * completions and failures reported in batches, graceful stop on SIGTERM.
 *
 * ```ts
 * const worker = new Worker({ queue: "emails", concurrency: 10 });
 * worker.handle("send", async (job) => { await send(job.payload, { signal: job.signal }); return { sent: true }; });
 * await worker.run();   // until SIGTERM/SIGINT or worker.stop(); then finishes (or hands back) its tasks
 * ```
 *
 * Rules (the same in every docket client): only registered kinds (and stages, when a handler
 * names one) are claimed; a handler runs at most until the task's `timeout` — then `job.signal`
 * aborts and the attempt fails with `timeout`; a heartbeat every third of the lease keeps it,
 * and a heartbeat answered `cancelled`/`lease_lost`/`timed_out` aborts `job.signal` and reports
 * nothing; a report that cannot be delivered is retried until the lease runs out; on stop no new
 * claims — a claim still waiting is given up and released by its `claim_id` (what it took is
 * available again at once, no attempt counted), held tasks not started are released the same
 * way — and running tasks get `shutdownGraceMs` to finish, then are handed back (failed with
 * `retry_in: 0`, so they run again at once).
 */
import { hostname } from "node:os";
import { randomUUID } from "node:crypto";
import { Client } from "./client.js";
import { formatDuration, parseDuration } from "./durations.js";
import { DocketError } from "./errors.js";
import { executeWorkflow } from "./durable.js";
/**
 * Heartbeats per lease: one every third of it, never more often than {@link MIN_HEARTBEAT_EVERY_MS}.
 * docket's rule (`docket_core::lease::heartbeat_every`; the engine's worker and `docket worker`
 * use it): one late or lost heartbeat still leaves a third of the lease.
 */
export const HEARTBEATS_PER_LEASE = 3;
/** The shortest interval between heartbeats, ms (docket's `MIN_HEARTBEAT_EVERY`). */
export const MIN_HEARTBEAT_EVERY_MS = 100;
/** Ms between heartbeats for a lease of `leaseMs` (docket's rule). */
export function heartbeatEvery(leaseMs) {
    return Math.max(leaseMs / HEARTBEATS_PER_LEASE, MIN_HEARTBEAT_EVERY_MS);
}
/** `prefetch: "auto"` holds ahead what the handlers start within this many ms at their recent pace. */
export const PREFETCH_AUTO_WAIT_MS = 100;
/** The most tasks `prefetch: "auto"` holds ahead. */
export const PREFETCH_AUTO_MAX = 1000;
/**
 * Tasks held ahead under `prefetch: "auto"` (the same rule in every docket client): as many as
 * `concurrency` handlers taking `avgMs` each start within {@link PREFETCH_AUTO_WAIT_MS} —
 * `floor(concurrency × 100 / avgMs)`, at most {@link PREFETCH_AUTO_MAX}; none before a handler
 * has finished (`avgMs` undefined). A held task's lease and timeout run while it waits, so long
 * tasks are never held (handlers of ≥ 100 ms × concurrency hold none) and short ones are fetched
 * in claims of up to a thousand.
 */
export function autoPrefetch(concurrency, avgMs) {
    if (avgMs === undefined || !Number.isFinite(avgMs))
        return 0;
    return Math.min(PREFETCH_AUTO_MAX, Math.floor((concurrency * PREFETCH_AUTO_WAIT_MS) / Math.max(avgMs, 0.001)));
}
/** Throw from a handler: fail this attempt and retry after `delay` (ms or humantime) instead of the backoff. */
export class Retry extends Error {
    delay;
    constructor(delay, message = "retry requested") {
        super(message);
        this.delay = delay;
        this.name = "Retry";
    }
}
/** Throw from a handler: fail the task for good (discarded, no more attempts). */
export class Permanent extends Error {
    constructor(message) { super(message); this.name = "Permanent"; }
}
/** Return from a handler: hand the task on to `stage` (asyncflow's multi-stage tasks). */
export class NextStage {
    stage;
    o;
    constructor(stage, o = {}) {
        this.stage = stage;
        this.o = o;
    }
}
/** What a handler gets. */
export class Job {
    task;
    worker;
    /** @internal */ progressValue = undefined;
    // Made when a handler first reads `signal`: an AbortController per task is a tenth of the
    // worker's CPU for short tasks (node 20), and most handlers never look at it.
    ctl;
    abortedWith;
    /** @internal Called once when the attempt is aborted (the worker's race). */
    onAbort;
    /** The claimed task: a {@link LeanTask} unless the worker was made with `fullTasks`. */
    constructor(task, worker) {
        this.task = task;
        this.worker = worker;
    }
    /** Aborted when the attempt times out, docket cancels the task or its lease is lost, or the worker hands it back. */
    get signal() {
        if (!this.ctl) {
            this.ctl = new AbortController();
            if (this.abortedWith)
                this.ctl.abort(this.abortedWith.reason);
        }
        return this.ctl.signal;
    }
    /** @internal */ get aborted() { return this.abortedWith !== undefined; }
    /** @internal */ abort(reason) {
        if (this.abortedWith)
            return;
        this.abortedWith = { reason };
        this.ctl?.abort(reason);
        this.onAbort?.(reason);
    }
    get id() { return this.task.id; }
    get kind() { return this.task.kind; }
    get payload() { return this.task.payload; }
    get attempt() { return this.task.attempt; }
    get stage() { return this.task.stage ?? null; }
    get lease() { return this.task.lease.token; }
    /** Record progress (any JSON): sent with the next heartbeat (`await job.heartbeat()` sends it now). */
    progress(value) { this.progressValue = value; }
    /** Send a heartbeat now. */
    heartbeat() { return this.worker.beat(this); }
}
const sleep = (ms, signal) => new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => { clearTimeout(t); resolve(); }, { once: true });
});
function errorText(e) {
    if (e instanceof Error) {
        const head = `${e.name}: ${e.message}`;
        const stack = e.stack ?? "";
        return (stack.startsWith(head) ? stack : `${head}\n${stack}`).slice(0, 64_000);
    }
    return String(e).slice(0, 64_000);
}
export class Worker {
    client;
    concurrency;
    name;
    queue;
    /** The queue of the registered workflows. */
    workflowQueue;
    /**
     * Tasks reported `completed`/`failed` and reports answered otherwise (`lost`); workflow
     * executions that `finished` their run, `suspended` it (a sleep or a wait) or were
     * `abandoned` (the run was cancelled, the lease lost, an outage).
     */
    stats = { completed: 0, failed: 0, lost: 0, finished: 0, suspended: 0, abandoned: 0 };
    batch;
    prefetch;
    /** Moving average of the handlers' run time, ms (for `prefetch: "auto"`). */
    avgRunMs = undefined;
    fullTasks;
    claims;
    /**
     * Claims in flight that carry reports: they do not wait (the queue had work a moment ago), so
     * what finishes meanwhile goes with the next one. With none (a long poll, no free handler, the
     * stop) the reporter sends them on its own.
     */
    carriers = 0;
    /** Tasks asked by the claims in flight: counted as held, so the loops never take too many. */
    asked = 0;
    /** What the claim loops claim (set by {@link run}). */
    sources = [];
    waiters = [];
    buffer = [];
    executing = 0;
    wait;
    lease;
    labels;
    graceMs;
    reportMs;
    signals;
    handlers = new Map();
    workflows = new Map();
    deferSteps;
    workflowLease;
    running = new Map();
    reports = [];
    stopping = new AbortController();
    /** The claim loop and the drain are over: the reporter may end. */
    drained = false;
    reportWake = () => { };
    startedAt = new Date().toISOString();
    constructor(o = {}) {
        this.client = o.client ?? new Client();
        this.queue = o.queue ?? "default";
        this.concurrency = o.concurrency ?? 10;
        if (this.concurrency < 1)
            throw new Error("concurrency must be at least 1");
        this.name = o.name ?? `${hostname()}-${process.pid}-${randomUUID().slice(0, 6)}`;
        const prefetch = o.prefetch ?? "auto";
        if (prefetch !== "auto" && !(Number.isInteger(prefetch) && prefetch >= 0))
            throw new Error(`prefetch must be "auto" or a whole number ≥ 0, not ${prefetch}`);
        this.prefetch = prefetch;
        this.fullTasks = o.fullTasks ?? false;
        const most = this.concurrency + (prefetch === "auto" ? PREFETCH_AUTO_MAX : prefetch);
        this.batch = Math.max(1, Math.min(o.batch ?? Math.min(most, 1000), 10_000));
        this.claims = Math.max(1, Math.min(o.claims ?? 2, 16));
        this.wait = formatDuration(o.wait ?? "10s");
        this.lease = o.lease === undefined ? undefined : formatDuration(o.lease);
        this.labels = o.labels && { ...o.labels };
        this.graceMs = o.shutdownGraceMs ?? 30_000;
        this.reportMs = o.reportIntervalMs ?? 10_000;
        this.signals = o.signals ?? true;
        this.workflowQueue = o.workflowQueue ?? "workflows";
        this.deferSteps = o.deferSteps ?? true;
        this.workflowLease = formatDuration(o.workflowLease ?? o.lease ?? "30s");
    }
    /** `fn` handles tasks of `kind` (at `stage`, when given; without one, every stage of the kind). */
    handle(kind, fn, o = {}) {
        if (this.queue === this.workflowQueue && this.workflows.has(kind))
            throw new Error(`${kind} is a workflow of queue ${this.queue} already`);
        this.handlers.set(`${kind}\u0000${o.stage ?? ""}`, fn);
        return this;
    }
    /**
     * `fn(ctx, input)` is workflow `name` (docs/src/durable/typescript.md): the worker claims the
     * tasks of its runs from the workflow queue and runs each through a {@link WorkflowContext}.
     */
    workflow(name, fn) {
        if (this.queue === this.workflowQueue && this.handlerKinds().includes(name))
            throw new Error(`${name} is a task kind handled on queue ${this.queue} already`);
        this.workflows.set(name, fn);
        return this;
    }
    /** Ask the worker to stop gracefully. */
    stop() { this.stopping.abort(); this.wake(); }
    /** Wakes every claim loop waiting for room (a handler ended, a claim found work, the stop). */
    wake() { const w = this.waiters; this.waiters = []; for (const r of w)
        r(); }
    get carrier() { return this.carriers > 0; }
    /** Tasks held ahead of free handlers now: `prefetch`, or under "auto" {@link autoPrefetch}'s. */
    get prefetching() {
        return this.prefetch === "auto" ? autoPrefetch(this.concurrency, this.avgRunMs) : this.prefetch;
    }
    handlerKinds() { return [...new Set([...this.handlers.keys()].map((k) => k.split("\u0000")[0]))].sort(); }
    kinds() { return [...new Set([...this.handlerKinds(), ...this.workflows.keys()])].sort(); }
    stages() {
        const s = [...this.handlers.keys()].map((k) => k.split("\u0000")[1]);
        return s.includes("") ? undefined : [...new Set(s)].sort();
    }
    handlerFor(t) {
        return this.handlers.get(`${t.kind}\u0000${t.stage ?? ""}`) ?? this.handlers.get(`${t.kind}\u0000`);
    }
    /** Runs until {@link stop} (or SIGTERM/SIGINT); resolves once every report is out. */
    async run() {
        if (this.handlers.size === 0 && this.workflows.size === 0)
            throw new Error("no handler or workflow registered");
        this.sources = [];
        const wf = [...this.workflows.keys()].sort();
        if (this.handlers.size) {
            const merged = wf.length > 0 && this.workflowQueue === this.queue;
            this.sources.push({ queue: this.queue, kinds: merged ? this.kinds() : this.handlerKinds(), stages: merged ? undefined : this.stages(),
                workflows: merged, busy: false, lease: merged ? this.lease ?? this.workflowLease : this.lease });
        }
        if (wf.length && !(this.handlers.size && this.workflowQueue === this.queue)) {
            this.sources.push({ queue: this.workflowQueue, kinds: wf, workflows: true, busy: false, lease: this.workflowLease });
        }
        const onSignal = () => this.stop();
        if (this.signals) {
            process.on("SIGTERM", onSignal);
            process.on("SIGINT", onSignal);
        }
        const reporter = this.reporter();
        const beats = this.heartbeats();
        const presence = this.presence();
        try {
            await this.claimLoop();
            await this.drain();
        }
        finally {
            this.drained = true;
            this.reportWake();
            await reporter;
            await Promise.allSettled([beats, presence]);
            await this.sendPresence("stop");
            if (this.signals) {
                process.off("SIGTERM", onSignal);
                process.off("SIGINT", onSignal);
            }
        }
    }
    async claimLoop() {
        try {
            await Promise.all(this.sources.flatMap((src) => Array.from({ length: this.claims }, (_, i) => this.claimLane(src, i === 0))));
        }
        finally {
            this.reportWake();
        }
    }
    /**
     * One claim loop. The first (`first`) long-polls while the queue is empty; the others claim
     * only while it has work and never wait.
     */
    async claimLane(src, first) {
        const { kinds, stages } = src;
        while (!this.stopping.signal.aborted) {
            const room = this.concurrency + this.prefetching;
            const share = Math.max(1, Math.ceil(room / this.claims));
            const free = room - this.running.size - this.asked;
            // The first loop alone asks for all the room when the queue was idle; with the queue
            // busy every loop asks for its share, so a claim is answered while the others' tasks run.
            const limit = Math.min(free, this.batch, first ? room : share);
            // The others wait until half a share is free: claims of a task or two cost a round trip each.
            const least = first ? 1 : Math.ceil(Math.min(share, this.batch) / 2);
            if (limit < least || (!first && !src.busy)) {
                if (this.carriers === 0)
                    this.reportWake();
                await new Promise((r) => { this.waiters.push(r); });
                continue;
            }
            // One round trip reports what finished and asks for more. Such a claim does not wait
            // and is not given up at a stop, so its reports are never in doubt.
            const carried = this.reports.splice(0, Math.max(500, this.batch));
            const waits = first && !src.busy && carried.length === 0;
            if (waits)
                this.reportWake();
            else
                this.carriers++;
            this.asked += limit;
            let answer, error;
            const claimId = randomUUID();
            try {
                answer = await this.client.claimWith(src.queue, { worker: this.name, limit,
                    lease: src.lease, wait: waits ? this.wait : "0s", kinds, stages, labels: this.labels, claimId, lean: !this.fullTasks,
                    complete: carried.filter((r) => r.what === "complete").map((r) => r.item),
                    fail: carried.filter((r) => r.what === "fail").map((r) => r.item),
                    signal: waits ? this.stopping.signal : undefined });
            }
            catch (e) {
                error = e;
            }
            this.asked -= limit;
            if (!waits)
                this.carriers--;
            if (this.carriers === 0)
                this.reportWake();
            this.wake(); // what this claim asked for is free again: a loop waiting for room looks again
            if (answer === undefined) {
                const e = error;
                src.busy = false;
                if (carried.length)
                    this.reports.unshift(...carried);
                if (this.stopping.signal.aborted) {
                    // Stopping mid-poll: the server may have claimed tasks for an answer nobody will
                    // read. Released by the claim's id they are available again at once (docket finds
                    // them even when the release overtakes the claim).
                    await this.releaseClaim(src.queue, claimId);
                    break;
                }
                if (e instanceof DocketError && e.code === "rate_limited") {
                    await sleep((e.retryAfter ?? 1) * 1000, this.stopping.signal);
                    continue;
                }
                console.warn(`docket worker ${this.name}: claim failed: ${e}`);
                await sleep(1000, this.stopping.signal);
                continue;
            }
            if (answer.completed)
                this.settle("complete", answer.completed);
            if (answer.failed)
                this.settle("fail", answer.failed);
            const tasks = answer.lean ?? answer.tasks;
            src.busy = tasks.length > 0;
            for (const t of tasks)
                this.start(t, src.workflows && this.workflows.has(t.kind) ? src.queue : undefined);
            // The others may claim now (busy), or look again. Without the wake above, a first loop
            // waiting while the room was all asked by another's claim that came back empty would
            // wait for a handler that never ends.
            if (src.busy)
                this.wake();
        }
    }
    /** Folds a handler's run time (ms) into the moving average `prefetch: "auto"` follows. */
    ran(ms) {
        this.avgRunMs = this.avgRunMs === undefined ? ms : this.avgRunMs + (ms - this.avgRunMs) * 0.1;
    }
    /** Counts reports answered (`outcomes`, one per item) and warns of those not `ok`. */
    settle(what, outcomes) {
        for (const o of outcomes) {
            if (o.outcome !== "ok") {
                this.stats.lost++;
                console.warn(`docket worker ${this.name}: task ${o.id}: report answered ${o.outcome}`);
            }
        }
        if (what === "complete")
            this.stats.completed += outcomes.length;
        else
            this.stats.failed += outcomes.length;
    }
    /** `workflow`: the queue of a workflow run's task (run by {@link executeWorkflow}, not a handler). */
    start(task, workflow) {
        const now = Date.now();
        let timeout = 60_000;
        try {
            timeout = parseDuration(task.timeout);
        }
        catch { /* the default */ }
        const lease = task.lease;
        let leaseLen = Date.parse(lease.expires_at) - Date.parse(task.attempted_at ?? "");
        if (!Number.isFinite(leaseLen) || leaseLen <= 0)
            leaseLen = timeout;
        const job = new Job(task, this);
        const run = { job, leaseEnd: now + leaseLen, leaseLen, beatEvery: heartbeatEvery(leaseLen), nextBeat: now + heartbeatEvery(leaseLen),
            done: false, deadline: now + timeout, started: false, workflow };
        this.running.set(task.id, run);
        this.buffer.push(run);
        this.pump();
    }
    /** Starts held tasks while handlers are free. */
    pump() {
        while (this.executing < this.concurrency && this.buffer.length) {
            const run = this.buffer.shift();
            if (run.done)
                continue;
            if (run.job.aborted) { // docket took it back while it waited here
                run.done = true;
                this.running.delete(run.job.id);
                this.wake();
                continue;
            }
            run.started = true;
            this.executing++;
            if (run.workflow !== undefined)
                void this.executeWorkflow(run, run.workflow);
            else
                void this.execute(run, Math.max(0, run.deadline - Date.now()));
        }
    }
    async execute(run, timeoutMs) {
        const { job } = run;
        const handler = this.handlerFor(job.task);
        let report;
        const base = { id: job.id, lease: job.lease };
        let timer;
        const began = performance.now();
        try {
            if (!handler)
                throw new Permanent(`no handler for kind ${job.kind} stage ${job.stage}`);
            // One promise ends the attempt: the handler's outcome, its timeout or an abort, first wins.
            const result = await new Promise((resolve, reject) => {
                timer = setTimeout(() => reject(new TimeoutError(job.task.timeout)), timeoutMs);
                job.onAbort = () => reject(new AbortedError());
                if (job.aborted) {
                    reject(new AbortedError());
                    return;
                }
                try {
                    const out = handler(job);
                    if (out !== null && typeof out === "object" && typeof out.then === "function") {
                        out.then(resolve, reject);
                    }
                    else {
                        resolve(out);
                    }
                }
                catch (e) {
                    reject(e);
                }
            });
            this.ran(performance.now() - began);
            if (result instanceof NextStage) {
                const item = { ...base, next_stage: result.stage, result: result.o.result ?? null };
                if (result.o.payload !== undefined)
                    item.payload = result.o.payload;
                if (result.o.priority !== undefined)
                    item.priority = result.o.priority;
                if (result.o.runIn !== undefined)
                    item.run_in = formatDuration(result.o.runIn);
                report = { what: "complete", item, leaseEnd: run.leaseEnd };
            }
            else {
                report = { what: "complete", item: { ...base, result: result ?? null }, leaseEnd: run.leaseEnd };
            }
        }
        catch (e) {
            if (!(e instanceof AbortedError))
                this.ran(performance.now() - began);
            if (e instanceof AbortedError) {
                report = undefined; // docket took the task back (or stop hands it back itself)
            }
            else {
                const item = { ...base, error: errorText(e), worker: this.name };
                if (e instanceof TimeoutError) {
                    item.error = e.message;
                    job.abort(e);
                }
                if (e instanceof Retry) {
                    item.error = e.message;
                    item.retry_in = formatDuration(e.delay);
                }
                if (e instanceof Permanent)
                    item.permanent = true;
                report = { what: "fail", item, leaseEnd: run.leaseEnd };
            }
        }
        finally {
            clearTimeout(timer);
            run.done = true;
            this.running.delete(job.id);
            this.executing--;
            this.pump();
            this.wake();
        }
        if (report) {
            this.reports.push(report);
            this.reportWake();
        }
    }
    /**
     * One execution of a workflow run: never reported through the completions and failures (docket
     * completes the task in `finish` and hands it back in `suspend`). No timer: docket's heartbeat
     * answers `timed_out` when the task's timeout passed, and the execution ends there.
     */
    async executeWorkflow(run, queue) {
        const { job } = run;
        const began = performance.now();
        let outcome = "lost";
        try {
            const payload = (job.payload ?? {});
            const runId = payload.workflow_run;
            if (typeof runId !== "string") {
                // Not a run's task (enqueued by hand with a workflow's kind): failed for good.
                this.reports.push({ what: "fail", leaseEnd: run.leaseEnd, item: { id: job.id, lease: job.lease, permanent: true,
                        error: `task ${job.id} of kind ${job.kind} is not a workflow run's task (no payload.workflow_run)`, worker: this.name } });
                this.reportWake();
                return;
            }
            const path = `/v1/workflow-runs/${encodeURIComponent(runId)}/`;
            outcome = await executeWorkflow({
                runId, workflow: job.kind, queue, input: payload.input ?? null, fresh: job.attempt === 1 && !job.stage, lease: job.lease,
                fn: this.workflows.get(job.kind), deferSteps: this.deferSteps,
                warn: (m) => console.warn(`docket worker ${this.name}: ${m}`),
                post: async (op, body) => {
                    // An outage is retried while the lease lasts; a refusal is the execution's to read.
                    for (let delay = 50;; delay = Math.min(delay * 2, 2000)) {
                        try {
                            return (await this.client.request("POST", path + op, body)).value;
                        }
                        catch (e) {
                            const outage = !(e instanceof DocketError) || e.status >= 500 || e.status === 429;
                            if (!outage || job.aborted || Date.now() + delay >= run.leaseEnd)
                                throw e;
                            await sleep(delay);
                        }
                    }
                },
            }, (onAbort) => { job.onAbort = onAbort; if (job.aborted)
                onAbort(); });
        }
        catch (e) {
            console.error(`docket worker ${this.name}: task ${job.id}: workflow execution failed: ${e}`);
        }
        finally {
            this.ran(performance.now() - began);
            if (outcome === "finished")
                this.stats.finished++;
            else if (outcome === "suspended")
                this.stats.suspended++;
            else
                this.stats.abandoned++;
            run.done = true;
            this.running.delete(job.id);
            this.executing--;
            this.pump();
            this.wake();
        }
    }
    async reporter() {
        for (;;) {
            if (this.reports.length === 0 || (this.carrier && !this.drained)) {
                // Not at the stop itself: a claim answered as the stop came still starts its tasks,
                // and their reports must go out too.
                if (this.drained && this.running.size === 0 && this.reports.length === 0)
                    return;
                await new Promise((r) => { this.reportWake = r; setTimeout(r, 500); });
                continue;
            }
            const batch = this.reports.splice(0, 500);
            await this.deliver(batch);
        }
    }
    /**
     * Until delivered or the lease is over (then the rescuer owns the task anyway). What went
     * through is done; only a part that met an outage (5xx, 429, no answer) is sent again, and a
     * part refused for what it is (4xx) is dropped.
     */
    async deliver(batch) {
        let delay = 100;
        while (batch.length) {
            const completes = batch.filter((r) => r.what === "complete").map((r) => r.item);
            const fails = batch.filter((r) => r.what === "fail").map((r) => r.item);
            const [c, f] = await Promise.allSettled([
                completes.length ? this.client.completeMany(completes) : Promise.resolve([]),
                fails.length ? this.client.failMany(fails) : Promise.resolve([]),
            ]);
            const again = new Set();
            for (const [what, res] of [["complete", c], ["fail", f]]) {
                if (res.status === "fulfilled") {
                    this.settle(what, res.value);
                }
                else if (res.reason instanceof DocketError && res.reason.status < 500 && res.reason.status !== 429) {
                    console.error(`docket worker ${this.name}: report refused, dropped: ${res.reason}`);
                }
                else {
                    again.add(what);
                }
            }
            if (!again.size)
                return;
            await sleep(delay);
            delay = Math.min(delay * 2, 5000);
            const now = Date.now();
            batch = batch.filter((r) => again.has(r.what) && r.leaseEnd > now);
        }
    }
    /** @internal */
    async beat(job) {
        const run = this.running.get(job.id);
        if (!run || run.done)
            return;
        try {
            await this.client.heartbeat(job.id, job.lease, { progress: job.progressValue });
            run.leaseEnd = Date.now() + run.leaseLen;
        }
        catch (e) {
            if (e instanceof DocketError && (e.status === 409 || e.status === 404)) {
                job.abort(new AbortedError()); // cancelled, lease_lost, timed_out: no longer ours
            }
            else {
                console.warn(`docket worker ${this.name}: task ${job.id}: heartbeat failed: ${e}`);
            }
        }
    }
    async heartbeats() {
        while (!(this.stopping.signal.aborted && this.running.size === 0)) {
            const now = Date.now();
            const due = [...this.running.values()].filter((r) => !r.done && r.nextBeat <= now);
            for (const r of due)
                r.nextBeat = now + r.beatEvery;
            if (due.length)
                await Promise.allSettled(due.map((r) => this.beat(r.job)));
            const soonest = Math.min(now + 1000, ...[...this.running.values()].map((r) => r.nextBeat));
            await sleep(Math.max(50, Math.min(1000, soonest - Date.now())));
        }
    }
    /** Hands back what claim `claimId` took, retrying an outage within the grace (at most 10 s). */
    async releaseClaim(queue, claimId) {
        const end = Date.now() + Math.min(this.graceMs, 10_000);
        for (let delay = 100;; delay = Math.min(delay * 2, 2000)) {
            try {
                const back = await this.client.releaseClaim(queue, claimId);
                if (back.length)
                    console.info(`docket worker ${this.name}: stopped mid-claim: handed back ${back.length} task(s)`);
                return;
            }
            catch (e) {
                if ((e instanceof DocketError && e.status < 500 && e.status !== 429) || Date.now() + delay > end) {
                    console.warn(`docket worker ${this.name}: could not hand back the claim (its leases will end): ${e}`);
                    return;
                }
                await sleep(delay);
            }
        }
    }
    async drain() {
        // Held tasks not started go back at once (no attempt counted); the running ones get the
        // grace period.
        const held = this.buffer.splice(0).filter((run) => !run.done);
        for (const run of held) {
            run.done = true;
            this.running.delete(run.job.id);
        }
        try {
            for (let i = 0; i < held.length; i += 500) {
                await this.client.releaseMany(held.slice(i, i + 500).map((r) => ({ id: r.job.id, lease: r.job.lease })));
            }
        }
        catch (e) {
            // A server without the release route (before issue 37): failed with retry_in 0 instead.
            console.warn(`docket worker ${this.name}: releasing held tasks failed (${e}): handing them back as failures`);
            for (const run of held)
                this.handBack(run);
        }
        this.reportWake();
        const end = Date.now() + this.graceMs;
        while (this.running.size && Date.now() < end)
            await sleep(50);
        for (const run of [...this.running.values()]) {
            this.handBack(run);
            run.job.abort(new AbortedError());
        }
        this.reportWake();
    }
    /** Fails a task in hand with `retry_in: 0`: it runs again at once. */
    handBack(run) {
        this.reports.push({ what: "fail", leaseEnd: run.leaseEnd, item: { id: run.job.id, lease: run.job.lease,
                error: "worker stopped: handed back", retry_in: "0ms", worker: this.name } });
    }
    async presence() {
        if (this.reportMs <= 0)
            return;
        while (!this.stopping.signal.aborted) {
            await this.sendPresence(this.running.size ? "work" : "idle");
            await sleep(this.reportMs, this.stopping.signal);
        }
    }
    async sendPresence(state) {
        if (this.reportMs <= 0)
            return;
        try {
            await this.client.reportWorker(this.name, { state, tasks: [...this.running.keys()].slice(0, 10_000), queue: this.handlers.size ? this.queue : this.workflowQueue,
                kinds: this.kinds(), concurrency: this.concurrency, host: hostname(), pid: process.pid, restarts: 0,
                started_at: this.startedAt, interval: formatDuration(this.reportMs),
                ...(this.labels && Object.keys(this.labels).length ? { labels: this.labels } : {}) });
        }
        catch { /* a missed report only makes the worker look late */ }
    }
}
class TimeoutError extends Error {
    constructor(timeout) { super(`timeout: the handler ran past the task's timeout (${timeout})`); this.name = "TimeoutError"; }
}
class AbortedError extends Error {
    constructor() { super("aborted"); this.name = "AbortedError"; }
}
