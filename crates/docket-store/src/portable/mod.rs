//! Store methods whose flow is the same on every backend, written once over [`Driver`]: the
//! backends differ only in their statements' text and in how a value is bound. A file per noun.

mod audit;
mod batches;
mod counts;
mod leases;
mod maintenance;
mod nodes;
mod notifications;
mod prelude;
mod processes;
mod queues;
mod runs;
mod schedules;
mod tasks;
mod tokens;

pub(crate) use counts::pruned_rows;
pub(crate) use maintenance::{promote_returning, prune_returning};
pub(crate) use processes::insert_each_event;
pub(crate) use tasks::insert_each;
