//! Bulk actions over a filter ([`docket_core::bulk`]): counted for the confirmation, asked as
//! a task in queue `docket:bulk`, and worked here in batches by whichever node claims it.
//!
//! Every node runs [`run`]; the task's lease makes one node at a time work a bulk action, and
//! its progress (the cursor) is written after every batch, so a node that dies leaves it to the
//! next after the lease runs out — the rescuer's ordinary path.

use crate::{Engine, EngineError};
use docket_core::bulk::{
    BulkAction, BulkError, BulkFilter, BulkJob, BulkProgress, BulkRequest, COUNT_CAP, KIND, QUEUE,
};
use docket_core::{NewTask, Task, TaskState};
use docket_store::{StoreError, TaskListParams};
use serde_json::json;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A bulk action's lease, renewed after every batch.
const LEASE: Duration = Duration::from_secs(60);
/// Longest one attempt may run (its deadline): a million tasks take well under it.
const ATTEMPT: Duration = Duration::from_secs(24 * 3600);
/// Tasks of a batch changed at once, each in its own transaction. One: on PostgreSQL at 10M
/// tasks (100,000 per bulk action, release build) eight at once took a bulk retry from 268 s
/// to 163 s but a bulk cancel from 114 s to 330 s (each commit sends a NOTIFY, which commits
/// take in turn); a statement per batch is what would make both fast.
const CONCURRENT: usize = 1;
/// How often an idle node looks for a bulk action asked on a node that could not wake it.
const POLL: Duration = Duration::from_secs(10);

fn refused(e: BulkError) -> EngineError {
    EngineError::Invalid(e.to_string())
}

impl Engine {
    /// How many tasks `action` would change over `filter`, and whether more matched than
    /// counted ([`COUNT_CAP`]): from the kept counts when the filter is by queue and state
    /// only (exact at any size), else counted up to the cap. Bulk actions' own tasks are left
    /// out.
    ///
    /// # Errors
    /// [`EngineError::Invalid`] for a bad filter or one naming no state the action changes;
    /// store failure.
    pub async fn bulk_count(
        &self,
        filter: &BulkFilter,
        action: BulkAction,
    ) -> Result<(i64, bool), EngineError> {
        let states = filter.states_for(action).map_err(refused)?;
        if filter.queue.as_deref() == Some(QUEUE) {
            return Ok((0, false));
        }
        if filter.counted_by_state() {
            let queues = match &filter.queue {
                Some(q) => vec![self.store.queue_get(q).await?],
                None => self.store.queue_list().await?,
            };
            let n = queues
                .iter()
                .filter(|q| q.name != QUEUE)
                .flat_map(|q| states.iter().map(|s| q.counts.get(s).copied().unwrap_or(0)))
                .sum();
            return Ok((n, false));
        }
        let n = self
            .store
            .task_count(TaskListParams {
                limit: COUNT_CAP + 1,
                ..filter.page(&states, 0, i64::MAX)
            })
            .await?;
        Ok((n.min(COUNT_CAP), n > COUNT_CAP))
    }

    /// Asks for `action` over every task `filter` matches now (tasks enqueued later are not
    /// touched): counts them, enqueues the bulk action's task and records `tasks.bulk` in the
    /// audit log for `actor`. Some node's [`run`] then works it; poll [`Engine::bulk_get`].
    ///
    /// # Errors
    /// [`EngineError::Invalid`] as [`Engine::bulk_count`]; store failure.
    pub async fn bulk_start(
        &self,
        actor: &str,
        filter: BulkFilter,
        action: BulkAction,
    ) -> Result<BulkJob, EngineError> {
        let (total, more) = self.bulk_count(&filter, action).await?;
        let max_id = self
            .store
            .task_list(TaskListParams {
                descending: true,
                limit: 1,
                ..Default::default()
            })
            .await?
            .first()
            .map_or(0, |t| t.id);
        let req = BulkRequest {
            action,
            filter,
            max_id,
            total,
            more,
            actor: actor.to_string(),
        };
        let payload = serde_json::to_value(&req)
            .map_err(|e| EngineError::Invalid(format!("bulk request: {e}")))?;
        let mut t = NewTask::new(KIND, payload);
        t.queue = Some(QUEUE.to_string());
        t.timeout = Some(ATTEMPT);
        t.max_attempts = Some(25);
        let now = self.clock.now();
        // Resolved here, not by resolve_all: that refuses this queue to everyone else.
        let resolved = t
            .resolve(None, &self.config.defaults, now)
            .map_err(|message| EngineError::InvalidTask { index: 0, message })?;
        let out = self
            .store
            .task_insert_many(docket_store::TaskInsertManyParams {
                tasks: vec![resolved],
                now,
            })
            .await?;
        self.inserted(&out);
        let task = out
            .into_iter()
            .next()
            .ok_or_else(|| EngineError::Invalid("the bulk action was not stored".into()))?;
        self.audit(
            actor,
            "tasks.bulk",
            &format!("task:{}", task.id),
            Some(json!({"action": action.as_str(), "filter": req.filter, "total": total, "more": more})),
        )
        .await;
        BulkJob::of(&task)
            .ok_or_else(|| EngineError::Invalid("the bulk action was stored unreadable".into()))
    }

    /// Bulk action `id` as it stands; `None` when no task has that id or it is not a bulk
    /// action.
    ///
    /// # Errors
    /// Store failure.
    pub async fn bulk_get(&self, id: i64) -> Result<Option<BulkJob>, EngineError> {
        Ok(self
            .store
            .task_get(id)
            .await?
            .as_ref()
            .and_then(BulkJob::of))
    }

    /// Applies `action` to `tasks` (one batch), each by the single-task action's own rule
    /// under its lock; returns how many changed. A task that moved on meanwhile is skipped.
    async fn bulk_apply(&self, action: BulkAction, tasks: &[Task]) -> Result<i64, EngineError> {
        let ids: Vec<i64> = tasks
            .iter()
            .filter(|t| t.queue != QUEUE)
            .map(|t| t.id)
            .collect();
        if action == BulkAction::Delete {
            return Ok(self.store.task_delete(&ids).await? as i64);
        }
        use futures::StreamExt;
        let mut changed = 0;
        let mut queues = std::collections::BTreeSet::new();
        let mut finished = vec![];
        // Each task in its own transaction, by the single-task rule under its lock
        // ([`CONCURRENT`] at once), at its own `now`: a task finished with the batch's start
        // as its `finished_at` committed seconds later (500 one by one on MariaDB take about
        // 4 s), behind the kept counts' `counted_to` (`docket_core::counts::LAG`, 2 s), and
        // was never counted until the hourly recount.
        let mut each = futures::stream::iter(ids.iter().copied())
            .map(|id| async move {
                let now = self.clock.now();
                let r = match action {
                    BulkAction::Cancel => {
                        self.store
                            .task_cancel(docket_store::TaskCancelParams { id, now })
                            .await
                    }
                    BulkAction::Retry => {
                        self.store
                            .task_retry(docket_store::TaskRetryParams { id, now })
                            .await
                    }
                    // Delete went above, all at once.
                    BulkAction::RunNow | BulkAction::Delete => {
                        self.store
                            .task_run_now(docket_store::TaskRunNowParams { id, now })
                            .await
                    }
                };
                (id, r)
            })
            .buffer_unordered(CONCURRENT);
        while let Some((id, r)) = each.next().await {
            match r {
                Ok(t) => {
                    changed += 1;
                    if t.state == TaskState::Cancelled {
                        finished.push(id);
                    } else if t.state == TaskState::Available {
                        queues.insert(t.queue);
                    }
                }
                Err(
                    StoreError::NotFound(_) | StoreError::InvalidState(_) | StoreError::Conflict(_),
                ) => {}
                Err(e) => return Err(e.into()),
            }
        }
        for q in &queues {
            self.waker.wake(q);
        }
        if !finished.is_empty() {
            self.tasks_finished(finished);
            self.batches_poke();
        }
        self.waker.changed();
        Ok(changed)
    }

    /// Works one claimed bulk action from its cursor to its end, writing its progress after
    /// each batch. Returns when done, when its lease is lost or it was cancelled, or when
    /// `cancel` fires (it then fails the attempt to be retried at once, by another node).
    async fn bulk_work(&self, task: Task, cancel: &CancellationToken) {
        let Some(lease) = task.lease.clone() else {
            return;
        };
        let token = lease.token;
        let fail = |error: String, permanent: bool, retry_in: Option<Duration>| {
            let token = token.clone();
            async move {
                let f = docket_store::TaskFail {
                    id: task.id,
                    token,
                    error,
                    retry_in,
                    permanent,
                };
                if let Err(e) = self.fail_many(&[f], None).await {
                    tracing::warn!(error = %e, task = task.id, "failing a bulk action failed");
                }
            }
        };
        let req: BulkRequest = match serde_json::from_value(task.payload.clone()) {
            Ok(r) => r,
            Err(e) => return fail(format!("not a bulk request: {e}"), true, None).await,
        };
        let states = match req.filter.states_for(req.action) {
            Ok(s) => s,
            Err(e) => return fail(e.to_string(), true, None).await,
        };
        let mut progress: BulkProgress = task
            .progress
            .clone()
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default();
        loop {
            if cancel.is_cancelled() {
                return fail("node shutting down".into(), false, Some(Duration::ZERO)).await;
            }
            let page = req.filter.page(&states, progress.after, req.max_id);
            let step = async {
                let tasks = self.store.task_list(page).await?;
                let changed = self.bulk_apply(req.action, &tasks).await?;
                let ids: Vec<i64> = tasks.iter().map(|t| t.id).collect();
                Ok::<_, EngineError>((ids, changed))
            };
            let (ids, changed) = match step.await {
                Ok(x) => x,
                Err(e) => {
                    tracing::warn!(error = %e, task = task.id, "a bulk action's batch failed; it goes on from its cursor after the backoff");
                    return fail(e.to_string(), false, None).await;
                }
            };
            let more = progress.advance(&ids, changed);
            let value = serde_json::to_value(&progress).unwrap_or_default();
            if !more {
                let done = docket_store::TaskComplete {
                    id: task.id,
                    token: token.clone(),
                    result: value,
                    next: None,
                };
                match self.complete_many(&[done]).await {
                    Ok(_) => self.audit(
                        &req.actor,
                        "tasks.bulk.done",
                        &format!("task:{}", task.id),
                        Some(json!({"action": req.action.as_str(), "done": progress.done, "skipped": progress.skipped})),
                    )
                    .await,
                    Err(e) => tracing::warn!(error = %e, task = task.id, "completing a bulk action failed; it is rescued and finishes again"),
                }
                return;
            }
            if let Err(e) = self
                .heartbeat(task.id, token.clone(), Some(value), Some(LEASE))
                .await
            {
                // Lost, cancelled or timed out: whoever holds it now, or nobody, decides.
                tracing::info!(error = %e, task = task.id, "a bulk action stopped");
                return;
            }
        }
    }
}

/// Works bulk actions on this node until `cancel` fires: claims one at a time from
/// [`QUEUE`] (woken by a local ask, else every [`POLL`]). A failed claim is logged and tried
/// again after the poll; the loop never ends on an error.
pub async fn run(engine: Engine, cancel: CancellationToken) {
    let claim = crate::Claim {
        queue: QUEUE.into(),
        worker: format!("{}/bulk", engine.config.node),
        limit: 1,
        lease: Some(LEASE),
        wait: POLL,
        poll: Some(POLL),
        ..Default::default()
    };
    while !cancel.is_cancelled() {
        // A shutdown stops a claim or a bulk action in the middle (a batch's changes are each
        // their own transaction; the lease runs out and another node goes on from the cursor):
        // with the database gone, a store call would wait for the pool's timeout and hold the
        // node up (CLI test serve_stops_promptly_when_the_database_is_gone).
        let claimed = tokio::select! {
            _ = cancel.cancelled() => return,
            r = engine.claim(&claim, &cancel) => r,
        };
        match claimed {
            Ok(tasks) => {
                for t in tasks {
                    tokio::select! {
                        _ = cancel.cancelled() => return,
                        _ = engine.bulk_work(t, &cancel) => {}
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "claiming bulk actions failed");
                tokio::select! {
                    _ = tokio::time::sleep(POLL) => {}
                    _ = cancel.cancelled() => {}
                }
            }
        }
    }
}
