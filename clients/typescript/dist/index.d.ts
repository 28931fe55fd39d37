/**
 * @docket/client — the TypeScript client, worker and processor helper for docket.
 * - {@link Client}: every API operation (tasks, the work path, queues, schedules, processes, events, tokens);
 * - {@link Worker}: handlers per kind, batched claims and reports, heartbeats, timeouts, cancellation, graceful stop;
 *   workflows (durable functions) with {@link Worker.workflow} and a {@link WorkflowContext};
 * - {@link Processor}: `init`/`call`/`repair`/`timeout` handlers for durable processes;
 * - {@link TaskWorker}: node-daemons' base task worker (`handleTask`, `delay`) on the Worker.
 */
export * from "./client.js";
export * from "./durations.js";
export * from "./errors.js";
export * from "./worker.js";
export * from "./durable.js";
export * from "./processor.js";
export * from "./node-daemons.js";
export type { components, paths } from "./schema.js";
