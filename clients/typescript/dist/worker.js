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
    queue;
    concurrency;
    name;
    stats = { completed: 0, failed: 0, lost: 0 };
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
    /** The last claim answered found tasks: the loops ask again at once, carrying what finished. */
    busy = false;
    waiters = [];
    buffer = [];
    executing = 0;
    wait;
    lease;
    graceMs;
    reportMs;
    signals;
    handlers = new Map();
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
        this.graceMs = o.shutdownGraceMs ?? 30_000;
        this.reportMs = o.reportIntervalMs ?? 10_000;
        this.signals = o.signals ?? true;
    }
    /** `fn` handles tasks of `kind` (at `stage`, when given; without one, every stage of the kind). */
    handle(kind, fn, o = {}) {
        this.handlers.set(`${kind}\u0000${o.stage ?? ""}`, fn);
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
    kinds() { return [...new Set([...this.handlers.keys()].map((k) => k.split("\u0000")[0]))].sort(); }
    stages() {
        const s = [...this.handlers.keys()].map((k) => k.split("\u0000")[1]);
        return s.includes("") ? undefined : [...new Set(s)].sort();
    }
    handlerFor(t) {
        return this.handlers.get(`${t.kind}\u0000${t.stage ?? ""}`) ?? this.handlers.get(`${t.kind}\u0000`);
    }
    /** Runs until {@link stop} (or SIGTERM/SIGINT); resolves once every report is out. */
    async run() {
        if (this.handlers.size === 0)
            throw new Error("no handler registered");
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
            await Promise.all(Array.from({ length: this.claims }, (_, i) => this.claimLane(i === 0)));
        }
        finally {
            this.reportWake();
        }
    }
    /**
     * One claim loop. The first (`first`) long-polls while the queue is empty; the others claim
     * only while it has work and never wait.
     */
    async claimLane(first) {
        const kinds = this.kinds(), stages = this.stages();
        while (!this.stopping.signal.aborted) {
            const room = this.concurrency + this.prefetching;
            const share = Math.max(1, Math.ceil(room / this.claims));
            const free = room - this.running.size - this.asked;
            // The first loop alone asks for all the room when the queue was idle; with the queue
            // busy every loop asks for its share, so a claim is answered while the others' tasks run.
            const limit = Math.min(free, this.batch, first ? room : share);
            // The others wait until half a share is free: claims of a task or two cost a round trip each.
            const least = first ? 1 : Math.ceil(Math.min(share, this.batch) / 2);
            if (limit < least || (!first && !this.busy)) {
                if (this.carriers === 0)
                    this.reportWake();
                await new Promise((r) => { this.waiters.push(r); });
                continue;
            }
            // One round trip reports what finished and asks for more. Such a claim does not wait
            // and is not given up at a stop, so its reports are never in doubt.
            const carried = this.reports.splice(0, Math.max(500, this.batch));
            const waits = first && !this.busy && carried.length === 0;
            if (waits)
                this.reportWake();
            else
                this.carriers++;
            this.asked += limit;
            let answer, error;
            const claimId = randomUUID();
            try {
                answer = await this.client.claimWith(this.queue, { worker: this.name, limit,
                    lease: this.lease, wait: waits ? this.wait : "0s", kinds, stages, claimId, lean: !this.fullTasks,
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
                this.busy = false;
                if (carried.length)
                    this.reports.unshift(...carried);
                if (this.stopping.signal.aborted) {
                    // Stopping mid-poll: the server may have claimed tasks for an answer nobody will
                    // read. Released by the claim's id they are available again at once (docket finds
                    // them even when the release overtakes the claim).
                    await this.releaseClaim(claimId);
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
            this.busy = tasks.length > 0;
            for (const t of tasks)
                this.start(t);
            // The others may claim now (busy), or look again. Without the wake above, a first loop
            // waiting while the room was all asked by another's claim that came back empty would
            // wait for a handler that never ends.
            if (this.busy)
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
    start(task) {
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
            done: false, deadline: now + timeout, started: false };
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
    async releaseClaim(claimId) {
        const end = Date.now() + Math.min(this.graceMs, 10_000);
        for (let delay = 100;; delay = Math.min(delay * 2, 2000)) {
            try {
                const back = await this.client.releaseClaim(this.queue, claimId);
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
            await this.client.reportWorker(this.name, { state, tasks: [...this.running.keys()].slice(0, 10_000), queue: this.queue,
                kinds: this.kinds(), concurrency: this.concurrency, host: hostname(), pid: process.pid, restarts: 0,
                started_at: this.startedAt, interval: formatDuration(this.reportMs) });
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
