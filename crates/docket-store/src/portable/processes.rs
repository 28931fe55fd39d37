//! Processes, written once over [`Driver`](crate::driver::Driver); the dialect is in the
//! statements and a few [`DriverTx`] hooks (batched events, batched breaks, PostgreSQL's
//! notification of finished steps, MySQL's archive table).

use super::leases::apply_failures;
use super::prelude::*;

#[async_trait]
impl<D: Driver> ProcessStore for D {
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
        again_up_to(self.contended_tries(), || process_create(self, p.clone())).await
    }

    async fn process_enqueue(&self, p: ProcessEnqueueParams<'_>) -> Result<Task> {
        again_up_to(self.contended_tries(), || process_enqueue(self, p.clone())).await
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
        again_up_to(self.contended_tries(), || process_commit(self, c.clone())).await
    }

    async fn process_fail(&self, f: ProcessFail) -> Result<LeaseOutcome> {
        again_up_to(self.contended_tries(), || process_fail(self, f.clone())).await
    }

    async fn process_remove(&self, p: ProcessRemoveParams<'_>) -> Result<()> {
        again_up_to(self.contended_tries(), || process_remove(self, p.clone())).await
    }

    async fn process_import(&self, p: ProcessImport) -> Result<()> {
        again_up_to(self.contended_tries(), || process_import(self, p.clone())).await
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
        again(|| collect_zombies(self, p.clone())).await
    }
}

/// A running task of a process step, locked, if `token` holds its lease.
async fn lock_step<T: DriverTx>(tx: &mut T, task_id: i64, token: &str) -> Result<T::Row> {
    // MariaDB keeps finished tasks in docket_tasks_done (mysql 0004): back where the
    // statements look (a no-op elsewhere).
    tx.unarchive(&[task_id]).await?;
    let row = tx
        .fetch_one(stmt!(tasks, lock), args![task_id])
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("task {task_id}")))?;
    let running = row.text("state")? == TaskState::Running.as_str();
    if !running || !docket_core::lease::holds(row.nonce("lease_token")?, token, task_id) {
        return Err(StoreError::LeaseLost);
    }
    Ok(row)
}

/// Inserts `t` in `tx`; [`StoreError::Conflict`] when its unique key is held.
async fn insert_task<T: DriverTx>(tx: &mut T, t: &ResolvedTask, now: Timestamp) -> Result<Task> {
    tx.insert_task(t, now).await?.ok_or_else(|| {
        StoreError::Conflict(format!(
            "unique_key {:?} is held by an unfinished task",
            t.unique_key.clone().unwrap_or_default()
        ))
    })
}

/// Whether an insert of a process found one there (`ON CONFLICT DO NOTHING` changed no row;
/// MySQL refused it as a duplicate).
fn exists(inserted: Result<u64>) -> Result<bool> {
    match inserted {
        Err(StoreError::Conflict(_)) => Ok(true),
        r => Ok(r? == 0),
    }
}

async fn process_create<D: Driver>(d: &D, p: ProcessCreateParams<'_>) -> Result<Task> {
    let ProcessCreateParams {
        namespace,
        id,
        init,
        now,
    } = p;
    let mut tx = d.begin().await?;
    let created = tx
        .execute(stmt!(processes, create), args![namespace, id, now])
        .await;
    if exists(created)? {
        return Err(StoreError::Conflict(format!(
            "process {namespace}/{id} exists"
        )));
    }
    let t = insert_task(&mut tx, &init, now).await?;
    tx.publish(namespace, id, &[Notice::Created { imported: false }], now)
        .await?;
    tx.commit().await?;
    Ok(t)
}

async fn process_enqueue<D: Driver>(d: &D, p: ProcessEnqueueParams<'_>) -> Result<Task> {
    let ProcessEnqueueParams {
        namespace,
        id,
        task,
        require,
        now,
    } = p;
    let mut tx = d.begin().await?;
    let status = tx
        .fetch_one(stmt!(processes, lock_status), args![namespace, id])
        .await?
        .map(|r| r.text("status"))
        .transpose()?;
    match status {
        None => return Err(StoreError::NotFound(format!("process {namespace}/{id}"))),
        Some(st) if st != require.as_str() => {
            return Err(StoreError::InvalidState(format!("process is {st}")));
        }
        Some(_) => {}
    }
    let t = insert_task(&mut tx, &task, now).await?;
    tx.commit().await?;
    Ok(t)
}

async fn process_commit<D: Driver>(d: &D, c: ProcessCommit) -> Result<()> {
    let mut tx = d.begin().await?;
    let key = docket_core::process::key_of(&c.namespace, &c.id);
    let step = lock_step(&mut tx, c.task_id, &c.token).await?;
    let queue = step.text("queue")?;
    let r = tx
        .fetch_one(stmt!(processes, lock_process), args![&c.namespace, &c.id])
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("process {}/{}", c.namespace, c.id)))?;
    let (last, was) = (r.int("last_event_id")?, r.text("status")?);
    let n = c.events.len() as i64;
    if n > 0 {
        let events: Vec<Event> = c
            .events
            .iter()
            .zip(last + 1..)
            .map(|(e, event_id)| Event {
                event_id,
                task_id: Some(c.task_id),
                timestamp: c.now,
                metadata: docket_core::process::event_metadata(&e.metadata),
                payload: e.payload.clone(),
            })
            .collect();
        tx.insert_events(&c.namespace, &c.id, &events).await?;
    }
    tx.execute(
        stmt!(processes, commit_status),
        args![
            &c.namespace,
            &c.id,
            c.now,
            c.aux_state.as_ref(),
            c.metadata.as_ref(),
            n
        ],
    )
    .await?;
    if !c.cancel_kinds.is_empty() {
        let kinds = serde_json::json!(c.cancel_kinds);
        tx.execute(
            stmt!(processes, cancel_timers),
            args![key.as_str(), c.now, &kinds],
        )
        .await?;
    }
    if let Some(t) = &c.timer {
        insert_task(&mut tx, t, c.now).await?;
    }
    for t in &c.also {
        insert_task(&mut tx, t, c.now).await?;
    }
    tx.execute(
        stmt!(processes, complete_step),
        args![c.task_id, c.now, &c.response],
    )
    .await?;
    let items = Notice::committed(&c.events, last + 1, c.now, was == "error");
    tx.publish(&c.namespace, &c.id, &items, c.now).await?;
    // The step's slot is free: its queue's claimers look again.
    tx.wake(&[queue]).await?;
    tx.steps_done(&[c.task_id]).await?;
    tx.commit().await
}

async fn process_fail<D: Driver>(d: &D, f: ProcessFail) -> Result<LeaseOutcome> {
    let mut tx = d.begin().await?;
    tx.unarchive(&[f.fail.id]).await?;
    let Some(row) = tx.fetch_one(stmt!(tasks, lock), args![f.fail.id]).await? else {
        return Ok(LeaseOutcome::NotFound);
    };
    let t = row::task(&row)?;
    let check = docket_core::lease::check(&t, row.nonce("lease_token")?, &f.fail.token, f.now);
    if matches!(check, LeaseCheck::Cancelled | LeaseCheck::Lost) {
        return Ok(check.refusal());
    }
    let d = (f.fail_rule)(&t, f.now, f.fail.retry_in, f.fail.permanent);
    let failure = Failure::new(&t, d, &f.fail.error, None, f.now);
    let outcome = failure.outcome();
    let gave_up = matches!(d, FailDecision::Discard);
    apply_failures(&mut tx, &[failure], None).await?;
    let result = serde_json::json!({"error": f.error_value});
    tx.execute(stmt!(tasks, set_result), args![f.fail.id, &result])
        .await?;
    if let (true, ProcessBreak::Break { corrupted }) = (gave_up, f.on_give_up) {
        let broken = Broken {
            namespace: f.namespace.clone(),
            id: f.id.clone(),
            task_id: f.fail.id,
            corrupted_by: corrupted.then_some(f.fail.id),
        };
        break_process(&mut tx, &broken, &f.fail.error, f.now).await?;
    }
    tx.wake(std::slice::from_ref(&t.queue)).await?;
    tx.steps_done(&[f.fail.id]).await?;
    tx.commit().await?;
    Ok(outcome)
}

async fn process_remove<D: Driver>(d: &D, p: ProcessRemoveParams<'_>) -> Result<()> {
    let ProcessRemoveParams {
        task_id,
        token,
        namespace,
        id,
        now,
    } = p;
    let mut tx = d.begin().await?;
    let step = lock_step(&mut tx, task_id, token).await?;
    let queue = step.text("queue")?;
    tx.execute(stmt!(processes, remove_events), args![namespace, id])
        .await?;
    tx.execute(stmt!(processes, remove), args![namespace, id])
        .await?;
    let key = docket_core::process::key_of(namespace, id);
    tx.execute(stmt!(processes, remove_unfinished), args![key.as_str()])
        .await?;
    tx.execute(stmt!(processes, detach_finished), args![key.as_str()])
        .await?;
    tx.detach_archived(&key).await?;
    tx.publish(namespace, id, &[Notice::Removed], now).await?;
    tx.wake(&[queue]).await?;
    tx.commit().await
}

async fn process_import<D: Driver>(d: &D, p: ProcessImport) -> Result<()> {
    let pr = &p.process;
    let mut tx = d.begin().await?;
    let created = tx
        .execute(
            stmt!(processes, import),
            args![
                &pr.namespace,
                &pr.id,
                pr.status.as_str(),
                pr.previous_status.map(|s| s.as_str()),
                pr.status_changed_at,
                pr.detail.as_deref(),
                &pr.aux_state,
                &pr.metadata,
                pr.created_at,
                p.history.len() as i64,
            ],
        )
        .await;
    if exists(created)? {
        return Err(StoreError::Conflict(format!(
            "process {}/{} exists",
            pr.namespace, pr.id
        )));
    }
    if !p.history.is_empty() {
        // An imported history has no steps here.
        let events: Vec<Event> = p
            .history
            .iter()
            .map(|e| Event {
                task_id: None,
                ..e.clone()
            })
            .collect();
        tx.insert_events(&pr.namespace, &pr.id, &events).await?;
    }
    if let Some(t) = &p.timer {
        insert_task(&mut tx, t, p.now).await?;
    }
    tx.publish(
        &pr.namespace,
        &pr.id,
        &[Notice::Created { imported: true }],
        p.now,
    )
    .await?;
    tx.commit().await
}

async fn collect_zombies<D: Driver>(d: &D, p: ProcessCollectZombiesParams) -> Result<u64> {
    let ProcessCollectZombiesParams {
        now,
        limit,
        fail_rule,
        on_give_up,
        detail,
    } = p;
    let mut tx = d.begin().await?;
    let rows = tx
        .fetch(stmt!(processes, zombies), args![now, limit])
        .await?;
    let mut queues = vec![];
    let mut failed = Vec::with_capacity(rows.len());
    let mut broken = Vec::with_capacity(rows.len());
    let mut ids = Vec::with_capacity(rows.len());
    for r in &rows {
        let t = row::task(r)?;
        ids.push(t.id);
        let Some(docket_core::ProcessRef { namespace, id }) = t.process.clone() else {
            continue;
        };
        let d = fail_rule(&t, now, None, false);
        if let (FailDecision::Discard, ProcessBreak::Break { corrupted }) = (&d, on_give_up) {
            broken.push(Broken {
                namespace,
                id,
                task_id: t.id,
                corrupted_by: corrupted.then_some(t.id),
            });
        }
        queues.push(t.queue.clone());
        failed.push(Failure::new(&t, d, &detail, None, now));
    }
    apply_failures(&mut tx, &failed, None).await?;
    if !tx.break_processes(&broken, &detail, now).await? {
        for b in &broken {
            break_process(&mut tx, b, &detail, now).await?;
        }
    }
    queues.sort();
    queues.dedup();
    tx.wake(&queues).await?;
    tx.steps_done(&ids).await?;
    tx.commit().await?;
    Ok(rows.len() as u64)
}

/// Puts process `b` in `error` (`detail`, `corrupted_by` when given), cancels its waiting
/// tasks and publishes `failed`: for a failed step given up on and for a zombie.
///
/// # Errors
/// The database failed.
pub(crate) async fn break_process<T: DriverTx>(
    tx: &mut T,
    b: &Broken,
    detail: &str,
    now: Timestamp,
) -> Result<()> {
    tx.execute(
        stmt!(processes, break_process),
        args![&b.namespace, &b.id, now, detail, b.corrupted_by],
    )
    .await?;
    let key = docket_core::process::key_of(&b.namespace, &b.id);
    tx.execute(stmt!(processes, cancel_waiting), args![key.as_str(), now])
        .await?;
    let failed = Notice::Failed {
        detail: detail.to_string(),
        task_id: b.task_id,
    };
    tx.publish(&b.namespace, &b.id, &[failed], now).await
}

/// [`DriverTx::insert_events`] as statement `s` (`processes.insert_event`) once per event
/// (SQLite, MySQL).
///
/// # Errors
/// The database failed.
pub(crate) async fn insert_each_event<T: DriverTx>(
    tx: &mut T,
    s: crate::driver::StmtName,
    namespace: &str,
    id: &str,
    events: &[Event],
) -> Result<()> {
    for e in events {
        tx.execute(
            s,
            args![
                namespace,
                id,
                e.event_id,
                e.task_id,
                e.timestamp,
                &e.metadata,
                &e.payload
            ],
        )
        .await?;
    }
    Ok(())
}
