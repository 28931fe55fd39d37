//! Operator actions shared by the API and the dashboard: one code path each, and every one
//! is recorded in the audit log (who, when, what).

use crate::error::ApiError;
use crate::AppState;
use axum::http::HeaderMap;
use docket_core::{QueueStats, Task};
use serde_json::{json, Value};

/// Who acts: the `X-Docket-Actor` header (the CLI sends `cli:$USER`), else `default`.
pub fn actor(headers: &HeaderMap, default: &str) -> String {
    headers
        .get("x-docket-actor")
        .and_then(|v| v.to_str().ok())
        .map(|s| s.chars().take(200).collect::<String>())
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| default.to_string())
}

async fn record(s: &AppState, actor: &str, action: &str, target: &str, detail: Option<Value>) {
    if let Err(e) = s
        .engine
        .store
        .audit_add(actor, action, target, detail, s.engine.clock.now())
        .await
    {
        tracing::warn!(error = %e, actor, action, target, "recording an action in the audit log failed");
    }
}

/// What can be done to a task by hand.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TaskAction {
    /// Cancel a task that is not finished.
    Cancel,
    /// Retry a finished task.
    Retry,
    /// Make a scheduled or retryable task available now.
    RunNow,
}

impl TaskAction {
    /// From the URL word (`cancel`, `retry`, `run-now`).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "cancel" => Some(TaskAction::Cancel),
            "retry" => Some(TaskAction::Retry),
            "run-now" => Some(TaskAction::RunNow),
            _ => None,
        }
    }

    /// The URL word.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskAction::Cancel => "cancel",
            TaskAction::Retry => "retry",
            TaskAction::RunNow => "run-now",
        }
    }
}

/// Applies `action` to task `id` for `actor`.
///
/// # Errors
/// `not_found`, `invalid_state` (e.g. cancelling a completed task), `unavailable`.
pub async fn task(
    s: &AppState,
    actor: &str,
    id: i64,
    action: TaskAction,
) -> Result<Task, ApiError> {
    let now = s.engine.clock.now();
    let t = match action {
        TaskAction::Cancel => s.engine.store.task_cancel(id, now).await?,
        TaskAction::Retry => s.engine.store.task_retry(id, now).await?,
        TaskAction::RunNow => s.engine.store.task_run_now(id, now).await?,
    };
    if action != TaskAction::Cancel {
        s.engine.waker.wake(&t.queue);
    }
    s.engine.waker.changed();
    record(
        s,
        actor,
        &format!("task.{}", action.as_str()),
        &format!("task:{id}"),
        Some(json!({"queue": t.queue, "kind": t.kind, "state": t.state})),
    )
    .await;
    Ok(t)
}

/// Pauses or resumes `queue` for `actor`.
///
/// # Errors
/// `invalid_request` for a bad name, `unavailable`.
pub async fn queue_paused(
    s: &AppState,
    actor: &str,
    queue: &str,
    paused: bool,
) -> Result<QueueStats, ApiError> {
    crate::check_name("queue", queue)?;
    let q = s
        .engine
        .store
        .queue_set_paused(queue, paused, s.engine.clock.now())
        .await?;
    if !paused {
        s.engine.waker.wake(queue);
    }
    s.engine.waker.changed();
    let action = if paused {
        "queue.pause"
    } else {
        "queue.resume"
    };
    record(s, actor, action, &format!("queue:{queue}"), None).await;
    Ok(q)
}

/// simple-repair of a process in error, for `actor`.
///
/// # Errors
/// `not_found`, `invalid_state` when it is not in error.
pub async fn process_repair(s: &AppState, actor: &str, ns: &str, id: &str) -> Result<(), ApiError> {
    s.processes.simple_repair(ns, id).await?;
    s.engine.waker.changed();
    record(
        s,
        actor,
        "process.simple_repair",
        &format!("process:{ns}/{id}"),
        None,
    )
    .await;
    Ok(())
}

/// Records a schedule change (create/replace, pause, resume, remove) made by `actor`.
pub async fn schedule_changed(s: &AppState, actor: &str, action: &str, name: &str) {
    s.engine.waker.changed();
    record(
        s,
        actor,
        &format!("schedule.{action}"),
        &format!("schedule:{name}"),
        None,
    )
    .await;
}

/// Records a token created or revoked (`token.create`, `token.revoke`); never the token.
pub async fn token_changed(s: &AppState, actor: &str, action: &str, name: &str) {
    record(
        s,
        actor,
        &format!("token.{action}"),
        &format!("token:{name}"),
        None,
    )
    .await;
}
