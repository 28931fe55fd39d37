//! The run log (asyncflow's schedule_log): one entry per finished attempt — successful ones
//! too — with its stage, start, end, worker, node, trace id, outcome and message. A task keeps
//! the last [`RUN_LOG_KEEP`] entries and counts them all (`Task::run_count`).
//!
//! Stored form ([`StoredRun`]): times as integer microseconds since the epoch, so the three SQL
//! dialects write the same JSON whether the entry is built in SQL (a completion) or here (a
//! failure); the API form ([`TaskRun`]) adds the duration and the attempt's trace id.

use crate::Timestamp;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// How many run log entries a task keeps (the oldest is dropped when a new one comes).
pub const RUN_LOG_KEEP: i32 = 10;

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    /// The worker completed it (the task, or its stage).
    Completed,
    /// The worker failed it (retried per backoff or discarded).
    Failed,
    /// It ran past the task's timeout.
    Timeout,
    /// A cancel requested while it ran stopped it.
    Cancelled,
    /// Its lease ran out (the worker died or stopped heartbeating) and it was rescued.
    Lost,
}

impl RunOutcome {
    /// The stored word.
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Completed => "completed",
            RunOutcome::Failed => "failed",
            RunOutcome::Timeout => "timeout",
            RunOutcome::Cancelled => "cancelled",
            RunOutcome::Lost => "lost",
        }
    }
}

/// One run log entry as the database keeps it (JSON in `docket_tasks.runs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredRun {
    /// The attempt (1-based, counted within its stage).
    pub attempt: i32,
    /// The stage it ran at.
    #[serde(default)]
    pub stage: Option<String>,
    /// Start, µs since the epoch.
    #[serde(default)]
    pub started_us: Option<i64>,
    /// End, µs since the epoch.
    pub finished_us: i64,
    /// The worker that held the lease.
    #[serde(default)]
    pub worker: Option<String>,
    /// The node it was claimed through.
    #[serde(default)]
    pub node: Option<String>,
    /// How it ended.
    pub outcome: RunOutcome,
    /// The error message (failures), else none.
    #[serde(default)]
    pub message: Option<String>,
}

/// One run log entry: JSON shape of `Task.runs[]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TaskRun {
    /// The attempt (1-based, counted within its stage).
    pub attempt: i32,
    /// The stage it ran at (`null` for single-stage tasks).
    pub stage: Option<String>,
    /// When it started.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub started_at: Option<Timestamp>,
    /// When it ended.
    #[schema(value_type = String, format = DateTime)]
    pub finished_at: Timestamp,
    /// How long it ran, ms (asyncflow's cost).
    pub duration_ms: Option<i64>,
    /// The worker that held the lease.
    pub worker: Option<String>,
    /// The node it was claimed through.
    pub node: Option<String>,
    /// This attempt's own trace id (32 hex digits; see [`attempt_trace_id`]).
    pub trace_id: Option<String>,
    /// How it ended.
    pub outcome: RunOutcome,
    /// The error message of a failed attempt.
    pub message: Option<String>,
}

impl StoredRun {
    /// The API form; `task_trace` is the task's trace id. `None` when a time is out of range.
    pub fn into_run(self, task_trace: Option<&str>) -> Option<TaskRun> {
        let finished_at = chrono::DateTime::from_timestamp_micros(self.finished_us)?;
        let started_at = match self.started_us {
            Some(s) => Some(chrono::DateTime::from_timestamp_micros(s)?),
            None => None,
        };
        Some(TaskRun {
            attempt: self.attempt,
            duration_ms: started_at
                .map(|s| crate::duration::to_ms(crate::time::since(finished_at, s))),
            trace_id: task_trace.map(|t| attempt_trace_id(t, self.stage.as_deref(), self.attempt)),
            stage: self.stage,
            started_at,
            finished_at,
            worker: self.worker,
            node: self.node,
            outcome: self.outcome,
            message: self.message,
        })
    }
}

/// The trace id of one attempt of a task: derived from the task's trace id, its stage and the
/// attempt number (SHA-256, first 16 bytes as 32 hex digits), so a worker, its logs and the run
/// log all name the same id without storing it, and every attempt has its own.
pub fn attempt_trace_id(task_trace: &str, stage: Option<&str>, attempt: i32) -> String {
    let mut h = Sha256::new();
    h.update(task_trace.as_bytes());
    h.update([0]);
    h.update(stage.unwrap_or("").as_bytes());
    h.update([0]);
    h.update(attempt.to_be_bytes());
    h.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempt_trace_ids_differ_by_attempt_and_stage_and_are_stable() {
        let t = "0af7651916cd43dd8448eb211c80319c";
        let a1 = attempt_trace_id(t, None, 1);
        assert_eq!(a1.len(), 32);
        assert!(a1.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(a1, attempt_trace_id(t, None, 1));
        assert_ne!(a1, attempt_trace_id(t, None, 2));
        assert_ne!(a1, attempt_trace_id(t, Some("ship"), 1));
        assert_ne!(a1, t);
    }

    #[test]
    fn stored_run_decodes_with_duration() {
        let s: StoredRun = serde_json::from_value(serde_json::json!({
            "attempt": 2, "stage": "ship", "started_us": 1_000_000, "finished_us": 3_500_000,
            "worker": "w", "node": "n1", "outcome": "failed", "message": "boom"
        }))
        .unwrap();
        let r = s
            .into_run(Some("0af7651916cd43dd8448eb211c80319c"))
            .unwrap();
        assert_eq!(r.duration_ms, Some(2500));
        assert_eq!(r.outcome, RunOutcome::Failed);
        assert_eq!(r.trace_id.unwrap().len(), 32);
        let bad = StoredRun {
            attempt: 1,
            stage: None,
            started_us: None,
            finished_us: i64::MAX,
            worker: None,
            node: None,
            outcome: RunOutcome::Completed,
            message: None,
        };
        assert!(bad.into_run(None).is_none());
    }
}
