//! The API's handlers, a file per noun; `crate::router` wires them to paths and
//! `crate::openapi` documents them.

pub(crate) mod events;
pub(crate) mod leases;
pub(crate) mod namespaces;
pub(crate) mod processes;
pub(crate) mod queues;
pub(crate) mod schedules;
pub(crate) mod system;
pub(crate) mod tasks;
pub(crate) mod tokens;
pub(crate) mod workers;
