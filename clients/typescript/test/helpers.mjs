// Servers come from clients/test.sh (DOCKET_TEST_SERVERS="sqlite=URL,postgres=URL,mysql=URL", and
// DOCKET_TEST_TLS_URL/DOCKET_TEST_CA/DOCKET_TEST_TOKEN). Each test works its own queue.
import { randomUUID } from "node:crypto";

const raw = process.env.DOCKET_TEST_SERVERS;
if (!raw) { console.error("run these tests through clients/test.sh (it starts the servers)"); process.exit(2); }
export const SERVERS = Object.fromEntries(raw.split(",").map((s) => s.split(/=(.*)/s).slice(0, 2)));
export const uniq = (p = "ts") => `${p}-${randomUUID().slice(0, 12)}`;
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function waitFor(fn, timeoutMs = 30_000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error("condition not met in time");
    await sleep(50);
  }
}

/** Runs `worker` until `cond()` holds, then stops it and waits for it. */
export async function runUntil(worker, cond, timeoutMs = 30_000) {
  const running = worker.run();
  try { await waitFor(cond, timeoutMs); } finally { worker.stop(); await running; }
}
