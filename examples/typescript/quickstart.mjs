import { Client, Worker } from "@docket/client";

const client = new Client(); // $DOCKET_SERVER, else http://127.0.0.1:7070; token from $DOCKET_TOKEN
const task = await client.enqueue("greet", { name: "Ada" }, { queue: "quickstart" });
const worker = new Worker({ client, queue: "quickstart" });
worker.handle("greet", (job) => {
  worker.stop(); // one task is enough for a quickstart: finish it, then stop
  return `hello, ${job.payload.name}`;
});
await worker.run(); // until stop(), SIGTERM or Ctrl-C
console.log((await client.getTask(task.id)).result); // hello, Ada
