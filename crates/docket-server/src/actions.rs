//! Operator actions shared by the API and the dashboard: one code path each, and every one
//! is recorded in the audit log (who, when, what).

use crate::error::ApiError;
use crate::state::AppState;
use axum::http::HeaderMap;
use docket_core::{QueueStats, Task};

/// Who acts: the `X-Docket-Actor` header (the CLI sends `cli:$USER`), else `default`.
pub fn actor(headers: &HeaderMap, default: &str) -> String {
    headers
        .get("x-docket-actor")
        .and_then(|v| v.to_str().ok())
        .map(|s| s.chars().take(200).collect::<String>())
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| default.to_string())
}

pub use docket_engine::actions::TaskAction;

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
    Ok(s.engine.task_act(actor, id, action).await?)
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
    crate::extract::check_name("queue", queue)?;
    Ok(s.engine.queue_set_paused(actor, queue, paused).await?)
}

/// simple-repair of a process in error, for `actor`.
///
/// # Errors
/// `not_found`, `invalid_state` when it is not in error.
pub async fn process_repair(s: &AppState, actor: &str, ns: &str, id: &str) -> Result<(), ApiError> {
    s.processes.simple_repair(ns, id).await?;
    s.engine.waker.changed();
    s.engine
        .audit(
            actor,
            "process.simple_repair",
            &format!("process:{ns}/{id}"),
            None,
        )
        .await;
    Ok(())
}

/// Records a schedule change (create/replace, pause, resume) made by `actor`.
pub async fn schedule_changed(s: &AppState, actor: &str, action: &str, name: &str) {
    s.engine.schedule_changed(actor, action, name).await;
}

/// Records a token created or revoked (`token.create`, `token.revoke`); never the token.
pub async fn token_changed(s: &AppState, actor: &str, action: &str, name: &str) {
    s.engine.token_audit(actor, action, name).await;
}
