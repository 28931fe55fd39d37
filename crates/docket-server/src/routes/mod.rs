//! The API's handlers, a file per noun; the crate's `router` wires them to paths and
//! the OpenAPI document (`openapi.rs`) lists them.

pub(crate) mod batches;
pub(crate) mod changes;
pub(crate) mod events;
pub(crate) mod leases;
pub(crate) mod namespaces;
pub(crate) mod processes;
pub(crate) mod queues;
pub(crate) mod rate_limits;
pub(crate) mod schedules;
pub(crate) mod system;
pub(crate) mod tasks;
pub(crate) mod tokens;
pub(crate) mod workers;
pub(crate) mod workflow_runs;
pub(crate) mod workflows;
