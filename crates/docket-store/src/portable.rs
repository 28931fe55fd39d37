//! Store methods whose flow is the same on every backend, written once over [`Driver`]: the
//! backends differ only in their statements' text and in how a value is bound.

use crate::driver::{
    again, again_up_to, args, stmt, Driver, DriverTx, Listen, ProcessDriver, QueueDriver,
};
use crate::row;
use crate::row::Cols;
use crate::*;
use async_trait::async_trait;
use docket_core::api::AuditEntry;
use docket_core::batch::Batch;
use docket_core::process::{Notification, Process};
use std::collections::HashMap;

#[async_trait]
impl<D: Driver> AuditStore for D {
    async fn audit_add(&self, p: AuditAddParams<'_>) -> Result<()> {
        self.execute(
            stmt!(audit, add),
            args![p.now, p.actor, p.action, p.target, p.detail.as_ref()],
        )
        .await?;
        Ok(())
    }

    async fn audit_list(&self, limit: i64) -> Result<Vec<AuditEntry>> {
        let rows = self.fetch(stmt!(audit, list), args![limit]).await?;
        rows.iter().map(row::audit).collect()
    }
}

#[async_trait]
impl<D: Driver> TokenStore for D {
    async fn token_create(&self, p: TokenCreate) -> Result<TokenRecord> {
        let scopes = serde_json::to_value(&p.scopes).expect("scopes serialise");
        let queues = serde_json::to_value(&p.queues).expect("queues serialise");
        self.execute(
            stmt!(tokens, create),
            args![&p.name, &p.hash, &scopes, &queues, p.now, p.expires_at],
        )
        .await?;
        // The hash is unique: the row just written.
        self.token_by_hash(&p.hash)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("token {}", p.name)))
    }

    async fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRecord>> {
        let row = self.fetch_one(stmt!(tokens, by_hash), args![hash]).await?;
        row.as_ref().map(row::token).transpose()
    }

    async fn token_list(&self) -> Result<Vec<TokenRecord>> {
        let rows = self.fetch(stmt!(tokens, list), args![]).await?;
        rows.iter().map(row::token).collect()
    }

    async fn token_revoke(&self, p: TokenRevoke) -> Result<bool> {
        let n = self
            .execute(stmt!(tokens, revoke), args![&p.name, p.now])
            .await?;
        Ok(n > 0)
    }

    async fn token_touch(&self, p: TokenTouch) -> Result<()> {
        self.execute(stmt!(tokens, touch), args![p.id, p.now])
            .await?;
        Ok(())
    }
}

#[async_trait]
impl<D: Driver> NodeStore for D {
    async fn node_heartbeat(&self, n: &NodeRecord) -> Result<()> {
        self.execute(
            stmt!(nodes, heartbeat),
            args![&n.name, n.started_at, n.heartbeat_at, &n.version, &n.info],
        )
        .await?;
        Ok(())
    }

    async fn node_stop(&self, p: NodeStopParams<'_>) -> Result<()> {
        self.execute(stmt!(nodes, stop), args![p.name, p.now])
            .await?;
        Ok(())
    }

    async fn node_list(&self) -> Result<Vec<NodeRecord>> {
        let rows = self.fetch(stmt!(nodes, list), args![]).await?;
        rows.iter().map(row::node).collect()
    }

    async fn node_drain(&self, p: NodeDrainParams<'_>) -> Result<Option<u64>> {
        again(|| async {
            let mut tx = self.begin().await?;
            let found = tx
                .execute(stmt!(nodes, drain), args![p.name, p.drain, p.now])
                .await?;
            if found == 0 {
                return Ok(None);
            }
            let mut moved = 0;
            if p.drain {
                let queues = tx
                    .fetch(stmt!(nodes, pinned_queues), args![p.name])
                    .await?
                    .iter()
                    .map(|r| r.text("queue"))
                    .collect::<Result<Vec<_>>>()?;
                moved = tx
                    .execute(stmt!(nodes, hand_over_tasks), args![p.name, p.to])
                    .await?;
                // Claimers of these queues look again: the tasks may run elsewhere now.
                tx.wake(&queues).await?;
            }
            tx.commit().await?;
            Ok(Some(moved))
        })
        .await
    }

    async fn worker_report(&self, p: WorkerReportParams<'_>) -> Result<()> {
        self.execute(
            stmt!(nodes, worker_report),
            args![p.name, p.report, p.now, p.interval_ms],
        )
        .await?;
        Ok(())
    }

    async fn worker_list(&self) -> Result<Vec<WorkerRecord>> {
        let rows = self.fetch(stmt!(nodes, worker_list), args![]).await?;
        rows.iter().map(row::worker).collect()
    }
}

#[async_trait]
impl<D: Driver + Listen> NotificationStore for D {
    async fn listen(&self) -> Result<Option<tokio::sync::mpsc::Receiver<Wake>>> {
        Listen::listen(self).await
    }

    async fn notification_list(&self, p: NotificationListParams<'_>) -> Result<Vec<Notification>> {
        let rows = self
            .fetch(
                stmt!(notifications, list),
                args![p.after, p.namespace, p.limit],
            )
            .await?;
        rows.iter().map(row::notification).collect()
    }

    async fn notification_last_seq(&self) -> Result<i64> {
        let row = self
            .fetch_one(stmt!(notifications, last_seq), args![])
            .await?;
        row.map_or(Ok(0), |r| r.int("n"))
    }

    async fn notification_backlog(
        &self,
        p: NotificationBacklogParams<'_>,
    ) -> Result<(i64, Option<Timestamp>)> {
        let row = self
            .fetch_one(
                stmt!(notifications, backlog),
                args![p.namespace, p.after, p.limit],
            )
            .await?;
        match row {
            Some(r) => Ok((r.int("n")?, r.time_opt("oldest")?)),
            None => Ok((0, None)),
        }
    }

    async fn task_events_watch(&self, queues: &[String]) -> Result<()> {
        let list = serde_json::json!(queues);
        self.execute(stmt!(notifications, task_events_watch), args![&list])
            .await?;
        // Each is idempotent (IF NOT EXISTS, or a duplicate ignored): nodes may race here.
        self.execute_text(stmt!(notifications, task_events_arm_insert))
            .await?;
        self.execute_text(stmt!(notifications, task_events_arm_update))
            .await
    }

    async fn task_event_list(&self, p: TaskEventListParams<'_>) -> Result<Vec<TaskTransition>> {
        let rows = self
            .fetch(
                stmt!(notifications, task_event_list),
                args![p.queue, p.limit],
            )
            .await?;
        rows.iter().map(row::task_transition).collect()
    }

    async fn task_event_delete(&self, seqs: &[i64]) -> Result<u64> {
        if seqs.is_empty() {
            return Ok(0);
        }
        let list = serde_json::json!(seqs);
        self.execute(stmt!(notifications, task_event_delete), args![&list])
            .await
    }

    async fn sink_lease(&self, p: SinkLeaseParams<'_>) -> Result<Option<i64>> {
        let mut tx = self.begin().await?;
        tx.execute(stmt!(notifications, sink_ensure), args![p.name])
            .await?;
        let leased = tx
            .execute(
                stmt!(notifications, sink_lease),
                args![p.name, p.owner, p.until, p.now],
            )
            .await?;
        let seq = if leased == 1 {
            let r = tx
                .fetch_one(stmt!(notifications, sink_seq), args![p.name])
                .await?;
            r.map(|r| r.int("seq")).transpose()?
        } else {
            None
        };
        tx.commit().await?;
        Ok(seq)
    }

    async fn sink_advance(&self, p: SinkAdvanceParams<'_>) -> Result<bool> {
        let n = self
            .execute(
                stmt!(notifications, sink_advance),
                args![p.name, p.owner, p.seq],
            )
            .await?;
        Ok(n == 1)
    }
}

#[async_trait]
impl<D: Driver> ScheduleStore for D {
    async fn schedule_put(&self, p: SchedulePutParams<'_>) -> Result<Schedule> {
        let spec = serde_json::to_value(p.spec).expect("a schedule serialises");
        self.execute(
            stmt!(schedules, put),
            args![&p.spec.name, &spec, p.next_run_at, p.now],
        )
        .await?;
        self.schedule_get(&p.spec.name)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("schedule {}", p.spec.name)))
    }

    async fn schedule_get(&self, name: &str) -> Result<Option<Schedule>> {
        let row = self.fetch_one(stmt!(schedules, get), args![name]).await?;
        row.as_ref().map(row::schedule).transpose()
    }

    async fn schedule_list(&self) -> Result<Vec<Schedule>> {
        let rows = self.fetch(stmt!(schedules, list), args![]).await?;
        rows.iter().map(row::schedule).collect()
    }

    async fn schedule_delete(&self, name: &str) -> Result<bool> {
        Ok(self.execute(stmt!(schedules, delete), args![name]).await? == 1)
    }

    async fn schedule_pause(&self, p: SchedulePauseParams<'_>) -> Result<Option<Schedule>> {
        let n = self
            .execute(
                stmt!(schedules, pause),
                args![p.name, p.paused, p.next_run_at, p.now],
            )
            .await?;
        if n == 0 {
            return Ok(None);
        }
        self.schedule_get(p.name).await
    }

    async fn schedule_due(&self, p: ScheduleDueParams) -> Result<Vec<Schedule>> {
        let rows = self
            .fetch(stmt!(schedules, due), args![p.now, p.limit])
            .await?;
        rows.iter().map(row::schedule).collect()
    }

    async fn schedule_next_due(&self) -> Result<Option<Timestamp>> {
        let row = self.fetch_one(stmt!(schedules, next_due), args![]).await?;
        Ok(row.map(|r| r.time_opt("t")).transpose()?.flatten())
    }

    async fn schedule_fire(&self, p: ScheduleFireParams) -> Result<ScheduleFired> {
        again(|| async {
            let mut tx = self.begin().await?;
            // Moving next_run_at from this occurrence is the claim (see sql/schedules.sql).
            let moved = tx
                .execute(
                    stmt!(schedules, fire),
                    args![&p.name, p.occurrence, p.next_run_at, p.now],
                )
                .await?;
            if moved == 0 {
                return Ok(ScheduleFired::NotDue);
            }
            let task = tx.insert_task(&p.task, p.now).await?;
            if let Some(t) = &task {
                tx.execute(stmt!(schedules, last_task), args![&p.name, t.id])
                    .await?;
            }
            tx.commit().await?;
            Ok(task.map_or(ScheduleFired::KeyHeld, |t| {
                ScheduleFired::Enqueued(Box::new(t))
            }))
        })
        .await
    }

    async fn schedule_defer(&self, p: ScheduleDeferParams<'_>) -> Result<bool> {
        let n = self
            .execute(
                stmt!(schedules, defer),
                args![p.name, p.occurrence, p.next_run_at, p.now],
            )
            .await?;
        Ok(n == 1)
    }
}

#[async_trait]
impl<D: Driver + ProcessDriver> ProcessStore for D {
    async fn namespace_put(&self, p: NamespacePutParams<'_>) -> Result<()> {
        self.execute(
            stmt!(processes, namespace_put),
            args![p.name, p.config, p.now],
        )
        .await?;
        Ok(())
    }

    async fn namespace_list(&self) -> Result<Vec<NamespaceRecord>> {
        let rows = self
            .fetch(stmt!(processes, namespace_list), args![])
            .await?;
        rows.iter()
            .map(|r| {
                let name = r.text("name")?;
                let config = r.json("config").map_err(|e| match e {
                    StoreError::Corrupt(m) => StoreError::Corrupt(format!("namespace {name}: {m}")),
                    e => e,
                })?;
                Ok(NamespaceRecord { name, config })
            })
            .collect()
    }

    // Each process flow is one transaction, rolled back whole on a deadlock or a certification
    // conflict (Galera: every process event takes the event sequence's lock row, so two nodes
    // stepping processes at once conflict there): going again is safe.
    async fn process_create(&self, p: ProcessCreateParams<'_>) -> Result<Task> {
        again_up_to(self.contended_tries(), || {
            ProcessDriver::process_create(self, p.clone())
        })
        .await
    }

    async fn process_enqueue(&self, p: ProcessEnqueueParams<'_>) -> Result<Task> {
        again_up_to(self.contended_tries(), || {
            ProcessDriver::process_enqueue(self, p.clone())
        })
        .await
    }

    async fn process_get(&self, p: ProcessGetParams<'_>) -> Result<Option<ProcessWithHistory>> {
        use docket_core::process::Direction;
        let Some(r) = self
            .fetch_one(stmt!(processes, get), args![p.namespace, p.id])
            .await?
        else {
            return Ok(None);
        };
        let process = row::process(&r)?;
        let events = match p.range.direction {
            Direction::Forward => stmt!(processes, events_after),
            Direction::Backward => stmt!(processes, events_before),
        };
        let offset = p.range.offset.filter(|o| *o > 0);
        let limit = p.range.limit.unwrap_or(i64::MAX);
        let rows = self
            .fetch(events, args![p.namespace, p.id, offset, limit])
            .await?;
        Ok(Some(ProcessWithHistory {
            process,
            history: rows.iter().map(row::event).collect::<Result<_>>()?,
        }))
    }

    async fn process_commit(&self, c: ProcessCommit) -> Result<()> {
        again_up_to(self.contended_tries(), || {
            ProcessDriver::process_commit(self, c.clone())
        })
        .await
    }

    async fn process_fail(&self, f: ProcessFail) -> Result<LeaseOutcome> {
        again_up_to(self.contended_tries(), || {
            ProcessDriver::process_fail(self, f.clone())
        })
        .await
    }

    async fn process_remove(&self, p: ProcessRemoveParams<'_>) -> Result<()> {
        again_up_to(self.contended_tries(), || {
            ProcessDriver::process_remove(self, p.clone())
        })
        .await
    }

    async fn process_import(&self, p: ProcessImport) -> Result<()> {
        again_up_to(self.contended_tries(), || {
            ProcessDriver::process_import(self, p.clone())
        })
        .await
    }

    async fn process_simple_repair(&self, p: ProcessSimpleRepairParams<'_>) -> Result<()> {
        use docket_core::process::Notice;
        let p = &p;
        let (repaired, status) = again(|| async move {
            let mut tx = self.begin().await?;
            let repaired = tx
                .execute(
                    stmt!(processes, simple_repair),
                    args![p.namespace, p.id, p.now],
                )
                .await?;
            if repaired == 1 {
                tx.publish(
                    p.namespace,
                    p.id,
                    &[Notice::Repaired { simple: true }],
                    p.now,
                )
                .await?;
            }
            let status = tx
                .fetch_one(stmt!(processes, status), args![p.namespace, p.id])
                .await?
                .map(|r| r.text("status"))
                .transpose()?;
            tx.commit().await?;
            Ok((repaired, status))
        })
        .await?;
        match (repaired, status) {
            (1, _) => Ok(()),
            (_, None) => Err(StoreError::NotFound(format!(
                "process {}/{}",
                p.namespace, p.id
            ))),
            (_, Some(st)) => Err(StoreError::InvalidState(format!("process is {st}"))),
        }
    }

    async fn process_list(&self, p: ProcessListParams<'_>) -> Result<Vec<Process>> {
        let rows = self
            .fetch(
                stmt!(processes, list),
                args![p.namespace, p.status.map(|s| s.as_str()), p.after, p.limit],
            )
            .await?;
        rows.iter().map(row::process).collect()
    }

    async fn process_collect_zombies(&self, p: ProcessCollectZombiesParams) -> Result<u64> {
        ProcessDriver::process_collect_zombies(self, p).await
    }
}

/// Takes the kept counts' lock in `tx` ([`docket_core::counts`]) and returns `counted_to`:
/// a prune takes it before deleting, so what it subtracts matches what a step counted.
///
/// # Errors
/// Database failure; [`StoreError::Corrupt`] without the counts' row.
pub(crate) async fn counts_lock<T: DriverTx>(tx: &mut T) -> Result<Timestamp> {
    match tx.fetch_one(stmt!(queues, counts_lock), args![]).await? {
        Some(r) => r.time("counted_to"),
        None => Err(StoreError::Corrupt(
            "docket_counts has no row (migration 0029 / sqlite 0027 / mysql 0011 adds it)".into(),
        )),
    }
}

/// Subtracts from the kept counts, in `tx` after [`counts_lock`], the deleted finished tasks
/// `rows` (queue, state, finished_at) that were counted ([`docket_core::counts::forgotten`]).
///
/// # Errors
/// Database failure.
pub(crate) async fn counts_forget<T: DriverTx>(
    tx: &mut T,
    counted_to: Timestamp,
    rows: &[(String, TaskState, Option<Timestamp>)],
) -> Result<()> {
    let gone = docket_core::counts::forgotten(
        rows.iter().map(|(q, s, t)| (q.as_str(), *s, *t)),
        counted_to,
    );
    for ((queue, state), n) in gone {
        tx.execute(
            stmt!(queues, counts_add),
            args![queue.as_str(), state.as_str(), -n],
        )
        .await?;
    }
    Ok(())
}

/// The kept counts' `counted_to` ([`docket_core::counts`]), read to be bound into a statement
/// (a bound value the planner sizes; a subquery it cannot).
///
/// # Errors
/// Database failure.
pub(crate) async fn counted_to<D: Driver>(d: &D) -> Result<Timestamp> {
    Ok(
        match d.fetch_one(stmt!(queues, counted_to), args![]).await? {
            Some(r) => r.time("counted_to")?,
            None => docket_core::counts::origin(),
        },
    )
}

/// [`TaskStore::task_delete`] on every backend: under the kept counts' lock, the finished
/// tasks among `ids` are locked, deleted and subtracted from the counts in one transaction.
///
/// # Errors
/// Database failure; nothing is deleted then.
pub(crate) async fn task_delete<D: Driver>(d: &D, ids: &[i64]) -> Result<u64> {
    if ids.is_empty() {
        return Ok(0);
    }
    let mut tx = d.begin().await?;
    let counted_to = counts_lock(&mut tx).await?;
    // MariaDB keeps finished tasks in docket_tasks_done (mysql 0004): back where the
    // statements look (a no-op elsewhere).
    tx.unarchive(ids).await?;
    let all = serde_json::Value::from(ids.to_vec());
    let rows = tx.fetch(stmt!(tasks, delete_lock), args![&all]).await?;
    let gone = pruned_rows(&rows)?;
    if !rows.is_empty() {
        let locked = rows
            .iter()
            .map(|r| r.int("id"))
            .collect::<Result<Vec<i64>>>()?;
        let locked = serde_json::Value::from(locked);
        tx.execute(stmt!(tasks, delete), args![&locked]).await?;
    }
    counts_forget(&mut tx, counted_to, &gone).await?;
    tx.commit().await?;
    Ok(gone.len() as u64)
}

/// How long a claim's release mark is kept: far longer than a claim takes to commit (its
/// long-poll is at most a minute), so the claim's check after it commits still sees it.
const RELEASE_MARK_KEPT: std::time::Duration = std::time::Duration::from_secs(3600);

/// [`LeaseStore::task_release`] on every backend. A [`Release::Claim`] commits its mark
/// before it looks for the claim's tasks, and a claim's check ([`Release::IfClaimReleased`])
/// reads the mark only after the claim committed: whichever runs second sees the other, so a
/// release never misses a claim that overtook it.
///
/// # Errors
/// Database failure.
pub(crate) async fn task_release<D: Driver>(
    d: &D,
    p: TaskReleaseParams<'_>,
) -> Result<Vec<Released>> {
    let nonce = docket_core::lease::nonce_hex(p.nonce);
    let ids = match p.release {
        Release::Claim => {
            let old = docket_core::time::sub(p.now, RELEASE_MARK_KEPT);
            d.execute(stmt!(leases, release_prune), args![old]).await?;
            d.execute(stmt!(leases, release_mark), args![nonce.as_str(), p.now])
                .await?;
            None
        }
        Release::Tasks(ids) => Some(ids),
        Release::IfClaimReleased(ids) => {
            if ids.is_empty()
                || d.fetch_one(stmt!(leases, release_marked), args![nonce.as_str()])
                    .await?
                    .is_none()
            {
                return Ok(vec![]);
            }
            Some(ids)
        }
    };
    if ids.is_some_and(<[i64]>::is_empty) {
        return Ok(vec![]);
    }
    let ids = ids.map(|i| serde_json::Value::from(i.to_vec()));
    let (nonce, ids) = (&nonce, &ids);
    again(|| async move {
        let mut tx = d.begin().await?;
        let rows = tx
            .fetch(
                stmt!(leases, release_lock),
                args![nonce.as_str(), p.queue, ids.as_ref()],
            )
            .await?;
        let out = rows
            .iter()
            .map(|r| {
                Ok(Released {
                    id: r.int("id")?,
                    queue: r.text("queue")?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        if !out.is_empty() {
            let locked = serde_json::Value::from(out.iter().map(|r| r.id).collect::<Vec<_>>());
            tx.execute(stmt!(leases, release), args![&locked]).await?;
        }
        tx.commit().await?;
        Ok(out)
    })
    .await
}

/// Before a retry makes finished task `id` unfinished, in the retry's transaction: takes the
/// kept counts' lock, locks the task and subtracts it from the counts if they counted it
/// ([`docket_core::counts`]) — so a bulk retry of 48,210 failures leaves the discarded count
/// at 0 at once, not after the next recount. A task not retryable is left alone (the retry
/// then finds nothing and rolls this back with it).
///
/// # Errors
/// Database failure.
pub(crate) async fn counts_before_retry<T: DriverTx>(tx: &mut T, id: i64) -> Result<()> {
    let counted_to = counts_lock(tx).await?;
    let rows = tx.fetch(stmt!(tasks, retry_lock), args![id]).await?;
    counts_forget(tx, counted_to, &pruned_rows(&rows)?).await
}

/// (queue, state, finished_at) of rows a prune's `RETURNING` gave.
pub(crate) fn pruned_rows<R: Cols>(
    rows: &[R],
) -> Result<Vec<(String, TaskState, Option<Timestamp>)>> {
    rows.iter()
        .map(|r| {
            let state = r.text("state")?;
            let state = state
                .parse::<TaskState>()
                .map_err(|_| StoreError::Corrupt(format!("task state {state:?}")))?;
            Ok((r.text("queue")?, state, r.time_opt("finished_at")?))
        })
        .collect()
}

/// Tasks by queue and state, for one queue or all.
async fn counts<D: Driver>(
    d: &D,
    queue: Option<&str>,
) -> Result<HashMap<String, std::collections::BTreeMap<TaskState, i64>>> {
    // `counted_to` is read first and bound, so the planner sizes the range of finished tasks
    // past it (a subquery's value it cannot see: PostgreSQL then guessed a third of the table
    // and scanned all 10 million rows, 3 s). The counts statement checks, in its own snapshot,
    // that the kept counts are still at that `counted_to` (else a row `stale`): a step that
    // committed in between would have them count the same tasks twice, so read again.
    for _ in 0..5 {
        let counted_to = counted_to(d).await?;
        let mut out: HashMap<String, _> = HashMap::new();
        let mut stale = false;
        for r in d
            .fetch(stmt!(queues, counts), args![queue, counted_to])
            .await?
        {
            let state = r.text("state")?;
            if state == "stale" {
                stale = true;
            } else if let Ok(st) = state.parse::<TaskState>() {
                // Never below zero: a state changed behind the engine's back (plain SQL) is
                // subtracted without having been counted, until the hourly recount.
                out.entry(r.text("queue")?)
                    .or_insert_with(empty_counts)
                    .insert(st, r.int("n")?.max(0));
            }
        }
        if !stale {
            return Ok(out);
        }
    }
    Err(StoreError::Database {
        kind: DbErrorKind::Unavailable,
        message: "the kept counts moved on under five reads in a row".into(),
    })
}

#[async_trait]
impl<D: Driver + QueueDriver> QueueStore for D {
    async fn queue_oldest_available(&self) -> Result<Vec<QueueOldest>> {
        let rows = self.fetch(stmt!(queues, oldest_available), args![]).await?;
        rows.iter()
            .map(|r| {
                Ok(QueueOldest {
                    queue: r.text("queue")?,
                    run_at: r.time("run_at")?,
                })
            })
            .collect()
    }

    async fn queue_settings_many(
        &self,
        names: &[String],
    ) -> Result<HashMap<String, QueueSettings>> {
        QueueDriver::queue_settings_many(self, names).await
    }

    async fn queue_list(&self) -> Result<Vec<QueueStats>> {
        let counts = counts(self, None).await?;
        let rows = self.fetch(stmt!(queues, list), args![]).await?;
        let settings = rows
            .iter()
            .map(|r| {
                Ok((
                    r.text("name")?,
                    row::queue_settings(r)?,
                    row::queue_times(r)?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(merge_queues(settings, counts))
    }

    async fn counts_step(&self, p: CountsStepParams) -> Result<Option<CountsStepped>> {
        let mut tx = self.begin().await?;
        let counted_to = counts_lock(&mut tx).await?;
        let recounted_at = match tx
            .fetch_one(stmt!(queues, counts_recounted), args![])
            .await?
        {
            Some(r) => r.time_opt("recounted_at")?,
            None => None,
        };
        let Some(step) =
            docket_core::counts::step(counted_to, recounted_at, p.now, p.recount_every)
        else {
            return Ok(None);
        };
        let rows = tx
            .fetch(stmt!(queues, counts_finished), args![step.from, step.to])
            .await?;
        if step.from.is_none() {
            tx.execute(stmt!(queues, counts_clear), args![]).await?;
        }
        let mut counted = 0;
        for r in &rows {
            let n = r.int("n")?;
            counted += n;
            let (queue, state) = (r.text("queue")?, r.text("state")?);
            tx.execute(
                stmt!(queues, counts_add),
                args![queue.as_str(), state.as_str(), n],
            )
            .await?;
        }
        // The per-minute counts of the same range (each finished task lands once) with their
        // pickup latency by bucket (docket_core::history), kept a day.
        let (from, floor) = docket_core::counts::minutes(counted_to, step.to);
        let mut minutes: HashMap<(String, Timestamp), [i64; 3]> = HashMap::new();
        for r in tx
            .fetch(stmt!(queues, counts_minutes), args![from, step.to])
            .await?
        {
            let (queue, minute) = (r.text("queue")?, r.time("minute")?);
            let n = [
                r.int("completed")?,
                r.int("discarded")?,
                r.int("cancelled")?,
            ];
            if let Some(bucket) = r.int_opt("bucket")? {
                tx.execute(
                    stmt!(queues, latency_add),
                    args![queue.as_str(), minute, bucket, n.iter().sum::<i64>()],
                )
                .await?;
            }
            let m = minutes.entry((queue, minute)).or_default();
            for (a, b) in m.iter_mut().zip(n) {
                *a += b;
            }
        }
        for ((queue, minute), [completed, discarded, cancelled]) in &minutes {
            tx.execute(
                stmt!(queues, minutes_add),
                args![queue.as_str(), *minute, *completed, *discarded, *cancelled],
            )
            .await?;
        }
        // The depth once a minute: the first step past a minute's start samples it.
        if let Some(m) = docket_core::history::depth_minute(counted_to, step.to) {
            tx.execute(stmt!(queues, depth_sample), args![m]).await?;
        }
        tx.execute(stmt!(queues, minutes_prune), args![floor])
            .await?;
        tx.execute(stmt!(queues, latency_prune), args![floor])
            .await?;
        let recounted = step.from.is_none().then_some(p.now);
        tx.execute(stmt!(queues, counts_moved), args![step.to, recounted])
            .await?;
        tx.commit().await?;
        Ok(Some(CountsStepped { step, counted }))
    }

    async fn queue_history(&self, p: QueueHistoryParams) -> Result<docket_core::history::History> {
        use docket_core::history::{LatencyCount, Minute, BUCKETS};
        let q = p.queue.as_deref();
        let mut h = docket_core::history::History::default();
        for r in self
            .fetch(stmt!(queues, history_minutes), args![q, p.since])
            .await?
        {
            h.minutes.push(Minute {
                minute: r.time("minute")?,
                completed: r.int("completed")?,
                discarded: r.int("discarded")?,
                cancelled: r.int("cancelled")?,
                available: r.int_opt("available")?,
                running: r.int_opt("running")?,
            });
        }
        for r in self
            .fetch(stmt!(queues, history_latency), args![q, p.since])
            .await?
        {
            let bucket = r.int("bucket")?;
            h.latency.push(LatencyCount {
                minute: r.time("minute")?,
                bucket: usize::try_from(bucket).unwrap_or(BUCKETS).min(BUCKETS - 1),
                n: r.int("n")?,
            });
        }
        Ok(h)
    }

    async fn queue_get(&self, name: &str) -> Result<QueueStats> {
        let row = self.fetch_one(stmt!(queues, get), args![name]).await?;
        let (settings, (created_at, updated_at)) = match &row {
            Some(r) => (row::queue_settings(r)?, row::queue_times(r)?),
            None => Default::default(),
        };
        let counts = counts(self, Some(name))
            .await?
            .remove(name)
            .unwrap_or_else(empty_counts);
        Ok(QueueStats {
            name: name.to_string(),
            settings,
            counts,
            created_at,
            updated_at,
        })
    }

    async fn queue_put(&self, p: QueuePutParams<'_>) -> Result<QueueStats> {
        let s = p.settings;
        let ms = |d: Option<std::time::Duration>| d.map(docket_core::duration::to_ms);
        let backoff = s
            .backoff
            .map(|b| serde_json::to_value(b).expect("backoff serialises"));
        let weights = s
            .partition_weights
            .as_ref()
            .map(|w| serde_json::to_value(w).expect("weights serialise"));
        let mut tx = self.begin().await?;
        tx.execute(
            stmt!(queues, put),
            args![
                p.name,
                s.paused,
                s.concurrency_limit,
                s.max_attempts,
                backoff.as_ref(),
                ms(s.timeout),
                ms(s.retention_completed),
                ms(s.retention_failed),
                p.now,
                s.mask_payload,
                s.schedule_limit,
                ms(s.schedule_interval),
                s.rate_limit.as_deref(),
                s.fair,
                weights.as_ref(),
                s.partition_limit,
            ],
        )
        .await?;
        if !s.paused {
            // Resuming may make tasks claimable: wake the claimers.
            tx.wake(&[p.name.to_string()]).await?;
        }
        tx.commit().await?;
        self.queue_get(p.name).await
    }
}

/// Waiting tasks from rows of `waiting` / `waiting_on` (one per dependency, by task id).
fn waiting_tasks<R: Cols>(rows: &[R]) -> Result<Vec<WaitingTask>> {
    let mut out: Vec<WaitingTask> = vec![];
    for r in rows {
        let id = r.int("id")?;
        let state = match r.text_opt("dep_state")? {
            Some(s) => Some(decode::state(&format!("task {id}'s dependency"), &s)?),
            None => None,
        };
        let dep = (state, r.flag("ignore_failure")?);
        match out.last_mut() {
            Some(w) if w.id == id => w.deps.push(dep),
            _ => out.push(WaitingTask {
                id,
                queue: r.text("queue")?,
                deps: vec![dep],
            }),
        }
    }
    Ok(out)
}

/// Inserts `tasks` as members of batch `id` in `tx`, in order.
async fn insert_members<T: DriverTx>(
    tx: &mut T,
    id: i64,
    tasks: &[ResolvedTask],
    now: Timestamp,
) -> Result<Vec<Task>> {
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        let mut t = t.clone();
        t.batch_id = Some(id);
        let task = tx.insert_task(&t, now).await?.ok_or_else(|| {
            StoreError::Conflict("a batch member was turned away by its unique_key".into())
        })?;
        out.push(task);
    }
    Ok(out)
}

/// Writes the refs and dependency edges of a workflow's new `tasks` (inserted in `tx`, in the
/// order of `refs` and `deps`); `existing` allows edges to tasks already in the workflow.
async fn insert_graph<T: DriverTx>(
    tx: &mut T,
    batch: i64,
    tasks: &[Task],
    refs: &[String],
    deps: &[Vec<(docket_core::workflow::Target, bool)>],
    existing: bool,
) -> Result<()> {
    use docket_core::workflow::Target;
    for (t, r) in tasks.iter().zip(refs) {
        tx.execute(stmt!(batches, add_ref), args![t.id, batch, r.as_str()])
            .await?;
    }
    for (t, deps) in tasks.iter().zip(deps) {
        for (target, ignore) in deps {
            let dep = match *target {
                Target::New(j) => tasks.get(j).map(|d| d.id).ok_or_else(|| {
                    StoreError::Invalid(format!("a dependency on task {j} of {}", tasks.len()))
                })?,
                Target::Existing(id) if existing => id,
                Target::Existing(id) => {
                    return Err(StoreError::Invalid(format!(
                        "a new workflow's task depends on task {id}, which is not in it"
                    )))
                }
            };
            tx.execute(stmt!(batches, add_dep), args![t.id, dep, *ignore])
                .await?;
        }
    }
    Ok(())
}

/// The members of batch `id` by state.
fn batch_counts<R: Cols>(rows: Vec<R>) -> Result<docket_core::batch::StateCounts> {
    let mut counts = docket_core::batch::StateCounts::new();
    for r in &rows {
        let state = r.text("state")?;
        let s = decode::state(&format!("batch member state {state:?}"), &state)?;
        counts.insert(s, r.int("n")?);
    }
    Ok(counts)
}

#[async_trait]
impl<D: Driver + QueueDriver> BatchStore for D {
    async fn batch_create(&self, p: BatchCreateParams) -> Result<(Batch, Vec<Task>)> {
        let callbacks = serde_json::to_value(&p.callbacks).expect("callbacks serialise");
        let (id, tasks) = again(|| async {
            let mut tx = self.begin().await?;
            tx.execute(
                stmt!(batches, create),
                args![p.name.as_deref(), !p.open, &callbacks, p.now],
            )
            .await?;
            let id = tx
                .fetch_one(stmt!(batches, last_id), args![])
                .await?
                .ok_or_else(|| StoreError::Corrupt("a new batch has no id".into()))?
                .int("id")?;
            let tasks = insert_members(&mut tx, id, &p.tasks, p.now).await?;
            insert_graph(&mut tx, id, &tasks, &p.refs, &p.deps, false).await?;
            tx.commit().await?;
            Ok((id, tasks))
        })
        .await?;
        let batch = self
            .batch_get(id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("batch {id}")))?;
        Ok((batch, tasks))
    }

    async fn batch_add(&self, p: BatchAddParams) -> Result<(Batch, Vec<Task>)> {
        let tasks = again(|| async {
            let mut tx = self.begin().await?;
            let b = match tx.fetch_one(stmt!(batches, lock), args![p.id]).await? {
                Some(r) => row::batch(&r)?,
                None => return Err(StoreError::NotFound(format!("batch {}", p.id))),
            };
            if b.settled_at.is_some() {
                return Err(StoreError::Conflict(format!(
                    "batch {} has settled (its callbacks were enqueued): it takes no more tasks",
                    p.id
                )));
            }
            if !p.refs.is_empty() {
                // Under the lock: a ref another addition wrote since the engine read the graph.
                let have: std::collections::HashSet<String> = tx
                    .fetch(stmt!(batches, refs), args![p.id])
                    .await?
                    .iter()
                    .map(|r| r.text("ref"))
                    .collect::<Result<_>>()?;
                if let Some(r) = p.refs.iter().find(|r| have.contains(*r)) {
                    return Err(StoreError::Conflict(format!(
                        "workflow {} already has a task with ref {r:?}",
                        p.id
                    )));
                }
            }
            let tasks = insert_members(&mut tx, p.id, &p.tasks, p.now).await?;
            insert_graph(&mut tx, p.id, &tasks, &p.refs, &p.deps, true).await?;
            if p.seal && b.open {
                tx.execute(stmt!(batches, seal), args![p.id]).await?;
            }
            tx.commit().await?;
            Ok(tasks)
        })
        .await?;
        let batch = self
            .batch_get(p.id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("batch {}", p.id)))?;
        Ok((batch, tasks))
    }

    async fn batch_get(&self, id: i64) -> Result<Option<Batch>> {
        let Some(r) = self.fetch_one(stmt!(batches, get), args![id]).await? else {
            return Ok(None);
        };
        let b = row::batch(&r)?;
        let counts = batch_counts(self.fetch(stmt!(batches, counts), args![id]).await?)?;
        Ok(Some(b.with_counts(counts)))
    }

    async fn batch_list(&self, p: BatchListParams) -> Result<Vec<Batch>> {
        let rows = self
            .fetch(stmt!(batches, list), args![p.before, p.limit])
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let b = row::batch(r)?;
            let counts = batch_counts(self.fetch(stmt!(batches, counts), args![b.id]).await?)?;
            out.push(b.with_counts(counts));
        }
        Ok(out)
    }

    async fn batch_unsettled(&self, after: i64, limit: i64) -> Result<Vec<i64>> {
        let rows = self
            .fetch(stmt!(batches, unsettled), args![after, limit])
            .await?;
        rows.iter().map(|r| r.int("id")).collect()
    }

    async fn batch_settle(&self, p: BatchSettleParams) -> Result<Option<Batch>> {
        // Looked at first without the lock (SQLite's transaction takes the writer): a batch
        // with an unfinished member, the sweep's usual case, costs one indexed read.
        if self
            .fetch_one(stmt!(batches, unfinished), args![p.id])
            .await?
            .is_some()
        {
            return Ok(None);
        }
        // The callbacks' queue settings, for the rule to resolve them with.
        let Some(r) = self.fetch_one(stmt!(batches, get), args![p.id]).await? else {
            return Ok(None);
        };
        let spec = row::batch(&r)?;
        if spec.open || spec.settled_at.is_some() {
            return Ok(None);
        }
        let mut names: Vec<String> = docket_core::batch::CALLBACKS
            .iter()
            .filter_map(|c| spec.callbacks.get(c))
            .map(|t| t.queue_name().to_string())
            .collect();
        names.sort();
        names.dedup();
        let settings = QueueDriver::queue_settings_many(self, &names).await?;
        again(|| async {
            let mut tx = self.begin().await?;
            let b = match tx.fetch_one(stmt!(batches, lock), args![p.id]).await? {
                Some(r) => row::batch(&r)?,
                None => return Ok(None),
            };
            if b.open || b.settled_at.is_some() {
                return Ok(None);
            }
            // Under the lock: a member added since the look above counts.
            if tx
                .fetch_one(stmt!(batches, unfinished), args![p.id])
                .await?
                .is_some()
            {
                return Ok(None);
            }
            let counts = batch_counts(tx.fetch(stmt!(batches, counts), args![p.id]).await?)?;
            let b = b.with_counts(counts);
            let limit = docket_core::batch::MAX_FAILED_IDS as i64 + 1;
            let failed = tx
                .fetch(stmt!(batches, failed), args![p.id, limit])
                .await?
                .iter()
                .map(|r| r.int("id"))
                .collect::<Result<Vec<_>>>()?;
            let mut fired = std::collections::BTreeMap::new();
            for (name, t) in (p.rule)(&b, &failed, &settings)? {
                let task = tx.insert_task(&t, p.now).await?.ok_or_else(|| {
                    StoreError::Conflict(format!("callback {name} turned away by a unique key"))
                })?;
                fired.insert(name, task.id);
            }
            let fired_json = serde_json::to_value(&fired).expect("fired serialises");
            let n = tx
                .execute(stmt!(batches, settle), args![p.id, p.now, &fired_json])
                .await?;
            if n != 1 {
                return Ok(None);
            }
            tx.commit().await?;
            Ok(Some(Batch {
                settled_at: Some(p.now),
                fired,
                ..b
            }))
        })
        .await
    }

    async fn workflow_waiting(&self, batch_id: i64) -> Result<Vec<WaitingTask>> {
        let wait = docket_core::workflow::waiting_run_at();
        let rows = self
            .fetch(stmt!(batches, waiting), args![batch_id, wait])
            .await?;
        waiting_tasks(&rows)
    }

    async fn workflow_waiting_on(&self, finished: &[i64]) -> Result<Vec<WaitingTask>> {
        if finished.is_empty() {
            return Ok(vec![]);
        }
        let wait = docket_core::workflow::waiting_run_at();
        let ids = serde_json::Value::from(finished.to_vec());
        let rows = self
            .fetch(stmt!(batches, waiting_on), args![&ids, wait])
            .await?;
        waiting_tasks(&rows)
    }

    async fn workflow_apply(&self, p: WorkflowApplyParams) -> Result<WorkflowApplied> {
        let wait = docket_core::workflow::waiting_run_at();
        again(|| async {
            let mut tx = self.begin().await?;
            let mut out = WorkflowApplied::default();
            for id in &p.release {
                let n = tx
                    .execute(stmt!(batches, release), args![*id, p.now, wait])
                    .await?;
                if n == 1 {
                    out.released.push(*id);
                }
            }
            for id in &p.cancel {
                out.cancelled += tx
                    .execute(stmt!(batches, cancel_waiting), args![*id, p.now, wait])
                    .await?;
            }
            tx.commit().await?;
            Ok(out)
        })
        .await
    }

    async fn workflow_retry(&self, p: WorkflowRetryParams) -> Result<WorkflowRetried> {
        let wait = docket_core::workflow::waiting_run_at();
        again(|| async {
            let mut tx = self.begin().await?;
            if tx
                .fetch_one(stmt!(batches, lock), args![p.id])
                .await?
                .is_none()
            {
                return Err(StoreError::NotFound(format!("workflow {}", p.id)));
            }
            let mut out = WorkflowRetried::default();
            let all: Vec<i64> = p.run.iter().chain(&p.wait).copied().collect();
            tx.unarchive(&all).await?;
            for id in &p.run {
                let Some(q) = tx
                    .fetch_one(stmt!(batches, retry_queue), args![*id])
                    .await?
                else {
                    continue;
                };
                if tx
                    .execute(stmt!(batches, retry_run), args![*id, p.now])
                    .await?
                    == 1
                {
                    out.run.push((*id, q.text("queue")?));
                }
            }
            for id in &p.wait {
                out.waiting += tx
                    .execute(stmt!(batches, retry_wait), args![*id, p.now, wait])
                    .await?;
            }
            if !out.run.is_empty() || out.waiting > 0 {
                tx.execute(stmt!(batches, unsettle), args![p.id]).await?;
                let mut queues: Vec<String> = out.run.iter().map(|(_, q)| q.clone()).collect();
                queues.sort();
                queues.dedup();
                tx.wake(&queues).await?;
            }
            tx.commit().await?;
            Ok(out)
        })
        .await
    }

    async fn workflow_graph(
        &self,
        batch_id: i64,
    ) -> Result<Vec<docket_core::workflow::WorkflowNode>> {
        use docket_core::workflow::{Dependency, WorkflowNode};
        let wait = docket_core::workflow::waiting_run_at();
        let nodes = self.fetch(stmt!(batches, nodes), args![batch_id]).await?;
        let edges = self.fetch(stmt!(batches, edges), args![batch_id]).await?;
        let mut by_task: HashMap<i64, Vec<Dependency>> = HashMap::new();
        for e in &edges {
            let target = e.text("ref")?;
            by_task
                .entry(e.int("task_id")?)
                .or_default()
                .push(if e.flag("ignore_failure")? {
                    Dependency::Edge {
                        target,
                        ignore_failure: true,
                    }
                } else {
                    Dependency::Ref(target)
                });
        }
        nodes
            .iter()
            .map(|n| {
                let id = n.int("id")?;
                let state = decode::state(&format!("task {id}"), &n.text("state")?)?;
                Ok(WorkflowNode {
                    reference: n.text("ref")?,
                    id,
                    kind: n.text("kind")?,
                    waiting: state == TaskState::Scheduled && n.time("run_at")? == wait,
                    state,
                    depends_on: by_task.remove(&id).unwrap_or_default(),
                })
            })
            .collect()
    }

    async fn workflow_dep_results(
        &self,
        task_id: i64,
    ) -> Result<Vec<(String, Option<serde_json::Value>)>> {
        let rows = self
            .fetch(stmt!(batches, dep_results), args![task_id])
            .await?;
        rows.iter()
            .map(|r| Ok((r.text("ref")?, r.json_opt("result")?)))
            .collect()
    }
}
