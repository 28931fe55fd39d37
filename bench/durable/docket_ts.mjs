// docket TypeScript-client contender of the durable-functions bench (see README.md).
//
// Uses the TypeScript client's workflow support (issue 41): client.startWorkflow,
// client.workflowResult and worker.workflow(name, async (ctx, input) => ...) with
// `await ctx.step(name, fn)`, from clients/typescript/dist (the client's `npm run build`). Should
// the client lack workflowResult, the contract's GET /v1/workflow-runs/{id}/result?wait=30s is
// called directly.
//
// Environment: DOCKET_SERVER (a `docket serve` that run.sh started on a fresh database), N,
// STARTERS, OUT (JSON file), WORKER_CONC (workflow runs at once in the worker, default 100: the
// DBOS contenders run every started workflow at once, so the worker must not be the one holding
// back), DOCKET_ROOT (the repository; default two folders up), DOCKET_DEFER_STEPS (unset: the
// client's default; "0": Worker option deferSteps false, every step's entry sent when the step ends
// — run.sh's contender docket-ts-eager; "1": deferSteps true, a step's entry goes with the run's
// next server call, before the next step runs or with the finish).
//
// Shape: one Node process. A Worker on queue "workflows" (the runs' default queue) is started
// idle, then STARTERS async starters each call `await client.startWorkflow("three_steps", i)` for
// their share of the N runs, then wait for each of theirs until it is finished. The clock runs from
// releasing the starters until every run was seen finished; then every run's state is checked
// (N completed).
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = process.env.DOCKET_ROOT ?? resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const { Client, Worker } = await import(pathToFileURL(`${root}/clients/typescript/dist/index.js`).href);
const clientVersion = JSON.parse(readFileSync(`${root}/clients/typescript/package.json`, "utf8")).version;

const SERVER = process.env.DOCKET_SERVER;
const N = Number(process.env.N ?? 2000);
const STARTERS = Number(process.env.STARTERS ?? 10);
const WORKER_CONC = Number(process.env.WORKER_CONC ?? 100);
const TERMINAL = new Set(["completed", "failed", "cancelled"]);
const DEFER = process.env.DOCKET_DEFER_STEPS; // undefined: the client's default
const deferOpt = DEFER === undefined || DEFER === "" ? {} : { deferSteps: DEFER !== "0" };

const stepMs = [], workflowMs = [], startMs = [], errors = [];
const states = new Map();

const client = new Client({ server: SERVER });
const runOf = (a) => (a && typeof a === "object" && a.run && typeof a.run === "object" ? a.run : a);

async function resultOf(id) {
  if (typeof client.workflowResult === "function") return runOf(await client.workflowResult(id, { wait: "30s" }));
  const r = await fetch(`${SERVER}/v1/workflow-runs/${encodeURIComponent(id)}/result?wait=30s`);
  if (!r.ok) throw new Error(`GET result ${id}: HTTP ${r.status} ${await r.text()}`);
  return runOf(await r.json());
}

const noop = async () => null;

function pct(xs, p) { // nearest rank
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return Number(s[Math.max(0, Math.min(s.length - 1, Math.ceil((p * s.length) / 100) - 1))].toFixed(3));
}
const summary = (xs) => ({ count: xs.length, p50: pct(xs, 50), p99: pct(xs, 99), max: pct(xs, 100),
  mean: xs.length ? Number((xs.reduce((a, b) => a + b, 0) / xs.length).toFixed(3)) : null });

const w = new Worker({ client, concurrency: WORKER_CONC, wait: "1s", reportIntervalMs: 0, signals: false, ...deferOpt });
w.workflow("three_steps", async (ctx, input) => {
  const t0 = performance.now();
  for (let k = 0; k < 3; k++) {
    const s = performance.now();
    // Eager (deferSteps false): resolves once POST .../steps answered 200 (this step recorded).
    // Deferred: the call first sends the previous step's entry, then runs the step; its own entry
    // goes with the next call (the next step's, or the finish).
    await ctx.step(`noop${k}`, noop);
    stepMs.push(performance.now() - s);
  }
  workflowMs.push(performance.now() - t0);
  return input;
});
const running = w.run();
await new Promise((r) => setTimeout(r, 500)); // the worker's first claim is in (long poll)

async function starter(k) {
  const ids = [];
  try {
    for (let i = k; i < N; i += STARTERS) {
      const s = performance.now();
      const run = runOf(await client.startWorkflow("three_steps", i));
      startMs.push(performance.now() - s);
      ids.push(run.id);
    }
    for (const id of ids) {
      for (;;) {
        const run = await resultOf(id);
        if (TERMINAL.has(run.state)) { states.set(id, run.state); break; }
      }
    }
  } catch (e) {
    errors.push(String(e?.stack ?? e));
  }
}

const t0 = performance.now();
await Promise.all(Array.from({ length: STARTERS }, (_, k) => starter(k)));
const secs = (performance.now() - t0) / 1000;
w.stop();
await running;

let completed = 0;
for (const s of states.values()) if (s === "completed") completed++;
let sample = null; // the journal as the server holds it, for one run: 3 step entries expected
if (states.size) {
  try {
    const r = await fetch(`${SERVER}/v1/workflow-runs/${encodeURIComponent(states.keys().next().value)}/steps`);
    sample = (await r.json()).steps?.length ?? null;
  } catch (e) { sample = String(e); }
}

const out = {
  contender: process.env.CONTENDER ?? "docket-ts",
  library: `@docket/client ${clientVersion}`,
  runtime: `node ${process.versions.node}`,
  mode: `await client.startWorkflow per run from each async starter; workflowResult long poll (30 s); Worker(concurrency=${WORKER_CONC}, deferSteps ${DEFER === undefined || DEFER === "" ? "default" : DEFER !== "0"})`,
  defer_steps: DEFER === undefined || DEFER === "" ? "client default" : DEFER !== "0",
  n: N, starters: STARTERS, steps_per_workflow: 3, worker_concurrency: WORKER_CONC,
  seconds: Number(secs.toFixed(6)),
  workflows_per_s: Number((N / secs).toFixed(2)),
  steps_per_s: Number(((3 * N) / secs).toFixed(2)),
  step_ms: summary(stepMs),
  workflow_ms: summary(workflowMs),
  workflow_ms_per_step: summary(workflowMs.map((x) => x / 3)),
  start_call_ms: summary(startMs),
  verified_success: completed,
  journal_entries_of_one_run: sample,
  errors: errors.slice(0, 5),
  ok: completed === N && errors.length === 0,
};
writeFileSync(process.env.OUT, JSON.stringify(out, null, 1));
console.log(`RESULT workflows_per_s=${out.workflows_per_s} seconds=${secs.toFixed(3)} ok=${out.ok}`);
process.exit(0);
