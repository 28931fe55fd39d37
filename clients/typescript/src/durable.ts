/**
 * Durable functions: workflows written as code, run by a {@link Worker} and journaled by docket
 * (docs/src/durable/typescript.md).
 *
 * ```ts
 * worker.workflow("checkout", async (ctx, order) => {
 *   const charge = await ctx.step("charge", () => payments.charge(order));
 *   const approved = await ctx.waitForEvent("approved", { timeout: "1h" });
 *   if (approved === undefined) { await ctx.step("refund", () => payments.refund(charge)); return "expired"; }
 *   await ctx.sleep("1d");
 *   return ctx.step("ship", () => shipping.send(order));
 * });
 * ```
 *
 * A run's function is run from the top every time its task is claimed; each durable call (a
 * step, a sleep, a wait, a child, now/random/uuid/patched) is numbered in call order, and where
 * the run's journal already holds that number the recorded value is returned instead of doing
 * the call again (replay). The code must therefore make the same durable calls in the same order
 * every time it runs (the rules of determinism); a replay that asks for another call than the
 * journal holds fails the run with a {@link NonDeterminismError}.
 */
import { randomUUID } from "node:crypto";
import { formatDuration, parseDuration, type Duration } from "./durations.js";
import { DocketError } from "./errors.js";
import type { components } from "./schema.js";

/** A journal entry as docket answers it (`GET /v1/workflow-runs/{id}/steps`). */
export type JournalEntry = components["schemas"]["Entry"];
/** A workflow run (`GET /v1/workflow-runs/{id}`). */
export type WorkflowRun = components["schemas"]["WorkflowRun"];

/** The terminal states of a run. */
export const FINISHED_RUN_STATES: readonly string[] = ["completed", "failed", "cancelled"];

/** Options of {@link WorkflowContext.step}. */
export interface StepOptions {
  /** Runs of the function before the step is recorded as failed [3]. */
  maxAttempts?: number;
  /** Delay before the second run [1 s], multiplied by `factor` [2] per further run, at most `max` [60 s]. */
  backoff?: { initial?: Duration; factor?: number; max?: Duration };
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
export class StepFailed extends Error {
  constructor(readonly step: string, readonly error: string, readonly attempts: number) {
    super(`step '${step}' failed after ${attempts} attempt${attempts === 1 ? "" : "s"}: ${error.split("\n")[0]}`);
    this.name = "StepFailed";
  }
}

/** A child run that ended failed or cancelled, raised by {@link ChildHandle.result}. */
export class ChildFailed extends Error {
  constructor(readonly childId: string, readonly workflow: string, readonly state: string, readonly error: string | null) {
    super(`child workflow ${workflow} run ${childId} ${state}${error ? `: ${error.split("\n")[0]}` : ""}`);
    this.name = "ChildFailed";
  }
}

/** The code asked for another durable call than the journal holds at that number: the run fails with it. */
export class NonDeterminismError extends Error {
  constructor(message: string) { super(message); this.name = "NonDeterminismError"; }
}

/**
 * Thrown inside the function when its execution ends here (the run sleeps or waits, the run was
 * cancelled, the lease was lost): not an error of the workflow. Do not catch it (a `catch` that
 * swallows it changes nothing: every later durable call throws it again and the function's
 * outcome is ignored).
 */
class Ended extends Error {
  constructor(readonly why: "suspended" | "lost") { super(`workflow execution ended (${why})`); this.name = "WorkflowEnded"; }
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

const DEFAULT_BACKOFF = { initial: 1000, factor: 2, max: 60_000 };
/** docket's answers (409) to a call under a lease the worker no longer holds. */
const LEASE_REFUSALS = ["lease_lost", "cancelled", "timed_out"];
/** The message of docket's error, without the code and status the client adds. */
const docketMessage = (e: DocketError) => e.message.replace(new RegExp(`^${e.code}: `), "").replace(/ \(HTTP \d+\)$/, "");

function errorText(e: unknown): string {
  if (e instanceof Error) {
    const head = `${e.name}: ${e.message}`;
    const stack = e.stack ?? "";
    return (stack.startsWith(head) ? stack : `${head}\n${stack}`).slice(0, 64_000);
  }
  return String(e).slice(0, 64_000);
}

/** A value as JSON gives it back (what a replay returns): `undefined` → null, `Date` → string, … */
function asJson(v: unknown): unknown {
  if (v === undefined || v === null) return null;
  const t = typeof v;
  if (t === "number" || t === "string" || t === "boolean") return t === "number" && !Number.isFinite(v as number) ? null : v;
  const s = JSON.stringify(v);
  return s === undefined ? null : JSON.parse(s);
}

/**
 * A random number in [0, 1) of 15 significant digits: it reads back from docket as it was sent
 * (docket's JSON parser may land a 17-digit number one unit off), so a replay sees the same.
 */
function random15(): number {
  const x = Number(Math.random().toPrecision(15));
  return x < 1 ? x : 0.999999999999999;
}

const ms = (d: Duration) => (typeof d === "number" ? d : parseDuration(d));
const abortableSleep = (delay: number, signal: AbortSignal) => new Promise<void>((resolve) => {
  if (signal.aborted) { resolve(); return; }
  const t = setTimeout(() => { signal.removeEventListener("abort", done); resolve(); }, delay);
  const done = () => { clearTimeout(t); resolve(); };
  signal.addEventListener("abort", done, { once: true });
});

/** A child run started by {@link WorkflowContext.startChild}. */
export class ChildHandle {
  /** @internal */
  constructor(readonly id: string, readonly workflow: string, private readonly ctx: WorkflowContext) {}
  /** Waits (durably) for the child's end: its result, or {@link ChildFailed}. */
  result<T = unknown>(): Promise<T> { return this.ctx.awaitChild(this) as Promise<T>; }
}

/** What a workflow's function gets: its durable calls. */
export class WorkflowContext {
  readonly runId: string;
  readonly workflow: string;
  readonly input: unknown;
  private readonly journal = new Map<number, JournalEntry>();
  private readonly journalLength: number;
  /** The server's clock at `resume`: a sleep whose `wake_at` is past it is over. */
  private readonly serverNow: number;
  private seq = 0;
  private pending: Record<string, unknown>[] = [];
  private chain: Promise<unknown> = Promise.resolve();
  // Made when first read: an AbortController per run is a noticeable part of a short run's CPU.
  private ctl?: AbortController;
  /** @internal */ ended?: Ended;
  /** @internal */ nondet?: NonDeterminismError;
  /** @internal A call refused for what it carried (400, 413, a child's id taken): the run fails with it. */
  fatal?: Error;

  /** @internal */
  constructor(private readonly o: ExecutionOptions, journal: JournalEntry[], serverNow: number) {
    this.runId = o.runId; this.workflow = o.workflow; this.input = o.input;
    for (const e of journal) this.journal.set(e.seq, e);
    this.journalLength = journal.length;
    this.serverNow = serverNow;
  }

  /** True while the function replays what the journal holds (no new call has been made yet). */
  get replaying(): boolean { return this.seq < this.journalLength; }
  /** Aborted when this execution ends (suspended, cancelled, lease lost, the worker stops). */
  get signal(): AbortSignal {
    if (!this.ctl) {
      this.ctl = new AbortController();
      if (this.ended) this.ctl.abort(this.ended);
    }
    return this.ctl.signal;
  }

  /** @internal Ends the execution here: every later durable call throws, the outcome is ignored. */
  end(why: "suspended" | "lost"): Ended {
    if (!this.ended) { this.ended = new Ended(why); this.ctl?.abort(this.ended); }
    return this.ended;
  }

  /** @internal Resolves once every durable call made so far is settled. */
  idle(): Promise<void> { return this.chain.then(() => {}); }

  /**
   * @internal At the function's return: the journal's entries it did not ask for (the code
   * changed under the run), as a non-determinism error's text; undefined when there are none.
   */
  leftover(): string | undefined {
    if (this.seq >= this.journalLength) return undefined;
    const e = this.journal.get(this.seq);
    return `non-determinism: workflow ${this.workflow} run ${this.runId}: the code returned after ${this.seq} call(s) but the journal has ${this.journalLength}; entry ${this.seq} is ${e?.kind} ${JSON.stringify(e?.name)}`;
  }

  /** @internal The entries not yet sent (they go with `finish`). */
  takePending(): Record<string, unknown>[] { const p = this.pending; this.pending = []; return p; }

  /** Durable calls run one at a time, in call order (the order numbers them). */
  private serial<T>(op: () => Promise<T> | T): Promise<T> {
    const p = this.chain.then(() => {
      if (this.ended) throw this.ended;
      if (this.nondet) throw this.nondet;
      if (this.fatal) throw this.fatal;
      return op();
    });
    this.chain = p.then(() => {}, () => {});
    return p;
  }

  /** The journal's entry at the current number, checked against what the code asks for. */
  private expect(kind: string, name: string): JournalEntry | undefined {
    const e = this.journal.get(this.seq);
    if (e && (e.kind !== kind || e.name !== name)) {
      // docket's words (docket_core::durable::replay_conflict), as the server and every client say it.
      this.nondet = new NonDeterminismError(`non-determinism: workflow ${this.workflow} run ${this.runId}: journal entry ${this.seq} is ${e.kind} ${JSON.stringify(e.name)} but the code asked for ${kind} ${JSON.stringify(name)}`);
      throw this.nondet;
    }
    return e;
  }

  private async post(op: "steps" | "suspend", body: Record<string, unknown>): Promise<any> {
    try {
      return await this.o.post(op, { lease: this.o.lease, ...body });
    } catch (e) {
      throw this.refused(e);
    }
  }

  /**
   * @internal What a refused or failed server call becomes: the lease's refusals end the
   * execution quietly; the server's non-determinism fails the run; a call refused for what it
   * carried fails the run with the refusal (its entries were not recorded); an outage the
   * worker could not get past abandons the execution (the task runs again once its lease ends).
   */
  refused(e: unknown): Error {
    if (e instanceof Ended) return e;
    if (e instanceof DocketError && e.code === "nondeterministic") {
      this.nondet = new NonDeterminismError(docketMessage(e));
      return this.nondet;
    }
    if (e instanceof DocketError && (LEASE_REFUSALS.includes(e.code) || e.status === 404)) return this.end("lost");
    if (e instanceof DocketError && e.status < 500 && e.status !== 429) {
      this.pending = [];
      this.fatal = e;
      return e;
    }
    this.o.warn?.(`workflow ${this.workflow} run ${this.runId}: abandoned (its task runs again once its lease ends): ${e}`);
    return this.end("lost");
  }

  private async flush(): Promise<void> {
    if (!this.pending.length) return;
    const steps = this.pending;
    await this.post("steps", { steps });
    this.pending = [];
  }

  private async suspend(wait: Record<string, unknown>): Promise<{ outcome: string; payload?: unknown }> {
    const steps = this.pending;
    const r = await this.post("suspend", { steps, wait });
    this.pending = [];
    if (r.outcome === "suspended") throw this.end("suspended");
    return r;
  }

  /**
   * A step: runs `fn` once for the run (its result, any JSON, is recorded and returned on every
   * replay). A failure is retried here with backoff (`maxAttempts` 3, 1 s ×2, at most 60 s;
   * `Permanent` is not retried); the last one is recorded and thrown as {@link StepFailed}
   * (the function may catch it; uncaught, the run fails with it).
   */
  step<T>(name: string, fn: (info: StepInfo) => T | Promise<T>, opts: StepOptions = {}): Promise<T> {
    return this.serial<T>(async () => {
      const seq = this.seq;
      const e = this.expect("step", name);
      if (e) {
        this.seq++;
        if (e.state === "failed") throw new StepFailed(name, e.error ?? "failed", e.attempts ?? 1);
        return e.output as T;
      }
      // What came before is recorded before this step does anything.
      if (this.o.deferSteps !== false) await this.flush();
      const most = Math.max(1, opts.maxAttempts ?? 3);
      const b = opts.backoff ?? {};
      let delay = b.initial !== undefined ? ms(b.initial) : DEFAULT_BACKOFF.initial;
      const factor = b.factor ?? DEFAULT_BACKOFF.factor, max = b.max !== undefined ? ms(b.max) : DEFAULT_BACKOFF.max;
      const startedAt = new Date().toISOString();
      let entry: Record<string, unknown>;
      let output: unknown = null, failure: string | undefined;
      for (let attempt = 1; ; attempt++) {
        try {
          const ctx = this;
          output = asJson(await fn({ attempt, get signal() { return ctx.signal; } }));
          if (this.ended) throw this.ended;
          entry = { seq, kind: "step", name, output, attempts: attempt, started_at: startedAt };
          break;
        } catch (err) {
          if (this.ended) throw this.ended;
          if (attempt >= most || (err instanceof Error && err.name === "Permanent")) {
            failure = errorText(err);
            entry = { seq, kind: "step", name, error: failure, attempts: attempt, started_at: startedAt };
            break;
          }
          await abortableSleep(Math.min(delay, max), this.signal);
          if (this.ended) throw this.ended;
          delay = Math.min(delay * factor, max);
        }
      }
      this.seq++;
      this.pending.push(entry);
      if (this.o.deferSteps === false) await this.flush();
      if (failure !== undefined) throw new StepFailed(name, failure, entry.attempts as number);
      return output as T;
    });
  }

  /** Sleeps durably (`"5s"`, `"1d"` or ms): the run is handed back to docket and taken up again when it is due. */
  sleep(duration: Duration): Promise<void> {
    return this.serial(async () => {
      const seq = this.seq;
      const e = this.expect("sleep", "sleep");
      if (e && (e.state === "completed" || (e.wake_at && Date.parse(e.wake_at) <= this.serverNow))) { this.seq++; return; }
      const until = new Date(Date.now() + ms(duration)).toISOString();
      await this.suspend({ seq, kind: "sleep", name: "sleep", until });
      this.seq++; // due already
    });
  }

  /**
   * Waits durably for an event `name` sent to the run (`client.sendEvent`; one sent before the
   * wait started waits in the run's mailbox): its payload, or `undefined` when `timeout` passed
   * first (a payload is JSON, never `undefined`). Without `timeout` it waits for ever.
   */
  waitForEvent<T = unknown>(name: string, o: { timeout?: Duration } = {}): Promise<T | undefined> {
    return this.serial(async () => {
      const seq = this.seq;
      const e = this.expect("event", name);
      if (e && e.state === "completed") { this.seq++; return e.output as T; }
      if (e && e.state === "timed_out") { this.seq++; return undefined; }
      const wait: Record<string, unknown> = { seq, kind: "event", name };
      if (o.timeout !== undefined) wait.timeout = formatDuration(o.timeout);
      const r = await this.suspend(wait);
      this.seq++;
      return r.outcome === "event" ? (r.payload as T) : undefined;
    });
  }

  /**
   * Starts a child run of `workflow` (id: `id`, else `<this run's id>:<number>`; its queue:
   * `queue`, else this run's). The child is created with this call; `await handle.result()`
   * waits for it. A child not awaited runs on its own.
   */
  startChild(workflow: string, input?: unknown, o: { id?: string; queue?: string } = {}): Promise<ChildHandle> {
    return this.serial(async () => {
      const seq = this.seq;
      const e = this.expect("child", workflow);
      const id = o.id ?? `${this.runId}:${seq}`;
      if (e) { this.seq++; return new ChildHandle(e.child_id ?? id, workflow, this); }
      const child: Record<string, unknown> = { id, input: asJson(input) };
      const queue = o.queue ?? this.o.queue;
      if (queue !== undefined) child.queue = queue;
      this.pending.push({ seq, kind: "child", name: workflow, child });
      this.seq++;
      await this.flush();
      return new ChildHandle(id, workflow, this);
    });
  }

  /** @internal {@link ChildHandle.result}. */
  awaitChild(h: ChildHandle): Promise<unknown> {
    return this.serial(async () => {
      const seq = this.seq;
      const e = this.expect("child_wait", h.workflow);
      let payload: unknown;
      if (e && e.state === "completed") {
        payload = e.output;
      } else {
        const r = await this.suspend({ seq, kind: "child_wait", name: h.workflow, child_id: h.id });
        payload = r.payload;
      }
      this.seq++;
      const p = (payload ?? {}) as { state?: string; result?: unknown; error?: string | null };
      if (p.state === "completed") return p.result ?? null;
      throw new ChildFailed(h.id, h.workflow, p.state ?? "failed", p.error ?? null);
    });
  }

  /** The time, recorded: a replay returns the same `Date`. */
  now(): Promise<Date> {
    return this.small("now", "now", () => new Date().toISOString()).then((s) => new Date(s as string));
  }

  /** A random number in [0, 1), recorded. */
  random(): Promise<number> { return this.small("random", "random", random15) as Promise<number>; }

  /** A random UUID, recorded. */
  uuid(): Promise<string> { return this.small("uuid", "uuid", () => randomUUID()) as Promise<string>; }

  private small(kind: string, name: string, make: () => unknown): Promise<unknown> {
    return this.serial(() => {
      const seq = this.seq;
      const e = this.expect(kind, name);
      this.seq++;
      if (e) return e.output;
      const output = make();
      this.pending.push({ seq, kind, name, output });
      return output;
    });
  }

  /**
   * Whether this run takes the code path of patch `id` (Temporal's rule): a run that reached
   * this point before the patch existed replays the old path (false); every other run records
   * the marker and takes the new one (true). Once no old run is left, drop the check.
   */
  patched(id: string): Promise<boolean> {
    return this.serial(() => {
      const e = this.journal.get(this.seq);
      if (e) {
        if (e.kind === "patch" && e.name === id) { this.seq++; return true; }
        return false;
      }
      this.pending.push({ seq: this.seq, kind: "patch", name: id, output: null });
      this.seq++;
      return true;
    });
  }
}

/**
 * Runs one execution of a run: `resume` unless fresh, the function from the top, then `finish`
 * (or nothing: suspended, or no longer this worker's). Never throws.
 */
export async function executeWorkflow(o: ExecutionOptions, abort?: (onAbort: () => void) => void): Promise<ExecutionOutcome> {
  let journal: JournalEntry[] = [];
  let serverNow = Date.now();
  const finish = async (ctx: WorkflowContext | undefined, body: Record<string, unknown>): Promise<ExecutionOutcome> => {
    try {
      await o.post("finish", { lease: o.lease, steps: ctx ? ctx.takePending() : [], ...body });
      return "finished";
    } catch (e) {
      if (!(e instanceof DocketError && (e.status === 409 || e.status === 404))) {
        o.warn?.(`workflow ${o.workflow} run ${o.runId}: finish failed (its task runs again once its lease ends): ${e}`);
      }
      return "lost";
    }
  };
  let lost = false;
  let ctx: WorkflowContext | undefined;
  abort?.(() => { lost = true; ctx?.end("lost"); });
  if (!o.fresh) {
    let r: { run: WorkflowRun; steps: JournalEntry[]; now: string };
    try {
      r = await o.post("resume", { lease: o.lease });
    } catch (e) {
      if (!(e instanceof DocketError && (e.status === 409 || e.status === 404))) {
        o.warn?.(`workflow ${o.workflow} run ${o.runId}: resume failed (its task runs again once its lease ends): ${e}`);
      }
      return "lost";
    }
    if (lost) return "lost";
    if (FINISHED_RUN_STATES.includes(r.run.state)) {
      return finish(undefined, r.run.state === "completed" ? { result: r.run.result ?? null } : { error: r.run.error ?? `run ${r.run.state}` });
    }
    journal = r.steps ?? [];
    const t = Date.parse(r.now);
    if (Number.isFinite(t)) serverNow = t;
  }
  ctx = new WorkflowContext(o, journal, serverNow);
  if (lost) ctx.end("lost");
  let result: unknown, error: unknown, ok = false;
  try {
    result = await o.fn(ctx, o.input);
    ok = true;
  } catch (e) {
    error = e;
  }
  await ctx.idle(); // a durable call not awaited by the function still ends before the finish
  if (ctx.ended) return ctx.ended.why;
  if (ctx.nondet) return finish(ctx, { error: ctx.nondet.message });
  if (ctx.fatal) return finish(ctx, { error: `${ctx.fatal.message}` });
  if (!ok) return finish(ctx, { error: error instanceof NonDeterminismError ? error.message : errorText(error) });
  const left = ctx.leftover();
  if (left) return finish(ctx, { error: left });
  let json: unknown;
  try {
    json = asJson(result);
  } catch (e) {
    return finish(ctx, { error: `the workflow's result is not JSON: ${errorText(e)}` });
  }
  return finish(ctx, { result: json });
}
