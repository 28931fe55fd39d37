//! MySQL: namespaces and durable processes (progressor).

use super::*;

#[async_trait]
impl crate::driver::ProcessDriver for MySqlStore {
    async fn process_create(&self, p: ProcessCreateParams<'_>) -> Result<Task> {
        let ProcessCreateParams {
            namespace,
            id,
            init,
            now,
        } = p;
        let mut tx = self.begin().await?;
        let created = sqlx::query(sql!(processes, create))
            .bind(namespace)
            .bind(id)
            .bind(dt(now))
            .bind(dt(now))
            .execute(&mut *tx)
            .await;
        match created {
            Err(sqlx::Error::Database(d)) if d.is_unique_violation() => {
                return Err(StoreError::Conflict(format!(
                    "process {namespace}/{id} exists"
                )));
            }
            r => r?,
        };
        let queue = init.queue.clone();
        let t = Self::insert_one(&mut tx, init, now).await?;
        Self::publish(
            &mut tx,
            namespace,
            id,
            &[Notice::Created { imported: false }],
            now,
        )
        .await?;
        tx.commit().await?;
        self.wake_queues([&queue]);
        Ok(t)
    }

    async fn process_enqueue(&self, p: ProcessEnqueueParams<'_>) -> Result<Task> {
        let ProcessEnqueueParams {
            namespace,
            id,
            task,
            require,
            now,
        } = p;
        let mut tx = self.begin().await?;
        // Locks the process row: a concurrent removal or status change waits for this insert.
        let status = sqlx::query(
            "SELECT status FROM docket_processes WHERE namespace = ? AND id = ? FOR UPDATE",
        )
        .bind(namespace)
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?
        .map(|r| text(&r, "status"))
        .transpose()?;
        match status {
            None => return Err(StoreError::NotFound(format!("process {namespace}/{id}"))),
            Some(st) if st != require.as_str() => {
                return Err(StoreError::InvalidState(format!("process is {st}")));
            }
            Some(_) => {}
        }
        let queue = task.queue.clone();
        let t = Self::insert_one(&mut tx, task, now).await?;
        tx.commit().await?;
        self.wake_queues([&queue]);
        Ok(t)
    }

    async fn process_commit(&self, c: ProcessCommit) -> Result<()> {
        let mut tx = self.begin().await?;
        let key = docket_core::process::key_of(&c.namespace, &c.id);
        let (t, nonce) = Self::get_in(&mut tx, c.task_id, true)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("task {}", c.task_id)))?;
        if t.state != TaskState::Running || !lease::holds(nonce, &c.token, t.id) {
            return Err(StoreError::LeaseLost);
        }
        let r = sqlx::query(sql!(processes, lock_process))
            .bind(&c.namespace)
            .bind(&c.id)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("process {}/{}", c.namespace, c.id)))?;
        let last: i64 = r.try_get("last_event_id")?;
        let was = text(&r, "status")?;
        let n = c.events.len() as i64;
        for (i, e) in c.events.iter().enumerate() {
            let meta = docket_core::process::event_metadata(&e.metadata);
            sqlx::query(sql!(processes, append_event))
                .bind(&c.namespace)
                .bind(&c.id)
                .bind(last + 1 + i as i64)
                .bind(c.task_id)
                .bind(dt(c.now))
                .bind(meta.to_string())
                .bind(e.payload.to_string())
                .execute(&mut *tx)
                .await?;
        }
        // MySQL assigns left to right: every test of `status` comes before status changes.
        sqlx::query(sql!(processes, commit_status))
            .bind(dt(c.now))
            .bind(c.aux_state.as_ref().map(|v| v.to_string()))
            .bind(c.metadata.as_ref().map(|v| v.to_string()))
            .bind(n)
            .bind(&c.namespace)
            .bind(&c.id)
            .execute(&mut *tx)
            .await?;
        if !c.cancel_kinds.is_empty() {
            let sql = fill(
                sql!(processes, cancel_timers),
                &[("kinds", &marks(c.cancel_kinds.len()))],
            );
            let mut q = sqlx::query(&sql).bind(dt(c.now)).bind(&key);
            for k in &c.cancel_kinds {
                q = q.bind(k);
            }
            q.execute(&mut *tx).await?;
        }
        let mut queues = vec![t.queue.clone()];
        if let Some(t) = c.timer {
            queues.push(t.queue.clone());
            Self::insert_one(&mut tx, *t, c.now).await?;
        }
        for t in c.also {
            queues.push(t.queue.clone());
            Self::insert_one(&mut tx, t, c.now).await?;
        }
        sqlx::query(sql!(processes, complete_step))
            .bind(dt(c.now))
            .bind(c.response.to_string())
            .bind(c.task_id)
            .execute(&mut *tx)
            .await?;
        let items = Notice::committed(&c.events, last + 1, c.now, was == "error");
        Self::publish(&mut tx, &c.namespace, &c.id, &items, c.now).await?;
        tx.commit().await?;
        self.wake_queues(&queues);
        Ok(())
    }

    async fn process_fail(&self, f: ProcessFail) -> Result<LeaseOutcome> {
        let mut tx = self.begin().await?;
        let Some((t, nonce)) = Self::get_in(&mut tx, f.fail.id, true).await? else {
            return Ok(LeaseOutcome::NotFound);
        };
        let check = lease::check(&t, nonce, &f.fail.token, f.now);
        if matches!(check, LeaseCheck::Cancelled | LeaseCheck::Lost) {
            return Ok(check.refusal());
        }
        let d = (f.fail_rule)(&t, f.now, f.fail.retry_in, f.fail.permanent);
        let failure = Failure::new(&t, d, &f.fail.error, None, f.now);
        let outcome = failure.outcome();
        let queue = t.queue.clone();
        let gave_up = matches!(d, FailDecision::Discard);
        Self::apply_failures(&mut tx, &[failure], None).await?;
        sqlx::query("UPDATE docket_tasks SET result = ? WHERE id = ?")
            .bind(serde_json::json!({"error": f.error_value}).to_string())
            .bind(f.fail.id)
            .execute(&mut *tx)
            .await?;
        if let (true, ProcessBreak::Break { corrupted }) = (gave_up, f.on_give_up) {
            let corrupted_by = corrupted.then_some(f.fail.id);
            Self::break_process(
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
        tx.commit().await?;
        self.wake_queues([&queue]);
        Ok(outcome)
    }

    async fn process_remove(&self, p: ProcessRemoveParams<'_>) -> Result<()> {
        let ProcessRemoveParams {
            task_id,
            token,
            namespace,
            id,
            now,
        } = p;
        let mut tx = self.begin().await?;
        let (t, nonce) = Self::get_in(&mut tx, task_id, true)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("task {task_id}")))?;
        if t.state != TaskState::Running || !lease::holds(nonce, token, t.id) {
            return Err(StoreError::LeaseLost);
        }
        sqlx::query("DELETE FROM docket_events WHERE namespace = ? AND process_id = ?")
            .bind(namespace)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM docket_processes WHERE namespace = ? AND id = ?")
            .bind(namespace)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        for sql in [
            "DELETE FROM docket_tasks WHERE concurrency_key = ? AND state NOT IN ('completed', 'discarded', 'cancelled')",
            // Finished tasks stay, detached, until the retention prune: see the PostgreSQL store.
            "UPDATE docket_tasks SET concurrency_key = NULL, unique_key = NULL, namespace = NULL, process_id = NULL WHERE concurrency_key = ?",
            "UPDATE docket_tasks_done SET concurrency_key = NULL, unique_key = NULL, namespace = NULL, process_id = NULL WHERE concurrency_key = ?",
        ] {
            sqlx::query(sql)
                .bind(docket_core::process::key_of(namespace, id))
                .execute(&mut *tx)
                .await?;
        }
        Self::publish(&mut tx, namespace, id, &[Notice::Removed], now).await?;
        tx.commit().await?;
        self.wake_queues([&t.queue]);
        Ok(())
    }

    async fn process_import(&self, p: ProcessImport) -> Result<()> {
        let pr = &p.process;
        let mut tx = self.begin().await?;
        let created = sqlx::query(sql!(processes, import))
            .bind(&pr.namespace)
            .bind(&pr.id)
            .bind(pr.status.as_str())
            .bind(pr.previous_status.map(|s| s.as_str()))
            .bind(dt(pr.status_changed_at))
            .bind(&pr.detail)
            .bind(pr.aux_state.to_string())
            .bind(pr.metadata.to_string())
            .bind(dt(pr.created_at))
            .bind(p.history.len() as i64)
            .execute(&mut *tx)
            .await;
        match created {
            Err(sqlx::Error::Database(d)) if d.is_unique_violation() => {
                return Err(StoreError::Conflict(format!(
                    "process {}/{} exists",
                    pr.namespace, pr.id
                )));
            }
            r => r?,
        };
        for e in &p.history {
            sqlx::query(sql!(processes, import_event))
                .bind(&pr.namespace)
                .bind(&pr.id)
                .bind(e.event_id)
                .bind(dt(e.timestamp))
                .bind(e.metadata.to_string())
                .bind(e.payload.to_string())
                .execute(&mut *tx)
                .await?;
        }
        let queue = p.timer.as_ref().map(|t| t.queue.clone());
        if let Some(t) = p.timer {
            Self::insert_one(&mut tx, t, p.now).await?;
        }
        Self::publish(
            &mut tx,
            &pr.namespace,
            &pr.id,
            &[Notice::Created { imported: true }],
            p.now,
        )
        .await?;
        tx.commit().await?;
        if let Some(q) = queue {
            self.wake_queues([&q]);
        }
        Ok(())
    }

    async fn process_collect_zombies(&self, p: ProcessCollectZombiesParams) -> Result<u64> {
        let ProcessCollectZombiesParams {
            now,
            limit,
            fail_rule,
            on_give_up,
            detail,
        } = p;
        let mut tx = self.begin().await?;
        let sql = sql!(processes, zombies);
        let rows = sqlx::query(sql)
            .bind(dt(now))
            .bind(limit)
            .fetch_all(&mut *tx)
            .await?;
        let mut queues = vec![];
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
            let gave_up = matches!(d, FailDecision::Discard);
            let f = Failure::new(&t, d, &detail, None, now);
            Self::apply_failures(&mut tx, &[f], None).await?;
            if let (true, ProcessBreak::Break { corrupted }) = (gave_up, on_give_up) {
                let by = corrupted.then_some(t.id);
                Self::break_process(&mut tx, &ns, &pid, &detail, t.id, by, now).await?;
            }
            queues.push(t.queue.clone());
        }
        tx.commit().await?;
        self.wake_queues(&queues);
        Ok(rows.len() as u64)
    }
}
