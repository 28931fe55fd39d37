//! Operator actions (cancel, retry, run now, pause/resume, queue settings, schedule removal):
//! one code path each for the API, the dashboard and the CLI, and every one recorded in the
//! audit log (who, when, what).

use crate::Engine;
use docket_core::patch::{PatchError, TaskPatch};
use docket_core::{QueueSettings, QueueStats, Task};

/// The patch rule's refusal as the store hands it back (the rule runs under the store's lock).
fn patch_error(e: PatchError) -> docket_store::StoreError {
    use docket_store::StoreError;
    match e {
        PatchError::Invalid(m) => StoreError::Invalid(m),
        PatchError::State(m) => StoreError::InvalidState(m),
        PatchError::Version(m) => StoreError::PreconditionFailed(m),
        PatchError::LeaseLost => StoreError::LeaseLost,
    }
}
use crate::EngineError;
use serde_json::{json, Value};

/// What can be done to a task by hand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

impl Engine {
    /// Writes an audit entry; a failure to write it is logged, not returned (the action
    /// itself happened).
    pub async fn audit(&self, actor: &str, action: &str, target: &str, detail: Option<Value>) {
        if let Err(e) = self
            .store
            .audit_add(docket_store::AuditAddParams {
                actor,
                action,
                target,
                detail,
                now: self.clock.now(),
            })
            .await
        {
            tracing::warn!(error = %e, actor, action, target, "recording an action in the audit log failed");
        }
    }

    /// Records that `actor` created or revoked (`action`) the token `name`: `token.create`,
    /// `token.revoke` on `token:<name>`; never the token itself.
    pub async fn token_audit(&self, actor: &str, action: &str, name: &str) {
        self.audit(
            actor,
            &format!("token.{action}"),
            &format!("token:{name}"),
            None,
        )
        .await;
    }

    /// Applies `action` to task `id` for `actor` (audited as `task.<action>`).
    ///
    /// # Errors
    /// [`EngineError::NotFound`], [`EngineError::InvalidState`] (e.g. cancelling a completed
    /// task), store failure.
    pub async fn task_act(
        &self,
        actor: &str,
        id: i64,
        action: TaskAction,
    ) -> Result<Task, EngineError> {
        let now = self.clock.now();
        let t = match action {
            TaskAction::Cancel => {
                self.store
                    .task_cancel(docket_store::TaskCancelParams { id, now })
                    .await?
            }
            TaskAction::Retry => {
                self.store
                    .task_retry(docket_store::TaskRetryParams { id, now })
                    .await?
            }
            TaskAction::RunNow => {
                self.store
                    .task_run_now(docket_store::TaskRunNowParams { id, now })
                    .await?
            }
        };
        if action != TaskAction::Cancel {
            self.waker.wake(&t.queue);
        } else if t.batch_id.is_some() {
            self.tasks_finished([id]);
            self.batches_poke();
        }
        self.waker.changed();
        self.audit(
            actor,
            &format!("task.{}", action.as_str()),
            &format!("task:{id}"),
            Some(json!({"queue": t.queue, "kind": t.kind, "state": t.state})),
        )
        .await;
        Ok(t)
    }

    /// Updates a task that is not finished (`PATCH /v1/tasks/{id}`, `docket task set`) by
    /// [`TaskPatch::apply`] on its locked row; `if_match` is the version the caller read
    /// (`If-Match`). Audited as `task.update` when not done under a lease (a worker's own
    /// progress/context writes are not operator actions).
    ///
    /// # Errors
    /// [`EngineError::Invalid`] (a bad field), [`EngineError::InvalidState`] (finished; running
    /// without its lease), [`EngineError::PreconditionFailed`] (the version moved on),
    /// [`EngineError::LeaseLost`], [`EngineError::NotFound`], store failure.
    pub async fn task_update(
        &self,
        actor: &str,
        id: i64,
        patch: TaskPatch,
        if_match: Option<String>,
    ) -> Result<Task, EngineError> {
        patch.validate().map_err(patch_error)?;
        let now = self.clock.now();
        let by_lease = patch.lease.is_some();
        let detail = serde_json::to_value(TaskPatch {
            lease: None,
            payload: None,
            progress: None,
            ..patch.clone()
        })
        .ok();
        let t = self
            .store
            .task_update(docket_store::TaskUpdateParams {
                id,
                rule: std::sync::Arc::new(move |t, token| {
                    patch
                        .apply(t, token, if_match.as_deref(), now)
                        .map_err(patch_error)
                }),
            })
            .await?;
        self.waker.changed();
        if !by_lease {
            self.audit(actor, "task.update", &format!("task:{id}"), detail)
                .await;
        }
        Ok(t)
    }

    /// Pauses or resumes `queue` for `actor` (audited as `queue.pause` / `queue.resume`).
    ///
    /// # Errors
    /// Store failure.
    pub async fn queue_set_paused(
        &self,
        actor: &str,
        queue: &str,
        paused: bool,
    ) -> Result<QueueStats, EngineError> {
        let q = self
            .store
            .queue_set_paused(docket_store::QueueSetPausedParams {
                name: queue,
                paused,
                now: self.clock.now(),
            })
            .await?;
        if !paused {
            self.waker.wake(queue);
        }
        self.waker.changed();
        let action = if paused {
            "queue.pause"
        } else {
            "queue.resume"
        };
        self.audit(actor, action, &format!("queue:{queue}"), None)
            .await;
        Ok(q)
    }

    /// Replaces `queue`'s settings for `actor` (audited as `queue.settings`).
    ///
    /// # Errors
    /// Store failure.
    pub async fn queue_put(
        &self,
        actor: &str,
        queue: &str,
        settings: &QueueSettings,
    ) -> Result<QueueStats, EngineError> {
        let q = self
            .store
            .queue_put(docket_store::QueuePutParams {
                name: queue,
                settings,
                now: self.clock.now(),
            })
            .await?;
        // A raised limit or an unpause can make tasks claimable at once.
        self.waker.wake(queue);
        self.waker.changed();
        self.audit(
            actor,
            "queue.settings",
            &format!("queue:{queue}"),
            serde_json::to_value(settings).ok(),
        )
        .await;
        Ok(q)
    }

    /// Removes schedule `name` for `actor` (audited as `schedule.remove`); its tasks stay.
    /// False when there was none.
    ///
    /// # Errors
    /// Store failure.
    pub async fn schedule_delete(&self, actor: &str, name: &str) -> Result<bool, EngineError> {
        let gone = self.store.schedule_delete(name).await?;
        if gone {
            self.schedule_changed(actor, "remove", name).await;
        }
        Ok(gone)
    }

    /// Records a schedule change (create/replace, pause, resume, remove) made by `actor`.
    pub async fn schedule_changed(&self, actor: &str, action: &str, name: &str) {
        self.waker.changed();
        self.audit(
            actor,
            &format!("schedule.{action}"),
            &format!("schedule:{name}"),
            None,
        )
        .await;
    }

    /// Drains node `name` (node-daemons' "move tasks to another node"): it claims nothing from
    /// now on (at once when it is this node, at its next heartbeat otherwise), its running tasks
    /// finish, and its waiting tasks pinned to it move to node `to` (`None`: to any node).
    /// `drain: false` ends the drain. Audited as `node.drain` / `node.resume`. `None` when no
    /// node has that name.
    ///
    /// # Errors
    /// Store failure.
    pub async fn node_drain(
        &self,
        actor: &str,
        name: &str,
        drain: bool,
        to: Option<&str>,
    ) -> Result<Option<u64>, EngineError> {
        let moved = self
            .store
            .node_drain(docket_store::NodeDrainParams {
                name,
                drain,
                to,
                now: self.clock.now(),
            })
            .await?;
        if let Some(n) = moved {
            if name == self.config.node {
                self.set_draining(drain);
            }
            let action = if drain { "node.drain" } else { "node.resume" };
            let detail = serde_json::json!({"to": to, "moved": n});
            self.audit(actor, action, name, Some(detail)).await;
        }
        Ok(moved)
    }
}
