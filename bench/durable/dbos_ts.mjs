// DBOS Transact TypeScript contender of the durable-functions bench (see README.md).
//
// Environment: DATABASE_URL (a fresh, empty PostgreSQL database), N, STARTERS, OUT (JSON file),
// DURABLE_CACHE (the folder whose node_modules holds @dbos-inc/dbos-sdk 5.3.x; run.sh installs it).
//
// Shape: one Node process. DBOS is launched (system schema created, not timed), then STARTERS
// async starters each call `await DBOS.startWorkflow(threeSteps)(i)` for their share of the N
// workflows (DBOS runs each started workflow at once in this process: that is its worker), then
// each starter awaits its workflows' handle.getResult(). The clock runs from releasing the starters
// until every getResult resolved; then the database is checked: N rows SUCCESS in
// dbos.workflow_status.
import { createRequire } from "node:module";
import { readFileSync, writeFileSync } from "node:fs";

const cache = process.env.DURABLE_CACHE;
const require = createRequire(`${cache}/package.json`);
const { DBOS } = require("@dbos-inc/dbos-sdk");
const pg = require("pg");
const sdkVersion = JSON.parse(readFileSync(`${cache}/node_modules/@dbos-inc/dbos-sdk/package.json`, "utf8")).version;

const URL = process.env.DATABASE_URL;
const N = Number(process.env.N ?? 2000);
const STARTERS = Number(process.env.STARTERS ?? 10);

const stepMs = [], workflowMs = [], startMs = [], errors = [];

DBOS.setConfig({ name: "durable-bench", systemDatabaseUrl: URL, logLevel: "warn" });

const noop = async () => null;
const threeSteps = DBOS.registerWorkflow(async (i) => {
  const t0 = performance.now();
  for (let k = 0; k < 3; k++) {
    const s = performance.now();
    await DBOS.runStep(noop, { name: `noop${k}` }); // resolves once DBOS has written the step's output row
    stepMs.push(performance.now() - s);
  }
  workflowMs.push(performance.now() - t0);
  return i;
}, { name: "threeSteps" });

function pct(xs, p) { // nearest rank
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  return Number(s[Math.max(0, Math.min(s.length - 1, Math.ceil((p * s.length) / 100) - 1))].toFixed(3));
}
const summary = (xs) => ({ count: xs.length, p50: pct(xs, 50), p99: pct(xs, 99), max: pct(xs, 100),
  mean: xs.length ? Number((xs.reduce((a, b) => a + b, 0) / xs.length).toFixed(3)) : null });

await DBOS.launch();

async function starter(k) {
  const handles = [];
  try {
    for (let i = k; i < N; i += STARTERS) {
      const s = performance.now();
      handles.push(await DBOS.startWorkflow(threeSteps)(i));
      startMs.push(performance.now() - s);
    }
    for (const h of handles) await h.getResult();
  } catch (e) {
    errors.push(String(e?.stack ?? e));
  }
}

const t0 = performance.now();
await Promise.all(Array.from({ length: STARTERS }, (_, k) => starter(k)));
const secs = (performance.now() - t0) / 1000;
await DBOS.shutdown();

const db = new pg.Client({ connectionString: URL });
await db.connect();
const success = Number((await db.query("select count(*) from dbos.workflow_status where status = 'SUCCESS'")).rows[0].count);
const steps = Number((await db.query("select count(*) from dbos.operation_outputs")).rows[0].count);
await db.end();

const out = {
  contender: "dbos-ts",
  library: `@dbos-inc/dbos-sdk ${sdkVersion}`,
  runtime: `node ${process.versions.node}`,
  mode: "await DBOS.startWorkflow(wf)(i) per workflow from each async starter; handle.getResult()",
  n: N, starters: STARTERS, steps_per_workflow: 3,
  seconds: Number(secs.toFixed(6)),
  workflows_per_s: Number((N / secs).toFixed(2)),
  steps_per_s: Number(((3 * N) / secs).toFixed(2)),
  step_ms: summary(stepMs),
  workflow_ms: summary(workflowMs),
  workflow_ms_per_step: summary(workflowMs.map((x) => x / 3)),
  start_call_ms: summary(startMs),
  verified_success: success,
  recorded_step_rows: steps,
  errors: errors.slice(0, 5),
  ok: success === N && errors.length === 0,
};
writeFileSync(process.env.OUT, JSON.stringify(out, null, 1));
console.log(`RESULT workflows_per_s=${out.workflows_per_s} seconds=${secs.toFixed(3)} ok=${out.ok}`);
process.exit(0);
