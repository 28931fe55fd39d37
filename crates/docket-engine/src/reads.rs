//! What the edges (HTTP API, dashboard, CLI) read and change outside enqueue/claim/finish: the
//! engine is the only owner of the store, so every such call goes through here (and a
//! heartbeat over HTTP counts in the same metrics as one of an in-process worker).

use crate::{Engine, EngineError};
use docket_core::api::{
    AuditEntry, NodeRecord, PoolStats, QueueOldest, TaskListParams, Throughput,
};
use docket_core::process::Notification;
use docket_core::{QueueSettings, QueueStats, Schedule, Task, Timestamp};
use docket_store::TaskHeartbeatParams;

impl Engine {
    /// One task.
    ///
    /// # Errors
    /// Store failure.
    pub async fn task_get(&self, id: i64) -> Result<Option<Task>, EngineError> {
        Ok(self.store.task_get(id).await?)
    }

    /// Tasks by filter (see [`TaskListParams`]).
    ///
    /// # Errors
    /// Store failure.
    pub async fn task_list(&self, p: TaskListParams) -> Result<Vec<Task>, EngineError> {
        Ok(self.store.task_list(p).await?)
    }

    /// A page of tasks as `GET /v1/tasks` and the dashboard answer it: a search no index
    /// serves (`text`, `trace_id`, `worker`) reads at most
    /// [`TEXT_SEARCH_IDS`](docket_core::api::TEXT_SEARCH_IDS) ids per page
    /// ([`TaskListParams::text_window`]), and `next_after` goes on past the window.
    ///
    /// # Errors
    /// Store failure.
    pub async fn task_page(
        &self,
        mut p: TaskListParams,
    ) -> Result<docket_core::api::TaskPage, EngineError> {
        let mut newest = i64::MAX;
        if p.unindexed() {
            newest = self
                .store
                .task_list(TaskListParams {
                    descending: true,
                    limit: 1,
                    ..Default::default()
                })
                .await?
                .first()
                .map_or(0, |t| t.id);
            p.text_window(newest);
        }
        let tasks = self.store.task_list(p.clone()).await?;
        let ids: Vec<i64> = tasks.iter().map(|t| t.id).collect();
        Ok(docket_core::api::TaskPage {
            next_after: p.next_after(&ids, newest),
            tasks,
        })
    }

    /// Extends the lease `token` of task `id` by `extend` (default: the task's timeout, never
    /// past the attempt's deadline) and records `progress`; counted in
    /// `docket_task_heartbeats_total` by queue and outcome. An attempt found past its deadline
    /// is failed by the engine's fail rule.
    ///
    /// # Errors
    /// [`EngineError::LeaseLost`], [`EngineError::Cancelled`], [`EngineError::TimedOut`], store
    /// failure.
    pub async fn heartbeat(
        &self,
        id: i64,
        token: String,
        progress: Option<serde_json::Value>,
        extend: Option<std::time::Duration>,
    ) -> Result<Task, EngineError> {
        let r = self
            .store
            .task_heartbeat(TaskHeartbeatParams {
                id,
                token,
                progress,
                lease: extend,
                now: self.clock.now(),
                fail_rule: self.config.fail_rule,
            })
            .await
            .map_err(EngineError::from);
        let (queue, outcome) = match &r {
            Ok(t) => (t.queue.clone(), "ok"),
            Err(EngineError::LeaseLost) => (String::new(), "lease_lost"),
            Err(EngineError::Cancelled) => (String::new(), "cancelled"),
            Err(EngineError::TimedOut) => (String::new(), "timed_out"),
            Err(_) => (String::new(), "error"),
        };
        ::metrics::counter!(crate::metrics::TASK_HEARTBEATS, "queue" => queue, "outcome" => outcome)
            .increment(1);
        r
    }

    /// Every queue with its counts.
    ///
    /// # Errors
    /// Store failure.
    pub async fn queue_list(&self) -> Result<Vec<QueueStats>, EngineError> {
        Ok(self.store.queue_list().await?)
    }

    /// One queue (a queue never configured has the default settings).
    ///
    /// # Errors
    /// Store failure.
    pub async fn queue_get(&self, name: &str) -> Result<QueueStats, EngineError> {
        Ok(self.store.queue_get(name).await?)
    }

    /// The lease token of a running task (None otherwise), for the protocols without leases
    /// (asyncflow's compat routes).
    ///
    /// # Errors
    /// Store failure.
    pub async fn lease_token(&self, id: i64) -> Result<Option<String>, EngineError> {
        Ok(self.store.task_lease_token(id).await?)
    }

    /// Only the settings of each of `names` (no counts: cheaper than [`Engine::queue_get`]).
    ///
    /// # Errors
    /// Store failure.
    pub async fn queue_settings(
        &self,
        names: &[String],
    ) -> Result<std::collections::HashMap<String, QueueSettings>, EngineError> {
        Ok(self.store.queue_settings_many(names).await?)
    }

    /// The `run_at` of the oldest available task of each queue that has one.
    ///
    /// # Errors
    /// Store failure.
    pub async fn queue_oldest_available(&self) -> Result<Vec<QueueOldest>, EngineError> {
        Ok(self.store.queue_oldest_available().await?)
    }

    /// Every node that registered (active, lost or stopped).
    ///
    /// # Errors
    /// Store failure.
    pub async fn node_list(&self) -> Result<Vec<NodeRecord>, EngineError> {
        Ok(self.store.node_list().await?)
    }

    /// A node's state by the rule every node applies (node-daemons' frozen node): `stopped`
    /// when it shut down cleanly, `lost` when silent for three heartbeat periods, else `active`.
    pub fn node_state(&self, n: &NodeRecord) -> &'static str {
        let lost_after = self.config.heartbeat_interval.saturating_mul(3);
        if n.stopped_at.is_some() {
            "stopped"
        } else if docket_core::time::since(self.clock.now(), n.heartbeat_at) > lost_after {
            "lost"
        } else if n.draining_at.is_some() {
            "draining"
        } else {
            "active"
        }
    }

    /// Records worker `name`'s report (node-daemons' worker states).
    ///
    /// # Errors
    /// [`EngineError::Invalid`] naming a bad field; store failure.
    /// Returns the worker as `GET /v1/workers` lists it now (its report just stored).
    pub async fn worker_report(
        &self,
        name: &str,
        report: &docket_core::api::WorkerReport,
    ) -> Result<docket_core::api::WorkerView, EngineError> {
        docket_core::task::check_name("name", name).map_err(EngineError::Invalid)?;
        report.validate().map_err(EngineError::Invalid)?;
        let json = serde_json::to_value(report).map_err(|e| EngineError::Invalid(e.to_string()))?;
        let now = self.clock.now();
        self.store
            .worker_report(docket_store::WorkerReportParams {
                name,
                report: &json,
                interval_ms: docket_core::duration::to_ms(report.interval),
                now,
            })
            .await?;
        Ok(docket_core::api::WorkerView {
            name: name.to_string(),
            state: report.state,
            // As a later read returns it: databases keep microseconds.
            reported_at: chrono::SubsecRound::trunc_subsecs(now, 6),
            report: report.clone(),
        })
    }

    /// Every worker's last report, with its state now: a worker silent for three of its
    /// report intervals is `lost` (as a node is after three missed heartbeats).
    ///
    /// # Errors
    /// Store failure; a stored report that does not decode ([`EngineError::Corrupt`]).
    pub async fn worker_list(&self) -> Result<Vec<docket_core::api::WorkerView>, EngineError> {
        let now = self.clock.now();
        self.store
            .worker_list()
            .await?
            .into_iter()
            .map(|w| {
                let report: docket_core::api::WorkerReport = serde_json::from_value(w.report)
                    .map_err(|e| EngineError::Corrupt(format!("worker {}: report: {e}", w.name)))?;
                let every = std::time::Duration::from_millis(w.interval_ms.max(1) as u64);
                let silent = docket_core::time::since(now, w.reported_at);
                let state = if report.state != docket_core::api::WorkerState::Stop
                    && silent > every.saturating_mul(3)
                {
                    docket_core::api::WorkerState::Lost
                } else {
                    report.state
                };
                Ok(docket_core::api::WorkerView {
                    name: w.name,
                    state,
                    reported_at: w.reported_at,
                    report,
                })
            })
            .collect()
    }

    /// The newest `limit` audit entries.
    ///
    /// # Errors
    /// Store failure.
    pub async fn audit_list(&self, limit: i64) -> Result<Vec<AuditEntry>, EngineError> {
        Ok(self.store.audit_list(limit).await?)
    }

    /// Every schedule, by name.
    ///
    /// # Errors
    /// Store failure.
    pub async fn schedule_list(&self) -> Result<Vec<Schedule>, EngineError> {
        Ok(self.store.schedule_list().await?)
    }

    /// One schedule.
    ///
    /// # Errors
    /// Store failure.
    pub async fn schedule_get(&self, name: &str) -> Result<Option<Schedule>, EngineError> {
        Ok(self.store.schedule_get(name).await?)
    }

    /// Every API token (never the secret).
    ///
    /// # Errors
    /// Store failure.
    pub async fn token_list(&self) -> Result<Vec<docket_core::api::TokenView>, EngineError> {
        Ok(self
            .store
            .token_list()
            .await?
            .into_iter()
            .map(Into::into)
            .collect())
    }

    /// Process notifications after `after`, oldest first.
    ///
    /// # Errors
    /// Store failure.
    pub async fn notification_list(
        &self,
        namespace: Option<&str>,
        after: i64,
        limit: i64,
    ) -> Result<Vec<Notification>, EngineError> {
        Ok(self
            .store
            .notification_list(docket_store::NotificationListParams {
                namespace,
                after,
                limit,
            })
            .await?)
    }

    /// The seq of the newest notification (0: none).
    ///
    /// # Errors
    /// Store failure.
    pub async fn notification_last_seq(&self) -> Result<i64, EngineError> {
        Ok(self.store.notification_last_seq().await?)
    }

    /// Tasks finished per minute since `since`.
    ///
    /// # Errors
    /// Store failure.
    pub async fn task_throughput(&self, since: Timestamp) -> Result<Vec<Throughput>, EngineError> {
        Ok(self.store.task_throughput(since).await?)
    }

    /// The charts of queue `queue` (or of all) over `range` ending now, folded into its bins
    /// ([`docket_core::history`]).
    ///
    /// # Errors
    /// Store failure.
    pub async fn queue_history(
        &self,
        queue: Option<&str>,
        range: docket_core::history::Range,
    ) -> Result<Vec<docket_core::history::Bin>, EngineError> {
        let now = self.clock.now();
        let h = self
            .store
            .queue_history(docket_store::QueueHistoryParams {
                queue: queue.map(str::to_string),
                since: range.since(now),
            })
            .await?;
        Ok(range.bins(&h, now))
    }

    /// Connections of the store's pool(s).
    pub fn pool_connections(&self) -> PoolStats {
        self.store.pool_connections()
    }

    /// Whether the database answers (one cheap read).
    ///
    /// # Errors
    /// Store failure.
    pub async fn ping(&self) -> Result<(), EngineError> {
        self.store.task_next_due().await?;
        Ok(())
    }

    /// Which backend the store is.
    pub fn backend(&self) -> docket_core::api::Backend {
        self.store.backend()
    }
}
