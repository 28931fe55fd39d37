// `docket serve` processes of a test's own, on a FRESH database (tests that restart a server or
// use two nodes): SQLite a new file in a temp dir; PostgreSQL a schema dur_<random> of
// $DOCKET_TEST_PG_URL; MariaDB a database t_<32 hex digits> in $DOCKET_TEST_MYSQL_URL's server.
// `dropAll()` stops them and drops what they made.
import { spawn, execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, openSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sleep } from "./helpers.mjs";

const BIN = process.env.DOCKET_BIN;
const made = [];

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

function mysqlClient(url) {
  const m = /^[a-z]+:\/\/(?:([^:@/]*)(?::([^@/]*))?@)?([^:/?]+)(?::(\d+))?/.exec(url);
  let bin = "mariadb";
  try { execFileSync("sh", ["-c", "command -v mariadb"], { stdio: "ignore" }); } catch { bin = "mysql"; }
  const args = ["--protocol=tcp", "-h", m[3], "-P", m[4] ?? "3306", "-u", m[1] || "root"];
  if (m[2]) args.push(`-p${m[2]}`);
  return (sql) => execFileSync(bin, [...args, "-e", sql], { stdio: "ignore" });
}

/** A fresh database for `backend` (sqlite, postgres, mysql): `args` for serve, `drop()`. */
export function freshDatabase(backend) {
  const hex = randomBytes(16).toString("hex");
  if (backend === "sqlite") {
    const dir = mkdtempSync(join(tmpdir(), "docket-ts-dur-"));
    return { args: ["--database", `sqlite://${dir}/db.sqlite`], drop: () => rmSync(dir, { recursive: true, force: true }) };
  }
  if (backend === "postgres") {
    const url = process.env.DOCKET_TEST_PG_URL, schema = `dur_${hex.slice(0, 16)}`;
    return { args: ["--database", url, "--schema", schema],
      drop: () => execFileSync("psql", [url, "-XAtqc", `DROP SCHEMA IF EXISTS ${schema} CASCADE`], { stdio: "ignore" }) };
  }
  const url = process.env.DOCKET_TEST_MYSQL_URL, db = `t_${hex}`;
  const dbUrl = url.replace(/^([a-z]+:\/\/[^/?]*)(\/[^?]*)?/, `$1/${db}`);
  return { args: ["--database", dbUrl], drop: () => mysqlClient(url)(`DROP DATABASE IF EXISTS \`${db}\``) };
}

/** A `docket serve` on `db` (from {@link freshDatabase}) at a port of its own: `url`, `stop()`, `start()`. */
export async function serve(db, node) {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const logDir = mkdtempSync(join(tmpdir(), "docket-ts-serve-"));
  const s = {
    url, proc: null, log: join(logDir, "serve.log"),
    async start() {
      const out = openSync(s.log, "a");
      s.proc = spawn(BIN, ["serve", "--listen", `127.0.0.1:${port}`, "--node", node, "--rescue-interval", "200ms",
        "--poll-interval", "100ms", "--grace", "5s", ...db.args], { stdio: ["ignore", out, out] });
      const exited = new Promise((r) => s.proc.once("exit", r));
      const end = Date.now() + 60_000;
      for (;;) {
        try { if ((await fetch(`${url}/healthz`)).ok) return; } catch { /* not yet */ }
        if (s.proc.exitCode !== null || Date.now() > end) {
          throw new Error(`docket serve (${node}) did not come up: ${execFileSync("tail", ["-20", s.log]).toString()}`);
        }
        await Promise.race([sleep(200), exited]);
      }
    },
    async stop() {
      const proc = s.proc; // not the one a later start() makes
      if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
      const exited = new Promise((r) => proc.once("exit", r));
      proc.kill("SIGTERM");
      let timer;
      await Promise.race([exited, new Promise((r) => { timer = setTimeout(r, 15_000); })]);
      clearTimeout(timer);
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
      await exited;
    },
  };
  made.push(async () => { await s.stop(); rmSync(logDir, { recursive: true, force: true }); });
  await s.start();
  return s;
}

/** Stops every server {@link serve} started. */
export async function stopAll() {
  for (const f of made.splice(0)) await f().catch(() => {});
}

/** Stops the servers of `db` and drops it. */
export async function dropDatabase(db, ...servers) {
  for (const s of servers) await s?.stop().catch(() => {});
  try { db.drop(); } catch (e) { console.warn(`could not drop a test database: ${e}`); }
}
