//! One file per CLI command; `main.rs` parses the command line and dispatches.

pub(crate) mod batch;
pub(crate) mod output;
pub(crate) mod queue;
pub(crate) mod rate_limit;
pub(crate) mod schedule;
pub(crate) mod serve;
pub(crate) mod status;
pub(crate) mod task;
pub(crate) mod token;
pub(crate) mod worker;
pub(crate) mod workflow;
pub(crate) mod workflow_run;
