//! A [`Store`] that forwards every call to another and records which methods were called, so
//! the conformance suite can prove it calls every method of the trait.

use crate::{
    AuditAddParams, AuditEntry, AuditStore, AuxPruneParams, AuxPruned, Backend, BatchAddParams,
    BatchCreateParams, BatchListParams, BatchSettleParams, BatchStore, CountsStepParams,
    CountsStepped, LeaseOutcome, LeaseStore, MaintenanceStore, NamespacePutParams, NamespaceRecord,
    NodeDrainParams, NodeRecord, NodeStopParams, NodeStore, Notification,
    NotificationBacklogParams, NotificationListParams, NotificationStore, PoolStats,
    ProcessCollectZombiesParams, ProcessCommit, ProcessCreateParams, ProcessEnqueueParams,
    ProcessFail, ProcessGetParams, ProcessImport, ProcessListParams, ProcessRemoveParams,
    ProcessSimpleRepairParams, ProcessStore, ProcessWithHistory, Promoted, QueueHistoryParams,
    QueueOldest, QueuePutParams, QueueSetPausedParams, QueueStore, RateLimitStore, Released,
    Result, Rotation, ScheduleDeferParams, ScheduleDueParams, ScheduleFireParams, ScheduleFired,
    SchedulePauseParams, SchedulePutParams, ScheduleStore, SinkAdvanceParams, SinkLeaseParams,
    Store, TaskCancelParams, TaskClaimParams, TaskCompleteManyParams, TaskDebounceParams,
    TaskEventListParams, TaskExpireParams, TaskFailManyParams, TaskHeartbeatParams,
    TaskInsertManyParams, TaskLabels, TaskListParams, TaskPromoteParams, TaskPruneParams,
    TaskReleaseParams, TaskRescueListParams, TaskRescueManyParams, TaskRetryParams,
    TaskRotateParams, TaskRunNowParams, TaskStore, TaskTransition, TaskUpdateParams, Throughput,
    TokenCreate, TokenRecord, TokenRevoke, TokenStore, TokenTouch, WaitingTask, Wake, WorkerRecord,
    WorkerReportParams, WorkflowApplied, WorkflowApplyParams, WorkflowRetried, WorkflowRetryParams,
};
use async_trait::async_trait;
use docket_core::durable::{Entry, EventSent, Resumed, RunListParams, Suspended, WorkflowRun};
use docket_core::{QueueSettings, QueueStats, Schedule, Task, Timestamp};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Forwards to `inner`, noting each method's name in `seen`.
#[derive(Debug)]
pub(crate) struct Recording {
    pub(crate) inner: Arc<dyn Store>,
    pub(crate) seen: Arc<Mutex<BTreeSet<&'static str>>>,
    /// Before every call, move finished tasks out of the hot table (MySQL's
    /// `docket_tasks_done`, 0004), so every case meets its finished tasks where a running
    /// service's `rotate` job would have put them a second later.
    pub(crate) archive: bool,
}

impl Recording {
    fn note(&self, name: &'static str) {
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(name);
    }

    async fn hit(&self, name: &'static str) {
        self.note(name);
        // Not before `task_rotate` itself: a case calling it sees what the calls before left.
        if self.archive && name != "task_rotate" {
            let r = self
                .inner
                .task_rotate(TaskRotateParams {
                    now: chrono::Utc::now(),
                    every: Duration::ZERO,
                    min_fill_bytes: 0,
                    idle_every: Duration::ZERO,
                    lock_timeout: Duration::from_secs(5),
                    batch: 1000,
                    most_moved: i64::MAX,
                })
                .await;
            // A deadlock with the case's own concurrent calls is possible and harmless here
            // (the next call moves the rows); the archive itself is asserted by its own case.
            if let Err(e) = r {
                eprintln!("conformance: archiving before {name} failed: {e}");
            }
        }
    }
}

#[async_trait]
impl TaskStore for Recording {
    async fn task_insert_many(&self, p: TaskInsertManyParams) -> Result<Vec<Task>> {
        self.hit("task_insert_many").await;
        self.inner.task_insert_many(p).await
    }

    async fn task_get(&self, id: i64) -> Result<Option<Task>> {
        self.hit("task_get").await;
        self.inner.task_get(id).await
    }

    async fn task_list(&self, p: TaskListParams) -> Result<Vec<Task>> {
        self.hit("task_list").await;
        self.inner.task_list(p).await
    }

    async fn task_cancel(&self, p: TaskCancelParams) -> Result<Task> {
        self.hit("task_cancel").await;
        self.inner.task_cancel(p).await
    }

    async fn task_retry(&self, p: TaskRetryParams) -> Result<Task> {
        self.hit("task_retry").await;
        self.inner.task_retry(p).await
    }

    async fn task_next_due(&self) -> Result<Option<Timestamp>> {
        self.hit("task_next_due").await;
        self.inner.task_next_due().await
    }

    async fn task_find_by_unique_key(&self, key: &str) -> Result<Option<Task>> {
        self.hit("task_find_by_unique_key").await;
        self.inner.task_find_by_unique_key(key).await
    }

    async fn task_run_now(&self, p: TaskRunNowParams) -> Result<Task> {
        self.hit("task_run_now").await;
        self.inner.task_run_now(p).await
    }

    async fn task_throughput(&self, since: Timestamp) -> Result<Vec<Throughput>> {
        self.hit("task_throughput").await;
        self.inner.task_throughput(since).await
    }

    async fn task_debounce(&self, p: TaskDebounceParams) -> Result<Task> {
        self.hit("task_debounce").await;
        self.inner.task_debounce(p).await
    }

    async fn task_update(&self, p: TaskUpdateParams) -> Result<Task> {
        self.hit("task_update").await;
        self.inner.task_update(p).await
    }

    async fn task_count(&self, p: TaskListParams) -> Result<i64> {
        self.hit("task_count").await;
        self.inner.task_count(p).await
    }

    async fn task_delete(&self, ids: &[i64]) -> Result<u64> {
        self.hit("task_delete").await;
        self.inner.task_delete(ids).await
    }
}

#[async_trait]
impl LeaseStore for Recording {
    async fn task_lease_token(&self, id: i64) -> Result<Option<String>> {
        self.hit("task_lease_token").await;
        self.inner.task_lease_token(id).await
    }

    async fn task_release(&self, p: TaskReleaseParams<'_>) -> Result<Vec<Released>> {
        self.hit("task_release").await;
        self.inner.task_release(p).await
    }

    async fn task_claim(&self, p: TaskClaimParams) -> Result<Vec<Task>> {
        self.hit("task_claim").await;
        self.inner.task_claim(p).await
    }

    async fn task_heartbeat(&self, p: TaskHeartbeatParams) -> Result<Task> {
        self.hit("task_heartbeat").await;
        self.inner.task_heartbeat(p).await
    }

    async fn task_complete_many(&self, p: TaskCompleteManyParams<'_>) -> Result<Vec<LeaseOutcome>> {
        self.hit("task_complete_many").await;
        self.inner.task_complete_many(p).await
    }

    async fn task_fail_many(&self, p: TaskFailManyParams<'_>) -> Result<Vec<LeaseOutcome>> {
        self.hit("task_fail_many").await;
        self.inner.task_fail_many(p).await
    }
}

#[async_trait]
impl MaintenanceStore for Recording {
    async fn task_promote(&self, p: TaskPromoteParams) -> Result<Promoted> {
        self.hit("task_promote").await;
        self.inner.task_promote(p).await
    }

    async fn task_rescue_list(&self, p: TaskRescueListParams) -> Result<Vec<Task>> {
        self.hit("task_rescue_list").await;
        self.inner.task_rescue_list(p).await
    }

    async fn task_rescue_many(&self, p: TaskRescueManyParams) -> Result<Vec<TaskLabels>> {
        self.hit("task_rescue_many").await;
        self.inner.task_rescue_many(p).await
    }

    async fn task_expire(&self, p: TaskExpireParams) -> Result<u64> {
        self.hit("task_expire").await;
        self.inner.task_expire(p).await
    }

    async fn task_prune(&self, p: TaskPruneParams) -> Result<u64> {
        self.hit("task_prune").await;
        self.inner.task_prune(p).await
    }

    async fn aux_prune(&self, p: AuxPruneParams) -> Result<AuxPruned> {
        self.hit("aux_prune").await;
        self.inner.aux_prune(p).await
    }

    async fn task_rotate(&self, p: TaskRotateParams) -> Result<Rotation> {
        self.hit("task_rotate").await;
        self.inner.task_rotate(p).await
    }
}

#[async_trait]
impl QueueStore for Recording {
    async fn queue_oldest_available(&self) -> Result<Vec<QueueOldest>> {
        self.hit("queue_oldest_available").await;
        self.inner.queue_oldest_available().await
    }

    async fn queue_settings_many(
        &self,
        names: &[String],
    ) -> Result<HashMap<String, QueueSettings>> {
        self.hit("queue_settings_many").await;
        self.inner.queue_settings_many(names).await
    }

    async fn queue_list(&self) -> Result<Vec<QueueStats>> {
        self.hit("queue_list").await;
        self.inner.queue_list().await
    }

    async fn queue_get(&self, name: &str) -> Result<QueueStats> {
        self.hit("queue_get").await;
        self.inner.queue_get(name).await
    }

    async fn counts_step(&self, p: CountsStepParams) -> Result<Option<CountsStepped>> {
        self.hit("counts_step").await;
        self.inner.counts_step(p).await
    }

    async fn queue_history(&self, p: QueueHistoryParams) -> Result<docket_core::history::History> {
        self.hit("queue_history").await;
        self.inner.queue_history(p).await
    }

    async fn queue_put(&self, p: QueuePutParams<'_>) -> Result<QueueStats> {
        self.hit("queue_put").await;
        self.inner.queue_put(p).await
    }

    async fn queue_set_paused(&self, p: QueueSetPausedParams<'_>) -> Result<QueueStats> {
        self.hit("queue_set_paused").await;
        self.inner.queue_set_paused(p).await
    }
}

#[async_trait]
impl NodeStore for Recording {
    async fn node_heartbeat(&self, node: &NodeRecord) -> Result<()> {
        self.hit("node_heartbeat").await;
        self.inner.node_heartbeat(node).await
    }

    async fn node_stop(&self, p: NodeStopParams<'_>) -> Result<()> {
        self.hit("node_stop").await;
        self.inner.node_stop(p).await
    }

    async fn node_list(&self) -> Result<Vec<NodeRecord>> {
        self.hit("node_list").await;
        self.inner.node_list().await
    }

    async fn worker_report(&self, p: WorkerReportParams<'_>) -> Result<()> {
        self.hit("worker_report").await;
        self.inner.worker_report(p).await
    }

    async fn worker_list(&self) -> Result<Vec<WorkerRecord>> {
        self.hit("worker_list").await;
        self.inner.worker_list().await
    }

    async fn node_drain(&self, p: NodeDrainParams<'_>) -> Result<Option<u64>> {
        self.hit("node_drain").await;
        self.inner.node_drain(p).await
    }
}

#[async_trait]
impl ProcessStore for Recording {
    async fn namespace_put(&self, p: NamespacePutParams<'_>) -> Result<()> {
        self.hit("namespace_put").await;
        self.inner.namespace_put(p).await
    }

    async fn namespace_list(&self) -> Result<Vec<NamespaceRecord>> {
        self.hit("namespace_list").await;
        self.inner.namespace_list().await
    }

    async fn process_create(&self, p: ProcessCreateParams<'_>) -> Result<Task> {
        self.hit("process_create").await;
        self.inner.process_create(p).await
    }

    async fn process_enqueue(&self, p: ProcessEnqueueParams<'_>) -> Result<Task> {
        self.hit("process_enqueue").await;
        self.inner.process_enqueue(p).await
    }

    async fn process_get(&self, p: ProcessGetParams<'_>) -> Result<Option<ProcessWithHistory>> {
        self.hit("process_get").await;
        self.inner.process_get(p).await
    }

    async fn process_commit(&self, c: ProcessCommit) -> Result<()> {
        self.hit("process_commit").await;
        self.inner.process_commit(c).await
    }

    async fn process_fail(&self, f: ProcessFail) -> Result<LeaseOutcome> {
        self.hit("process_fail").await;
        self.inner.process_fail(f).await
    }

    async fn process_remove(&self, p: ProcessRemoveParams<'_>) -> Result<()> {
        self.hit("process_remove").await;
        self.inner.process_remove(p).await
    }

    async fn process_import(&self, p: ProcessImport) -> Result<()> {
        self.hit("process_import").await;
        self.inner.process_import(p).await
    }

    async fn process_simple_repair(&self, p: ProcessSimpleRepairParams<'_>) -> Result<()> {
        self.hit("process_simple_repair").await;
        self.inner.process_simple_repair(p).await
    }

    async fn process_list(
        &self,
        p: ProcessListParams<'_>,
    ) -> Result<Vec<docket_core::process::Process>> {
        self.hit("process_list").await;
        self.inner.process_list(p).await
    }

    async fn process_collect_zombies(&self, p: ProcessCollectZombiesParams) -> Result<u64> {
        self.hit("process_collect_zombies").await;
        self.inner.process_collect_zombies(p).await
    }
}

#[async_trait]
impl NotificationStore for Recording {
    async fn listen(&self) -> Result<Option<tokio::sync::mpsc::Receiver<Wake>>> {
        self.hit("listen").await;
        self.inner.listen().await
    }

    async fn notification_list(&self, p: NotificationListParams<'_>) -> Result<Vec<Notification>> {
        self.hit("notification_list").await;
        self.inner.notification_list(p).await
    }

    async fn notification_last_seq(&self) -> Result<i64> {
        self.hit("notification_last_seq").await;
        self.inner.notification_last_seq().await
    }

    async fn notification_backlog(
        &self,
        p: NotificationBacklogParams<'_>,
    ) -> Result<(i64, Option<Timestamp>)> {
        self.hit("notification_backlog").await;
        self.inner.notification_backlog(p).await
    }

    async fn task_events_watch(&self, queues: &[String]) -> Result<()> {
        self.hit("task_events_watch").await;
        self.inner.task_events_watch(queues).await
    }

    async fn task_event_list(&self, p: TaskEventListParams<'_>) -> Result<Vec<TaskTransition>> {
        self.hit("task_event_list").await;
        self.inner.task_event_list(p).await
    }

    async fn task_event_delete(&self, seqs: &[i64]) -> Result<u64> {
        self.hit("task_event_delete").await;
        self.inner.task_event_delete(seqs).await
    }

    async fn sink_lease(&self, p: SinkLeaseParams<'_>) -> Result<Option<i64>> {
        self.hit("sink_lease").await;
        self.inner.sink_lease(p).await
    }

    async fn sink_advance(&self, p: SinkAdvanceParams<'_>) -> Result<bool> {
        self.hit("sink_advance").await;
        self.inner.sink_advance(p).await
    }
}

#[async_trait]
impl ScheduleStore for Recording {
    async fn schedule_put(&self, p: SchedulePutParams<'_>) -> Result<Schedule> {
        self.hit("schedule_put").await;
        self.inner.schedule_put(p).await
    }

    async fn schedule_get(&self, name: &str) -> Result<Option<Schedule>> {
        self.hit("schedule_get").await;
        self.inner.schedule_get(name).await
    }

    async fn schedule_list(&self) -> Result<Vec<Schedule>> {
        self.hit("schedule_list").await;
        self.inner.schedule_list().await
    }

    async fn schedule_delete(&self, name: &str) -> Result<bool> {
        self.hit("schedule_delete").await;
        self.inner.schedule_delete(name).await
    }

    async fn schedule_pause(&self, p: SchedulePauseParams<'_>) -> Result<Option<Schedule>> {
        self.hit("schedule_pause").await;
        self.inner.schedule_pause(p).await
    }

    async fn schedule_due(&self, p: ScheduleDueParams) -> Result<Vec<Schedule>> {
        self.hit("schedule_due").await;
        self.inner.schedule_due(p).await
    }

    async fn schedule_next_due(&self) -> Result<Option<Timestamp>> {
        self.hit("schedule_next_due").await;
        self.inner.schedule_next_due().await
    }

    async fn schedule_fire(&self, p: ScheduleFireParams) -> Result<ScheduleFired> {
        self.hit("schedule_fire").await;
        self.inner.schedule_fire(p).await
    }

    async fn schedule_defer(&self, p: ScheduleDeferParams<'_>) -> Result<bool> {
        self.hit("schedule_defer").await;
        self.inner.schedule_defer(p).await
    }
}

#[async_trait]
impl BatchStore for Recording {
    async fn batch_create(
        &self,
        p: BatchCreateParams,
    ) -> Result<(docket_core::batch::Batch, Vec<Task>)> {
        self.hit("batch_create").await;
        self.inner.batch_create(p).await
    }

    async fn batch_add(&self, p: BatchAddParams) -> Result<(docket_core::batch::Batch, Vec<Task>)> {
        self.hit("batch_add").await;
        self.inner.batch_add(p).await
    }

    async fn batch_get(&self, id: i64) -> Result<Option<docket_core::batch::Batch>> {
        self.hit("batch_get").await;
        self.inner.batch_get(id).await
    }

    async fn batch_list(&self, p: BatchListParams) -> Result<Vec<docket_core::batch::Batch>> {
        self.hit("batch_list").await;
        self.inner.batch_list(p).await
    }

    async fn batch_unsettled(&self, after: i64, limit: i64) -> Result<Vec<i64>> {
        self.hit("batch_unsettled").await;
        self.inner.batch_unsettled(after, limit).await
    }

    async fn batch_settle(
        &self,
        p: BatchSettleParams,
    ) -> Result<Option<docket_core::batch::Batch>> {
        self.hit("batch_settle").await;
        self.inner.batch_settle(p).await
    }

    async fn workflow_waiting(&self, batch_id: i64) -> Result<Vec<WaitingTask>> {
        self.hit("workflow_waiting").await;
        self.inner.workflow_waiting(batch_id).await
    }

    async fn workflow_waiting_on(&self, finished: &[i64]) -> Result<Vec<WaitingTask>> {
        self.hit("workflow_waiting_on").await;
        self.inner.workflow_waiting_on(finished).await
    }

    async fn workflow_apply(&self, p: WorkflowApplyParams) -> Result<WorkflowApplied> {
        self.hit("workflow_apply").await;
        self.inner.workflow_apply(p).await
    }

    async fn workflow_retry(&self, p: WorkflowRetryParams) -> Result<WorkflowRetried> {
        self.hit("workflow_retry").await;
        self.inner.workflow_retry(p).await
    }

    async fn workflow_graph(
        &self,
        batch_id: i64,
    ) -> Result<Vec<docket_core::workflow::WorkflowNode>> {
        self.hit("workflow_graph").await;
        self.inner.workflow_graph(batch_id).await
    }

    async fn workflow_dep_results_many(
        &self,
        task_ids: &[i64],
    ) -> Result<Vec<(i64, String, Option<serde_json::Value>)>> {
        self.hit("workflow_dep_results_many").await;
        self.inner.workflow_dep_results_many(task_ids).await
    }

    async fn workflow_dep_results(
        &self,
        task_id: i64,
    ) -> Result<Vec<(String, Option<serde_json::Value>)>> {
        self.hit("workflow_dep_results").await;
        self.inner.workflow_dep_results(task_id).await
    }
}

#[async_trait]
impl AuditStore for Recording {
    async fn audit_add(&self, p: AuditAddParams<'_>) -> Result<()> {
        self.hit("audit_add").await;
        self.inner.audit_add(p).await
    }

    async fn audit_list(&self, limit: i64) -> Result<Vec<AuditEntry>> {
        self.hit("audit_list").await;
        self.inner.audit_list(limit).await
    }
}

#[async_trait]
impl TokenStore for Recording {
    async fn token_create(&self, p: TokenCreate) -> Result<TokenRecord> {
        self.hit("token_create").await;
        self.inner.token_create(p).await
    }

    async fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRecord>> {
        self.hit("token_by_hash").await;
        self.inner.token_by_hash(hash).await
    }

    async fn token_list(&self) -> Result<Vec<TokenRecord>> {
        self.hit("token_list").await;
        self.inner.token_list().await
    }

    async fn token_revoke(&self, p: TokenRevoke) -> Result<bool> {
        self.hit("token_revoke").await;
        self.inner.token_revoke(p).await
    }

    async fn token_touch(&self, p: TokenTouch) -> Result<()> {
        self.hit("token_touch").await;
        self.inner.token_touch(p).await
    }
}

#[async_trait]
impl crate::RunStore for Recording {
    async fn run_start(&self, p: crate::RunStartParams) -> Result<(WorkflowRun, bool)> {
        self.hit("run_start").await;
        self.inner.run_start(p).await
    }

    async fn run_get(&self, id: &str) -> Result<Option<WorkflowRun>> {
        self.hit("run_get").await;
        self.inner.run_get(id).await
    }

    async fn run_list(&self, p: RunListParams) -> Result<Vec<WorkflowRun>> {
        self.hit("run_list").await;
        self.inner.run_list(p).await
    }

    async fn run_entries(&self, id: &str) -> Result<Vec<Entry>> {
        self.hit("run_entries").await;
        self.inner.run_entries(id).await
    }

    async fn run_record(&self, p: crate::RunRecordParams) -> Result<usize> {
        self.hit("run_record").await;
        self.inner.run_record(p).await
    }

    async fn run_suspend(&self, p: crate::RunSuspendParams) -> Result<Suspended> {
        self.hit("run_suspend").await;
        self.inner.run_suspend(p).await
    }

    async fn run_finish(&self, p: crate::RunFinishParams) -> Result<WorkflowRun> {
        self.hit("run_finish").await;
        self.inner.run_finish(p).await
    }

    async fn run_start_many(
        &self,
        starts: Vec<crate::RunStartParams>,
    ) -> Result<Vec<Result<(WorkflowRun, bool)>>> {
        self.hit("run_start_many").await;
        self.inner.run_start_many(starts).await
    }

    async fn run_report_many(
        &self,
        reports: Vec<crate::RunReport>,
    ) -> Result<Vec<Result<crate::RunReported>>> {
        self.hit("run_report_many").await;
        self.inner.run_report_many(reports).await
    }

    async fn run_resume(&self, p: crate::RunLease) -> Result<Resumed> {
        self.hit("run_resume").await;
        self.inner.run_resume(p).await
    }

    async fn run_send(&self, p: crate::RunSendParams) -> Result<EventSent> {
        self.hit("run_send").await;
        self.inner.run_send(p).await
    }

    async fn run_cancel(&self, id: &str, now: Timestamp) -> Result<crate::RunCancelled> {
        self.hit("run_cancel").await;
        self.inner.run_cancel(id, now).await
    }

    async fn run_reopen(&self, id: &str, now: Timestamp) -> Result<WorkflowRun> {
        self.hit("run_reopen").await;
        self.inner.run_reopen(id, now).await
    }

    async fn run_prune(&self, before: Timestamp, limit: i64) -> Result<u64> {
        self.hit("run_prune").await;
        self.inner.run_prune(before, limit).await
    }

    async fn run_of_tasks(&self, task_ids: &[i64]) -> Result<Vec<docket_core::sink::TaskRun>> {
        self.hit("run_of_tasks").await;
        self.inner.run_of_tasks(task_ids).await
    }
}

#[async_trait]
impl Store for Recording {
    fn backend(&self) -> Backend {
        self.note("backend");
        self.inner.backend()
    }

    fn supports_listen_notify(&self) -> bool {
        self.note("supports_listen_notify");
        self.inner.supports_listen_notify()
    }

    fn pool_connections(&self) -> PoolStats {
        self.note("pool_connections");
        self.inner.pool_connections()
    }

    fn claims_in_one_statement(&self) -> u64 {
        self.note("claims_in_one_statement");
        self.inner.claims_in_one_statement()
    }

    async fn migrate(&self) -> Result<()> {
        self.hit("migrate").await;
        self.inner.migrate().await
    }

    async fn close(&self) {
        self.hit("close").await;
        self.inner.close().await
    }
}

#[async_trait]
impl RateLimitStore for Recording {
    async fn rate_limit_put(
        &self,
        name: &str,
        spec: &docket_core::rate_limit::RateLimitSpec,
        now: Timestamp,
    ) -> Result<docket_core::rate_limit::RateLimit> {
        self.hit("rate_limit_put").await;
        self.inner.rate_limit_put(name, spec, now).await
    }

    async fn rate_limit_get(
        &self,
        name: &str,
        now: Timestamp,
    ) -> Result<Option<docket_core::rate_limit::RateLimit>> {
        self.hit("rate_limit_get").await;
        self.inner.rate_limit_get(name, now).await
    }

    async fn rate_limit_list(
        &self,
        now: Timestamp,
    ) -> Result<Vec<docket_core::rate_limit::RateLimit>> {
        self.hit("rate_limit_list").await;
        self.inner.rate_limit_list(now).await
    }

    async fn rate_limit_names(&self, names: &[String]) -> Result<Vec<String>> {
        self.hit("rate_limit_names").await;
        self.inner.rate_limit_names(names).await
    }

    async fn rate_limit_delete(&self, name: &str) -> Result<bool> {
        self.hit("rate_limit_delete").await;
        self.inner.rate_limit_delete(name).await
    }

    async fn rate_limit_prune(&self, before: Timestamp) -> Result<u64> {
        self.hit("rate_limit_prune").await;
        self.inner.rate_limit_prune(before).await
    }
}
