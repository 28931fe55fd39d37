//! A [`Store`] that forwards every call to another and records which methods were called, so
//! the conformance suite can prove it calls every method of the trait.

use crate::*;
use async_trait::async_trait;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

/// Forwards to `inner`, noting each method's name in `seen`.
#[derive(Debug)]
pub(crate) struct Recording {
    pub(crate) inner: Arc<dyn Store>,
    pub(crate) seen: Arc<Mutex<BTreeSet<&'static str>>>,
}

impl Recording {
    fn hit(&self, name: &'static str) {
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(name);
    }
}

#[async_trait]
impl TaskStore for Recording {
    async fn task_insert_many(&self, p: TaskInsertManyParams) -> Result<Vec<Task>> {
        self.hit("task_insert_many");
        self.inner.task_insert_many(p).await
    }

    async fn task_get(&self, id: i64) -> Result<Option<Task>> {
        self.hit("task_get");
        self.inner.task_get(id).await
    }

    async fn task_list(&self, p: TaskListParams) -> Result<Vec<Task>> {
        self.hit("task_list");
        self.inner.task_list(p).await
    }

    async fn task_cancel(&self, id: i64, now: Timestamp) -> Result<Task> {
        self.hit("task_cancel");
        self.inner.task_cancel(id, now).await
    }

    async fn task_retry(&self, id: i64, now: Timestamp) -> Result<Task> {
        self.hit("task_retry");
        self.inner.task_retry(id, now).await
    }

    async fn task_next_due(&self) -> Result<Option<Timestamp>> {
        self.hit("task_next_due");
        self.inner.task_next_due().await
    }

    async fn task_find_by_unique_key(&self, key: &str) -> Result<Option<Task>> {
        self.hit("task_find_by_unique_key");
        self.inner.task_find_by_unique_key(key).await
    }

    async fn task_run_now(&self, id: i64, now: Timestamp) -> Result<Task> {
        self.hit("task_run_now");
        self.inner.task_run_now(id, now).await
    }

    async fn task_throughput(&self, since: Timestamp) -> Result<Vec<Throughput>> {
        self.hit("task_throughput");
        self.inner.task_throughput(since).await
    }
}

#[async_trait]
impl LeaseStore for Recording {
    async fn task_claim(&self, p: TaskClaimParams) -> Result<Vec<Task>> {
        self.hit("task_claim");
        self.inner.task_claim(p).await
    }

    async fn task_heartbeat(&self, p: TaskHeartbeatParams) -> Result<Task> {
        self.hit("task_heartbeat");
        self.inner.task_heartbeat(p).await
    }

    async fn task_complete_many(
        &self,
        items: &[TaskComplete],
        now: Timestamp,
    ) -> Result<Vec<LeaseOutcome>> {
        self.hit("task_complete_many");
        self.inner.task_complete_many(items, now).await
    }

    async fn task_fail_many(
        &self,
        items: &[TaskFail],
        worker: Option<&str>,
        now: Timestamp,
    ) -> Result<Vec<LeaseOutcome>> {
        self.hit("task_fail_many");
        self.inner.task_fail_many(items, worker, now).await
    }
}

#[async_trait]
impl MaintenanceStore for Recording {
    async fn task_promote(&self, now: Timestamp, limit: i64) -> Result<Promoted> {
        self.hit("task_promote");
        self.inner.task_promote(now, limit).await
    }

    async fn task_rescue(&self, now: Timestamp, limit: i64) -> Result<Vec<TaskLabels>> {
        self.hit("task_rescue");
        self.inner.task_rescue(now, limit).await
    }

    async fn task_expire(&self, now: Timestamp, limit: i64) -> Result<u64> {
        self.hit("task_expire");
        self.inner.task_expire(now, limit).await
    }

    async fn task_prune(&self, p: TaskPruneParams) -> Result<u64> {
        self.hit("task_prune");
        self.inner.task_prune(p).await
    }

    async fn aux_prune(&self, p: AuxPruneParams) -> Result<AuxPruned> {
        self.hit("aux_prune");
        self.inner.aux_prune(p).await
    }
}

#[async_trait]
impl QueueStore for Recording {
    async fn queue_oldest_available(&self) -> Result<Vec<QueueOldest>> {
        self.hit("queue_oldest_available");
        self.inner.queue_oldest_available().await
    }

    async fn queue_settings_many(
        &self,
        names: &[String],
    ) -> Result<HashMap<String, QueueSettings>> {
        self.hit("queue_settings_many");
        self.inner.queue_settings_many(names).await
    }

    async fn queue_list(&self) -> Result<Vec<QueueStats>> {
        self.hit("queue_list");
        self.inner.queue_list().await
    }

    async fn queue_get(&self, name: &str) -> Result<QueueStats> {
        self.hit("queue_get");
        self.inner.queue_get(name).await
    }

    async fn queue_put(&self, name: &str, s: &QueueSettings, now: Timestamp) -> Result<QueueStats> {
        self.hit("queue_put");
        self.inner.queue_put(name, s, now).await
    }

    async fn queue_set_paused(
        &self,
        name: &str,
        paused: bool,
        now: Timestamp,
    ) -> Result<QueueStats> {
        self.hit("queue_set_paused");
        self.inner.queue_set_paused(name, paused, now).await
    }
}

#[async_trait]
impl NodeStore for Recording {
    async fn node_heartbeat(&self, node: &NodeRecord) -> Result<()> {
        self.hit("node_heartbeat");
        self.inner.node_heartbeat(node).await
    }

    async fn node_stop(&self, name: &str, now: Timestamp) -> Result<()> {
        self.hit("node_stop");
        self.inner.node_stop(name, now).await
    }

    async fn node_list(&self) -> Result<Vec<NodeRecord>> {
        self.hit("node_list");
        self.inner.node_list().await
    }
}

#[async_trait]
impl ProcessStore for Recording {
    async fn namespace_put(&self, name: &str, config: &Value, now: Timestamp) -> Result<()> {
        self.hit("namespace_put");
        self.inner.namespace_put(name, config, now).await
    }

    async fn namespace_list(&self) -> Result<Vec<NamespaceRecord>> {
        self.hit("namespace_list");
        self.inner.namespace_list().await
    }

    async fn process_create(
        &self,
        namespace: &str,
        id: &str,
        init: ResolvedTask,
        now: Timestamp,
    ) -> Result<Task> {
        self.hit("process_create");
        self.inner.process_create(namespace, id, init, now).await
    }

    async fn process_enqueue(
        &self,
        namespace: &str,
        id: &str,
        task: ResolvedTask,
        require: docket_core::process::ProcessStatus,
        now: Timestamp,
    ) -> Result<Task> {
        self.hit("process_enqueue");
        self.inner
            .process_enqueue(namespace, id, task, require, now)
            .await
    }

    async fn process_get(
        &self,
        namespace: &str,
        id: &str,
        range: docket_core::process::HistoryRange,
    ) -> Result<Option<ProcessWithHistory>> {
        self.hit("process_get");
        self.inner.process_get(namespace, id, range).await
    }

    async fn process_commit(&self, c: ProcessCommit) -> Result<()> {
        self.hit("process_commit");
        self.inner.process_commit(c).await
    }

    async fn process_fail(&self, f: ProcessFail) -> Result<LeaseOutcome> {
        self.hit("process_fail");
        self.inner.process_fail(f).await
    }

    async fn process_remove(
        &self,
        task_id: i64,
        token: &str,
        namespace: &str,
        id: &str,
        now: Timestamp,
    ) -> Result<()> {
        self.hit("process_remove");
        self.inner
            .process_remove(task_id, token, namespace, id, now)
            .await
    }

    async fn process_import(&self, p: ProcessImport) -> Result<()> {
        self.hit("process_import");
        self.inner.process_import(p).await
    }

    async fn process_simple_repair(&self, namespace: &str, id: &str, now: Timestamp) -> Result<()> {
        self.hit("process_simple_repair");
        self.inner.process_simple_repair(namespace, id, now).await
    }

    async fn process_list(
        &self,
        namespace: &str,
        status: Option<docket_core::process::ProcessStatus>,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<docket_core::process::Process>> {
        self.hit("process_list");
        self.inner
            .process_list(namespace, status, after, limit)
            .await
    }

    async fn process_collect_zombies(&self, now: Timestamp, limit: i64) -> Result<u64> {
        self.hit("process_collect_zombies");
        self.inner.process_collect_zombies(now, limit).await
    }
}

#[async_trait]
impl NotificationStore for Recording {
    async fn listen(&self) -> Result<Option<tokio::sync::mpsc::Receiver<Wake>>> {
        self.hit("listen");
        self.inner.listen().await
    }

    async fn notification_list(
        &self,
        namespace: Option<&str>,
        after: i64,
        limit: i64,
    ) -> Result<Vec<Notification>> {
        self.hit("notification_list");
        self.inner.notification_list(namespace, after, limit).await
    }

    async fn notification_last_seq(&self) -> Result<i64> {
        self.hit("notification_last_seq");
        self.inner.notification_last_seq().await
    }

    async fn sink_lease(
        &self,
        name: &str,
        owner: &str,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Option<i64>> {
        self.hit("sink_lease");
        self.inner.sink_lease(name, owner, until, now).await
    }

    async fn sink_advance(&self, name: &str, owner: &str, seq: i64) -> Result<bool> {
        self.hit("sink_advance");
        self.inner.sink_advance(name, owner, seq).await
    }
}

#[async_trait]
impl ScheduleStore for Recording {
    async fn schedule_put(
        &self,
        spec: &ScheduleSpec,
        next_run_at: Timestamp,
        now: Timestamp,
    ) -> Result<Schedule> {
        self.hit("schedule_put");
        self.inner.schedule_put(spec, next_run_at, now).await
    }

    async fn schedule_get(&self, name: &str) -> Result<Option<Schedule>> {
        self.hit("schedule_get");
        self.inner.schedule_get(name).await
    }

    async fn schedule_list(&self) -> Result<Vec<Schedule>> {
        self.hit("schedule_list");
        self.inner.schedule_list().await
    }

    async fn schedule_delete(&self, name: &str) -> Result<bool> {
        self.hit("schedule_delete");
        self.inner.schedule_delete(name).await
    }

    async fn schedule_pause(
        &self,
        name: &str,
        paused: bool,
        next_run_at: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<Option<Schedule>> {
        self.hit("schedule_pause");
        self.inner
            .schedule_pause(name, paused, next_run_at, now)
            .await
    }

    async fn schedule_due(&self, now: Timestamp, limit: i64) -> Result<Vec<Schedule>> {
        self.hit("schedule_due");
        self.inner.schedule_due(now, limit).await
    }

    async fn schedule_next_due(&self) -> Result<Option<Timestamp>> {
        self.hit("schedule_next_due");
        self.inner.schedule_next_due().await
    }

    async fn schedule_fire(&self, p: ScheduleFireParams) -> Result<ScheduleFired> {
        self.hit("schedule_fire");
        self.inner.schedule_fire(p).await
    }
}

#[async_trait]
impl AuditStore for Recording {
    async fn audit_add(
        &self,
        actor: &str,
        action: &str,
        target: &str,
        detail: Option<Value>,
        now: Timestamp,
    ) -> Result<()> {
        self.hit("audit_add");
        self.inner
            .audit_add(actor, action, target, detail, now)
            .await
    }

    async fn audit_list(&self, limit: i64) -> Result<Vec<AuditEntry>> {
        self.hit("audit_list");
        self.inner.audit_list(limit).await
    }
}

#[async_trait]
impl TokenStore for Recording {
    async fn token_create(&self, p: TokenCreate) -> Result<TokenRecord> {
        self.hit("token_create");
        self.inner.token_create(p).await
    }

    async fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRecord>> {
        self.hit("token_by_hash");
        self.inner.token_by_hash(hash).await
    }

    async fn token_list(&self) -> Result<Vec<TokenRecord>> {
        self.hit("token_list");
        self.inner.token_list().await
    }

    async fn token_revoke(&self, p: TokenRevoke) -> Result<bool> {
        self.hit("token_revoke");
        self.inner.token_revoke(p).await
    }

    async fn token_touch(&self, p: TokenTouch) -> Result<()> {
        self.hit("token_touch");
        self.inner.token_touch(p).await
    }
}

#[async_trait]
impl Store for Recording {
    fn backend(&self) -> Backend {
        self.hit("backend");
        self.inner.backend()
    }

    fn supports_listen_notify(&self) -> bool {
        self.hit("supports_listen_notify");
        self.inner.supports_listen_notify()
    }

    fn pool_connections(&self) -> PoolStats {
        self.hit("pool_connections");
        self.inner.pool_connections()
    }

    async fn migrate(&self) -> Result<()> {
        self.hit("migrate");
        self.inner.migrate().await
    }

    async fn close(&self) {
        self.hit("close");
        self.inner.close().await
    }
}
