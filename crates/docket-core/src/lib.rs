//! docket's pure domain: tasks and their states, retry/backoff maths, durations and the clock.
//!
//! Nothing here does I/O. The store applies what this crate decides (for example
//! [`backoff::Backoff::delay`] picks when a failed attempt runs again), so the rules are unit
//! tested without a database and without sleeping (see [`clock::ManualClock`]).

pub mod api;
pub mod auth;
pub mod backoff;
pub mod batch;
pub mod bulk;
pub mod clock;
pub mod counts;
pub mod dead_letter;
pub mod debounce;
pub mod durable;
pub mod duration;
pub mod history;
pub mod labels;
pub mod lease;
pub mod name;
pub mod patch;
pub mod process;
pub mod queue;
pub mod rate_limit;
pub mod run;
pub mod schedule;
pub mod sink;
pub mod sqlfile;
pub mod state;
pub mod task;
pub mod time;
pub mod trace;
pub mod workflow;

pub use backoff::{Backoff, BackoffKind};
pub use clock::{Clock, ManualClock, SystemClock};
pub use queue::{QueueSettings, QueueStats};
pub use schedule::{Schedule, ScheduleSpec};
pub use state::TaskState;
pub use task::{
    FailDecision, Lease, NewTask, ProcessRef, Task, TaskDefaults, TaskError, DEFAULT_MAX_ATTEMPTS,
    DEFAULT_QUEUE, DEFAULT_TIMEOUT_MS,
};

/// Milliseconds-since-epoch helpers shared by both store backends and the API.
pub type Timestamp = chrono::DateTime<chrono::Utc>;
