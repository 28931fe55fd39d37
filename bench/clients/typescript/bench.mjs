// bench.mjs work SERVER N CONC PROFILE | latency SERVER RATE SECS CONC
import { writeFileSync } from "node:fs";
import { Client, Worker } from "../../../clients/typescript/dist/index.js";

const [mode, server, a, b, c] = process.argv.slice(2);
const client = new Client({ server });
if (mode === "work") {
  const n = Number(a), conc = Number(b), profile = c;
  // "prefetch": claim up to 1000 ahead of free handlers (the HTTP path bench's claim batch);
  // "deep": 10 claims of up to 1000 in flight, 10,000 held ahead — what the HTTP work path
  // (c10-http: 10 loops claiming 1000) keeps in flight; "default": the worker's default ("auto").
  const prefetch = profile === "prefetch" ? 1000 : profile === "deep" ? 10_000 : undefined;
  const claims = profile === "deep" ? 10 : undefined;
  const t0 = performance.now();
  const w = new Worker({ client, queue: "bench", concurrency: conc, prefetch, claims, wait: "1s", reportIntervalMs: 0, signals: false });
  w.handle("noop", () => null);
  const running = w.run();
  while (w.stats.completed < n) await new Promise((r) => setTimeout(r, 5));
  const secs = (performance.now() - t0) / 1000;
  w.stop(); await running;
  console.log(`RESULT seconds=${secs.toFixed(6)}`);
} else if (mode === "latency") {
  const rate = Number(a), secs = Number(b), conc = Number(c);
  const total = rate * secs, sent = new Map(), started = new Map();
  const w = new Worker({ client, queue: "lat", concurrency: conc, wait: "10s", reportIntervalMs: 0, signals: false });
  w.handle("lat", (job) => { started.set(job.payload.id, performance.now()); return null; });
  const running = w.run();
  await new Promise((r) => setTimeout(r, 500));
  const start = performance.now();
  for (let i = 0; i < total; i++) {
    const due = start + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const t0 = performance.now();
    await client.enqueue("lat", { id: i, t: Date.now() }, { queue: "lat" });
    sent.set(i, [t0, performance.now()]);
  }
  const end = performance.now() + 10_000;
  while (started.size < total && performance.now() < end) await new Promise((r) => setTimeout(r, 20));
  w.stop(); await running;
  const lines = [];
  for (let i = 0; i < total; i++) {
    const s = sent.get(i), h = started.get(i);
    lines.push(s && h !== undefined ? `${(h - s[1]).toFixed(3)} ${(h - s[0]).toFixed(3)}` : "nan nan");
  }
  writeFileSync(process.env.LAT_OUT ?? "lat.txt", lines.join("\n") + "\n");
}
