// A worker in its own process (SIGKILL/SIGTERM tests): worker-proc.mjs SERVER QUEUE SLEEP_MS LEASE
import { Client, Worker } from "../dist/index.js";
const [server, queue, sleepMs, lease] = process.argv.slice(2);
const worker = new Worker({ client: new Client({ server }), queue, concurrency: 4, lease, wait: "1s" });
worker.handle("slow", async (job) => {
  console.log(`started ${job.id}`);
  await new Promise((r) => setTimeout(r, Number(sleepMs)));
  console.log(`finished ${job.id}`);
  return { by: "proc" };
});
await worker.run();
console.log("exited");
