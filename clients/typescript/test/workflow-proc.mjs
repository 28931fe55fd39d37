// A workflow worker in its own process (the SIGKILL test): workflow-proc.mjs SERVER QUEUE DIR
import { Client, Worker } from "../dist/index.js";
import { fiveSteps } from "./workflow-defs.mjs";
const [server, queue, dir] = process.argv.slice(2);
// A short lease: once the process is killed its run's task is taken up again within seconds.
const worker = new Worker({ client: new Client({ server }), workflowQueue: queue, lease: "2s", wait: "1s", reportIntervalMs: 0 });
worker.workflow("five", fiveSteps(dir));
await worker.run();
