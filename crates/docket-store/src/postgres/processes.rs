//! PostgreSQL: namespaces and durable processes (progressor).

use super::*;

#[async_trait]
impl crate::driver::ProcessDriver for PgStore {
    async fn process_create(&self, p: ProcessCreateParams<'_>) -> Result<Task> {
        let ProcessCreateParams {
            namespace,
            id,
            init,
            now,
        } = p;
        let mut tx = self.pool.begin().await?;
        let created: Option<String> = sqlx::query_scalar(sql!(processes, create))
            .bind(namespace)
            .bind(id)
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?;
        if created.is_none() {
            return Err(StoreError::Conflict(format!(
                "process {namespace}/{id} exists"
            )));
        }
        let t = Self::insert_one(&mut tx, &self.schema, init, now).await?;
        self.publish(
            &mut tx,
            namespace,
            id,
            &[Notice::Created { imported: false }],
            now,
        )
        .await?;
        tx.commit().await?;
        Ok(t)
    }

    async fn process_enqueue(&self, p: ProcessEnqueueParams<'_>) -> Result<Task> {
        let p = &p;
        again(|| async move {
            let p = p.clone();
            let ProcessEnqueueParams {
                namespace,
                id,
                task,
                require,
                now,
            } = p;
            let mut tx = self.pool.begin().await?;
            // FOR SHARE: a concurrent status change (which locks FOR UPDATE) waits for us, and then
            // sees — and cancels — the task we enqueue.
            let status: Option<String> = sqlx::query_scalar(
                "SELECT status FROM docket_processes WHERE namespace = $1 AND id = $2 FOR SHARE",
            )
            .bind(namespace)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
            match status {
                None => return Err(StoreError::NotFound(format!("process {namespace}/{id}"))),
                Some(st) if st != require.as_str() => {
                    return Err(StoreError::InvalidState(format!("process is {st}")));
                }
                Some(_) => {}
            }
            let t = Self::insert_one(&mut tx, &self.schema, task, now).await?;
            tx.commit().await?;
            Ok(t)
        })
        .await
    }

    async fn process_commit(&self, c: ProcessCommit) -> Result<()> {
        let c = &c;
        again(|| async move {
            let c = c.clone();
        let mut tx = self.pool.begin().await?;
        let key = docket_core::process::key_of(&c.namespace, &c.id);
        let row = sqlx::query(
            "SELECT id, state, lease_token, queue FROM docket_tasks WHERE id = $1 FOR UPDATE",
        )
        .bind(c.task_id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("task {}", c.task_id)))?;
        let state: String = row.try_get("state")?;
        let queue: String = row.try_get("queue")?;
        if state != "running" || token_of(&row)?.as_deref() != Some(c.token.as_str()) {
            return Err(StoreError::LeaseLost);
        }
        let (last, was): (i64, String) = sqlx::query_as(
            "SELECT last_event_id, status FROM docket_processes WHERE namespace = $1 AND id = $2 FOR UPDATE",
        )
        .bind(&c.namespace)
        .bind(&c.id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("process {}/{}", c.namespace, c.id)))?;
        let n = c.events.len() as i64;
        if n > 0 {
            let ids: Vec<i64> = (1..=n).map(|i| last + i).collect();
            let metas: Vec<Value> = c
                .events
                .iter()
                .map(|e| docket_core::process::event_metadata(&e.metadata))
                .collect();
            let payloads: Vec<Value> = c.events.iter().map(|e| e.payload.clone()).collect();
            sqlx::query(sql!(processes, append_events))
                .bind(&c.namespace)
                .bind(&c.id)
                .bind(c.task_id)
                .bind(c.now)
                .bind(&ids)
                .bind(&metas)
                .bind(&payloads)
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query(sql!(processes, commit_status))
            .bind(&c.namespace)
            .bind(&c.id)
            .bind(c.now)
            .bind(&c.aux_state)
            .bind(&c.metadata)
            .bind(n)
            .execute(&mut *tx)
            .await?;
        if !c.cancel_kinds.is_empty() {
            sqlx::query(sql!(processes, cancel_timers))
                .bind(&key)
                .bind(c.now)
                .bind(&c.cancel_kinds)
                .execute(&mut *tx)
                .await?;
        }
        if let Some(t) = c.timer {
            Self::insert_one(&mut tx, &self.schema, *t, c.now).await?;
        }
        for t in c.also {
            Self::insert_one(&mut tx, &self.schema, t, c.now).await?;
        }
        sqlx::query(sql!(processes, complete_step))
            .bind(c.task_id)
            .bind(c.now)
            .bind(&c.response)
            .execute(&mut *tx)
            .await?;
        let items = Notice::committed(&c.events, last + 1, c.now, was == "error");
        self.publish(&mut tx, &c.namespace, &c.id, &items, c.now)
            .await?;
        self.notify(&mut tx, &[queue]).await?;
        self.notify_done(&mut tx, &[c.task_id]).await?;
        tx.commit().await?;
        Ok(())
        })
        .await
    }

    async fn process_fail(&self, f: ProcessFail) -> Result<LeaseOutcome> {
        let f = &f;
        again(|| async move {
            let f = f.clone();
            let mut tx = self.pool.begin().await?;
            let sql = sql!(tasks, lock);
            let Some(row) = sqlx::query(sql)
                .bind(f.fail.id)
                .fetch_optional(&mut *tx)
                .await?
            else {
                return Ok(LeaseOutcome::NotFound);
            };
            let t = decode(&row)?;
            let check =
                docket_core::lease::check(&t, row.nonce("lease_token")?, &f.fail.token, f.now);
            if matches!(check, LeaseCheck::Cancelled | LeaseCheck::Lost) {
                return Ok(check.refusal());
            }
            let d = (f.fail_rule)(&t, f.now, f.fail.retry_in, f.fail.permanent);
            let failure = Failure::new(&t, d, &f.fail.error, None, f.now);
            let outcome = failure.outcome();
            let queue = t.queue.clone();
            let gave_up = matches!(d, FailDecision::Discard);
            Self::apply_failures(&mut tx, &[failure], None).await?;
            sqlx::query("UPDATE docket_tasks SET result = $2 WHERE id = $1")
                .bind(f.fail.id)
                .bind(serde_json::json!({"error": f.error_value}))
                .execute(&mut *tx)
                .await?;
            if let (true, ProcessBreak::Break { corrupted }) = (gave_up, f.on_give_up) {
                let corrupted_by = corrupted.then_some(f.fail.id);
                self.break_process(
                    &mut tx,
                    &f.namespace,
                    &f.id,
                    &f.fail.error,
                    f.fail.id,
                    corrupted_by,
                    f.now,
                )
                .await?;
            }
            self.notify(&mut tx, &[queue]).await?;
            self.notify_done(&mut tx, &[f.fail.id]).await?;
            tx.commit().await?;
            Ok(outcome)
        })
        .await
    }

    async fn process_remove(&self, p: ProcessRemoveParams<'_>) -> Result<()> {
        let p = &p;
        again(|| async move {
            let p = p.clone();
            let ProcessRemoveParams {
                task_id,
                token,
                namespace,
                id,
                now: _now,
            } = p;
            let mut tx = self.pool.begin().await?;
            let row = sqlx::query(
                "SELECT id, state, lease_token FROM docket_tasks WHERE id = $1 FOR UPDATE",
            )
            .bind(task_id)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("task {task_id}")))?;
            let state: String = row.try_get("state")?;
            if state != "running" || token_of(&row)?.as_deref() != Some(token) {
                return Err(StoreError::LeaseLost);
            }
            sqlx::query("DELETE FROM docket_events WHERE namespace = $1 AND process_id = $2")
                .bind(namespace)
                .bind(id)
                .execute(&mut *tx)
                .await?;
            sqlx::query("DELETE FROM docket_processes WHERE namespace = $1 AND id = $2")
                .bind(namespace)
                .bind(id)
                .execute(&mut *tx)
                .await?;
            for sql in [REMOVE_UNFINISHED_PG, DETACH_FINISHED_PG] {
                sqlx::query(sql)
                    .bind(docket_core::process::key_of(namespace, id))
                    .execute(&mut *tx)
                    .await?;
            }
            self.publish(&mut tx, namespace, id, &[Notice::Removed], _now)
                .await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn process_import(&self, p: ProcessImport) -> Result<()> {
        let pr = &p.process;
        let mut tx = self.pool.begin().await?;
        let created: Option<String> = sqlx::query_scalar(sql!(processes, import))
            .bind(&pr.namespace)
            .bind(&pr.id)
            .bind(pr.status.as_str())
            .bind(pr.previous_status.map(|s| s.as_str()))
            .bind(pr.status_changed_at)
            .bind(&pr.detail)
            .bind(&pr.aux_state)
            .bind(&pr.metadata)
            .bind(pr.created_at)
            .bind(p.history.len() as i64)
            .fetch_optional(&mut *tx)
            .await?;
        if created.is_none() {
            return Err(StoreError::Conflict(format!(
                "process {}/{} exists",
                pr.namespace, pr.id
            )));
        }
        if !p.history.is_empty() {
            let ids: Vec<i64> = p.history.iter().map(|e| e.event_id).collect();
            let times: Vec<Timestamp> = p.history.iter().map(|e| e.timestamp).collect();
            let metas: Vec<Value> = p.history.iter().map(|e| e.metadata.clone()).collect();
            let payloads: Vec<Value> = p.history.iter().map(|e| e.payload.clone()).collect();
            sqlx::query(sql!(processes, import_events))
                .bind(&pr.namespace)
                .bind(&pr.id)
                .bind(&ids)
                .bind(&times)
                .bind(&metas)
                .bind(&payloads)
                .execute(&mut *tx)
                .await?;
        }
        if let Some(t) = p.timer {
            Self::insert_one(&mut tx, &self.schema, t, p.now).await?;
        }
        self.publish(
            &mut tx,
            &pr.namespace,
            &pr.id,
            &[Notice::Created { imported: true }],
            p.now,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn process_collect_zombies(&self, p: ProcessCollectZombiesParams) -> Result<u64> {
        let p = &p;
        again(|| async move {
            let p = p.clone();
            let ProcessCollectZombiesParams {
                now,
                limit,
                fail_rule,
                on_give_up,
                detail,
            } = p;
            let mut tx = self.pool.begin().await?;
            let sql = sql!(processes, zombies);
            let rows = sqlx::query(sql)
                .bind(now)
                .bind(limit)
                .fetch_all(&mut *tx)
                .await?;
            let mut queues = vec![];
            let mut failed = Vec::with_capacity(rows.len());
            let mut zombies = Vec::with_capacity(rows.len());
            for r in &rows {
                let t = decode(r)?;
                let Some(docket_core::ProcessRef {
                    namespace: ns,
                    id: pid,
                }) = t.process.clone()
                else {
                    continue;
                };
                let d = fail_rule(&t, now, None, false);
                if let (FailDecision::Discard, ProcessBreak::Break { corrupted }) = (&d, on_give_up)
                {
                    zombies.push((ns, pid, t.id, corrupted.then_some(t.id)));
                }
                queues.push(t.queue.clone());
                failed.push(Failure::new(&t, d, &detail, None, now));
            }
            Self::apply_failures(&mut tx, &failed, None).await?;
            self.break_zombies(&mut tx, &zombies, &detail, now).await?;
            queues.sort();
            queues.dedup();
            self.notify(&mut tx, &queues).await?;
            let ids: Vec<i64> = rows.iter().map(|r| r.get::<i64, _>("id")).collect();
            self.notify_done(&mut tx, &ids).await?;
            tx.commit().await?;
            Ok(rows.len() as u64)
        })
        .await
    }
}

/// A removed process's unfinished tasks (timers, queued requests, the `remove` task itself) go.
const REMOVE_UNFINISHED_PG: &str = "DELETE FROM docket_tasks WHERE concurrency_key = $1 AND state NOT IN ('completed', 'discarded', 'cancelled')";
/// Its finished tasks stay, detached from the process (a caller on any node still reads its
/// answer; a new process of the same id starts with a clean trace and idempotency keys), as
/// plain finished tasks that the retention prune takes like any other.
const DETACH_FINISHED_PG: &str =
    "UPDATE docket_tasks SET concurrency_key = NULL, unique_key = NULL, namespace = NULL, process_id = NULL WHERE concurrency_key = $1";
