//! Decoding of stored values shared by the backends: a value that does not decode is an error
//! naming the row and column ([`StoreError::Corrupt`]), never a silent default — an `errors`
//! list that does not parse is not an empty list, a bad time is not 1970.

use crate::{Result, StoreError};
use docket_core::process::ProcessStatus;
use docket_core::run::{StoredRun, TaskRun};
use docket_core::{Backoff, TaskError, TaskState};
use serde_json::Value;
use std::time::Duration;

fn corrupt(row: &str, col: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{row}: column {col}: {e}"))
}

/// A task's `state`.
pub(crate) fn state(row: &str, s: &str) -> Result<TaskState> {
    s.parse()
        .map_err(|e: docket_core::state::UnknownState| corrupt(row, "state", e))
}

/// A task's `errors` list.
pub(crate) fn errors(row: &str, v: Value) -> Result<Vec<TaskError>> {
    serde_json::from_value(v).map_err(|e| corrupt(row, "errors", e))
}

/// A task's run log (`runs`; NULL: none yet). `trace` is the task's trace id, from which each
/// entry's own trace id is derived.
pub(crate) fn runs(row: &str, v: Option<Value>, trace: Option<&str>) -> Result<Vec<TaskRun>> {
    let Some(v) = v else { return Ok(vec![]) };
    let stored: Vec<StoredRun> = serde_json::from_value(v).map_err(|e| corrupt(row, "runs", e))?;
    stored
        .into_iter()
        .map(|s| {
            s.into_run(trace)
                .ok_or_else(|| corrupt(row, "runs", "a time is out of range"))
        })
        .collect()
}

/// Completes a decoded task's run log: the attempt that completed a task is not stored (the
/// hot path writes no JSON for it) — its entry is the task's own columns (attempt, stage,
/// attempted_at, finished_at, worker, attempt_node), added here as the last entry.
pub(crate) fn last_run(t: &mut docket_core::Task) {
    if t.state != TaskState::Completed {
        return;
    }
    let Some(fin) = t.finished_at else { return };
    let run = StoredRun {
        attempt: t.attempt,
        stage: t.stage.clone(),
        started_us: t.attempted_at.map(|a| a.timestamp_micros()),
        finished_us: fin.timestamp_micros(),
        worker: t.worker.clone(),
        node: t.attempt_node.clone(),
        outcome: docket_core::run::RunOutcome::Completed,
        message: None,
    };
    if let Some(r) = run.into_run(t.trace_id.as_deref()) {
        t.runs.push(r);
        let keep = docket_core::run::RUN_LOG_KEEP as usize;
        if t.runs.len() > keep {
            t.runs.drain(..t.runs.len() - keep);
        }
    }
}

/// A task's `stages_done` (NULL: none).
pub(crate) fn stages(row: &str, v: Option<Value>) -> Result<Vec<Option<String>>> {
    v.map(|v| serde_json::from_value(v).map_err(|e| corrupt(row, "stages_done", e)))
        .transpose()
        .map(Option::unwrap_or_default)
}

/// A task's `backoff_kind`.
pub(crate) fn backoff_kind(row: &str, s: &str) -> Result<docket_core::BackoffKind> {
    s.parse()
        .map_err(|e: String| corrupt(row, "backoff_kind", e))
}

/// A queue's `backoff`.
pub(crate) fn backoff(row: &str, v: Option<Value>) -> Result<Option<Backoff>> {
    v.map(|b| serde_json::from_value(b).map_err(|e| corrupt(row, "backoff", e)))
        .transpose()
}

/// Milliseconds stored as a signed integer.
pub(crate) fn millis(row: &str, col: &str, v: i64) -> Result<Duration> {
    u64::try_from(v)
        .map(Duration::from_millis)
        .map_err(|_| corrupt(row, col, format!("negative duration {v} ms")))
}

/// Optional milliseconds.
pub(crate) fn millis_opt(row: &str, col: &str, v: Option<i64>) -> Result<Option<Duration>> {
    v.map(|v| millis(row, col, v)).transpose()
}

/// A process status column (`None` where the column may be NULL).
pub(crate) fn process_status(
    row: &str,
    col: &str,
    v: Option<&str>,
) -> Result<Option<ProcessStatus>> {
    v.map(|s| {
        ProcessStatus::parse(s).ok_or_else(|| corrupt(row, col, format!("unknown status {s:?}")))
    })
    .transpose()
}

/// A required process status.
pub(crate) fn process_status_req(row: &str, col: &str, v: Option<&str>) -> Result<ProcessStatus> {
    process_status(row, col, v)?.ok_or_else(|| corrupt(row, col, "NULL"))
}

/// Microseconds since the epoch (SQLite's time columns).
pub(crate) fn micros(row: &str, col: &str, v: i64) -> Result<docket_core::Timestamp> {
    chrono::DateTime::from_timestamp_micros(v)
        .ok_or_else(|| corrupt(row, col, format!("time {v} µs is out of range")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bad_values_are_errors_naming_the_row() {
        let e = errors("task 7", json!({"not": "a list"}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("task 7") && e.contains("errors"), "{e}");
        assert!(matches!(
            state("task 7", "limbo"),
            Err(StoreError::Corrupt(_))
        ));
        assert!(backoff("queue q", Some(json!("fast"))).is_err());
        assert_eq!(backoff("queue q", None).unwrap(), None);
        assert!(millis("task 7", "timeout_ms", -1).is_err());
        assert_eq!(
            millis("task 7", "timeout_ms", 1500).unwrap(),
            Duration::from_millis(1500)
        );
        assert!(micros("task 7", "run_at", i64::MAX).is_err());
        assert!(process_status_req("process a/b", "status", None).is_err());
        assert!(process_status("process a/b", "status", Some("zombie")).is_err());
        assert_eq!(errors("task 1", json!([])).unwrap(), vec![]);
    }
}
