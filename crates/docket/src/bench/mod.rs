//! `docket bench`: enqueue N no-op tasks, work them with C workers through the real
//! claim/complete path, then measure pickup latency at a steady enqueue rate.
//! `docket bench peer …` implements the contract of `shared/bench/peers` (see
//! bench/contender/bench.sh).

mod args;
mod churn;
mod latency;
mod peers;
mod pg_task;
mod phases;
mod run;
mod sql;

pub use args::BenchArgs;
pub use run::run;
