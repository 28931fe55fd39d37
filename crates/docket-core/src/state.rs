//! Task states and how they map to the words of the systems docket replaces.
//!
//! | docket      | node-daemons (003) | pg_task (004) | progressor (001) | asyncflow (002) |
//! |-------------|--------------------|---------------|------------------|-----------------|
//! | `scheduled` | pending (start_at in the future) | PLAN (plan in the future) | waiting | 等待中 (waiting) |
//! | `available` | pending            | PLAN          | waiting          | 等待中 |
//! | `running`   | working            | TAKE / WORK   | running          | 执行中 (running) |
//! | `retryable` | failure (attempts left) | —        | waiting (retry)  | 等待中 (retry) |
//! | `completed` | done               | DONE          | finished         | 成功 (success) |
//! | `discarded` | failure (attempts spent), deleted when finish_at passed | FAIL / GONE | error | 失败 (failed) |
//! | `cancelled` | —                  | STOP          | cancelled        | — |

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The state of a task. Shape: a lower-case string in JSON and in the database.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    PartialOrd,
    Ord,
    utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum TaskState {
    /// `run_at` is in the future; the scheduler makes it `available` when it comes due.
    Scheduled,
    /// May be claimed now.
    Available,
    /// Claimed by a worker under a lease.
    Running,
    /// An attempt failed; it becomes `available` again at `run_at` (now + backoff).
    Retryable,
    /// Finished successfully.
    Completed,
    /// Finished unsuccessfully: attempts spent, failed permanently, or expired.
    Discarded,
    /// Cancelled by hand; never started again unless retried by hand.
    Cancelled,
}

impl TaskState {
    /// Every state, in lifecycle order.
    pub const ALL: [TaskState; 7] = [
        TaskState::Scheduled,
        TaskState::Available,
        TaskState::Running,
        TaskState::Retryable,
        TaskState::Completed,
        TaskState::Discarded,
        TaskState::Cancelled,
    ];

    /// The lower-case name used in JSON and in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Scheduled => "scheduled",
            TaskState::Available => "available",
            TaskState::Running => "running",
            TaskState::Retryable => "retryable",
            TaskState::Completed => "completed",
            TaskState::Discarded => "discarded",
            TaskState::Cancelled => "cancelled",
        }
    }

    /// True for the three final states (completed, discarded, cancelled).
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Discarded | TaskState::Cancelled
        )
    }
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Error for an unknown state name.
#[derive(Debug, thiserror::Error)]
#[error("unknown task state {0:?} (expected one of scheduled, available, running, retryable, completed, discarded, cancelled)")]
pub struct UnknownState(pub String);

impl FromStr for TaskState {
    type Err = UnknownState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TaskState::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownState(s.to_string()))
    }
}

/// Parses a filter of states, `"running,retryable"`: the known names among the commas, in
/// order, duplicates dropped. `None` when the filter names no known state (the caller answers
/// an empty list: a filter with unknown values matches nothing).
pub fn parse_filter(s: &str) -> Option<Vec<TaskState>> {
    let mut out: Vec<TaskState> = vec![];
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Ok(st) = part.parse::<TaskState>() {
            if !out.contains(&st) {
                out.push(st);
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_filters() {
        assert_eq!(
            parse_filter("running, retryable,running,bogus"),
            Some(vec![TaskState::Running, TaskState::Retryable])
        );
        assert_eq!(parse_filter("bogus"), None);
        assert_eq!(parse_filter(""), None);
    }

    #[test]
    fn names_round_trip() {
        for st in TaskState::ALL {
            assert_eq!(st.as_str().parse::<TaskState>().unwrap(), st);
            assert_eq!(
                serde_json::to_string(&st).unwrap(),
                format!("\"{}\"", st.as_str())
            );
        }
        assert!("pending".parse::<TaskState>().is_err());
        assert!(TaskState::Cancelled.is_finished());
        assert!(!TaskState::Retryable.is_finished());
    }
}
