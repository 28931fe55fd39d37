//! PostgreSQL: namespaces and durable processes (progressor).

use super::*;

#[async_trait]
impl ProcessStore for PgStore {
    async fn namespace_put(&self, p: NamespacePutParams<'_>) -> Result<()> {
        let NamespacePutParams { name, config, now } = p;
        sqlx::query(
            "INSERT INTO docket_namespaces (name, config, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (name) DO UPDATE SET config = excluded.config, updated_at = excluded.updated_at",
        )
        .bind(name)
        .bind(config)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn namespace_list(&self) -> Result<Vec<NamespaceRecord>> {
        let rows: Vec<(String, Value)> =
            sqlx::query_as("SELECT name, config FROM docket_namespaces ORDER BY name")
                .fetch_all(&self.pool)
                .await?;
        Ok(rows
            .into_iter()
            .map(|(name, config)| NamespaceRecord { name, config })
            .collect())
    }

    async fn process_create(&self, p: ProcessCreateParams<'_>) -> Result<Task> {
        let ProcessCreateParams {
            namespace,
            id,
            init,
            now,
        } = p;
        let mut tx = self.pool.begin().await?;
        let created: Option<String> = sqlx::query_scalar(
            "INSERT INTO docket_processes (namespace, id, status, status_changed_at, created_at) \
             VALUES ($1, $2, 'init', $3, $3) ON CONFLICT DO NOTHING RETURNING id",
        )
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
        let t = self.insert_one(&mut tx, init, now).await?;
        self.publish(
            &mut tx,
            namespace,
            id,
            &[("created", None, serde_json::json!({}))],
            now,
        )
        .await?;
        tx.commit().await?;
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
        let t = self.insert_one(&mut tx, task, now).await?;
        tx.commit().await?;
        Ok(t)
    }

    async fn process_get(&self, p: ProcessGetParams<'_>) -> Result<Option<ProcessWithHistory>> {
        let ProcessGetParams {
            namespace,
            id,
            range,
        } = p;
        use docket_core::process::{Direction, Event};
        let Some(r) =
            sqlx::query("SELECT * FROM docket_processes WHERE namespace = $1 AND id = $2")
                .bind(namespace)
                .bind(id)
                .fetch_optional(&self.pool)
                .await?
        else {
            return Ok(None);
        };
        let p = decode_process(&r)?;
        let offset = range.offset.filter(|o| *o > 0);
        let sql = match range.direction {
            Direction::Forward => {
                "SELECT * FROM docket_events WHERE namespace = $1 AND process_id = $2 \
                 AND ($3::bigint IS NULL OR event_id > $3) ORDER BY event_id LIMIT $4"
            }
            Direction::Backward => {
                "SELECT * FROM docket_events WHERE namespace = $1 AND process_id = $2 \
                 AND ($3::bigint IS NULL OR event_id < $3) ORDER BY event_id DESC LIMIT $4"
            }
        };
        let rows = sqlx::query(sql)
            .bind(namespace)
            .bind(id)
            .bind(offset)
            .bind(range.limit.unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await?;
        let events = rows
            .iter()
            .map(|e| {
                Ok(Event {
                    event_id: e.try_get("event_id")?,
                    task_id: e.try_get("task_id")?,
                    timestamp: e.try_get("timestamp")?,
                    metadata: e.try_get("metadata")?,
                    payload: e.try_get("payload")?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(ProcessWithHistory {
            process: p,
            history: events,
        }))
    }

    async fn process_commit(&self, c: ProcessCommit) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let key = docket_core::process::key_of(&c.namespace, &c.id);
        let row = sqlx::query(
            "SELECT state, lease_token, queue FROM docket_tasks WHERE id = $1 FOR UPDATE",
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
                .map(|e| {
                    if e.metadata.is_null() {
                        serde_json::json!({})
                    } else {
                        e.metadata.clone()
                    }
                })
                .collect();
            let payloads: Vec<Value> = c.events.iter().map(|e| e.payload.clone()).collect();
            sqlx::query(
                "INSERT INTO docket_events (namespace, process_id, event_id, task_id, timestamp, metadata, payload) \
                 SELECT $1, $2, e, $3, $4, m, p FROM unnest($5::bigint[], $6::jsonb[], $7::jsonb[]) AS x(e, m, p)",
            )
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
        sqlx::query(
            "UPDATE docket_processes SET \
               previous_status = CASE WHEN status <> 'running' THEN status ELSE previous_status END, \
               status_changed_at = CASE WHEN status <> 'running' THEN $3 ELSE status_changed_at END, \
               detail = CASE WHEN status = 'error' THEN NULL ELSE detail END, \
               corrupted_by = CASE WHEN status = 'error' THEN NULL ELSE corrupted_by END, \
               status = 'running', aux_state = COALESCE($4, aux_state), metadata = COALESCE($5, metadata), \
               last_event_id = last_event_id + $6 \
             WHERE namespace = $1 AND id = $2",
        )
        .bind(&c.namespace)
        .bind(&c.id)
        .bind(c.now)
        .bind(&c.aux_state)
        .bind(&c.metadata)
        .bind(n)
        .execute(&mut *tx)
        .await?;
        if !matches!(c.timer, TimerChange::Keep) {
            sqlx::query(
                "UPDATE docket_tasks SET state = 'cancelled', finished_at = $2 WHERE concurrency_key = $1 \
                 AND kind IN ('timeout', 'remove') AND state IN ('scheduled', 'available', 'retryable')",
            )
            .bind(&key)
            .bind(c.now)
            .execute(&mut *tx)
            .await?;
        }
        if let TimerChange::Set(t) = c.timer {
            self.insert_one(&mut tx, *t, c.now).await?;
        }
        for t in c.also {
            self.insert_one(&mut tx, t, c.now).await?;
        }
        sqlx::query(
            "UPDATE docket_tasks SET state = 'completed', finished_at = $2, result = $3, lease_expires_at = NULL \
             WHERE id = $1",
        )
        .bind(c.task_id)
        .bind(c.now)
        .bind(&c.response)
        .execute(&mut *tx)
        .await?;
        let mut items: Vec<(&str, Option<i64>, Value)> = c
            .events
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let event_id = last + 1 + i as i64;
                let meta = if e.metadata.is_null() { serde_json::json!({}) } else { e.metadata.clone() };
                let data = serde_json::json!({"event_id": event_id, "timestamp": c.now, "metadata": meta, "payload": e.payload});
                ("event", Some(event_id), data)
            })
            .collect();
        if was == "error" {
            items.push(("repaired", None, serde_json::json!({})));
        }
        self.publish(&mut tx, &c.namespace, &c.id, &items, c.now)
            .await?;
        self.notify(&mut tx, &[queue]).await?;
        self.notify_done(&mut tx, &[c.task_id]).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn process_fail(&self, f: ProcessFail) -> Result<LeaseOutcome> {
        let mut tx = self.pool.begin().await?;
        let sql = format!("SELECT {COLS} FROM docket_tasks WHERE id = $1 FOR UPDATE");
        let Some(row) = sqlx::query(&sql)
            .bind(f.fail.id)
            .fetch_optional(&mut *tx)
            .await?
        else {
            return Ok(LeaseOutcome::NotFound);
        };
        let t = decode(&row)?;
        let held = token_of(&row)?.as_deref() == Some(f.fail.token.as_str());
        if !held || t.state != TaskState::Running {
            return lease_refusal(&row, &f.fail.token);
        }
        let d = (f.fail_rule)(&t, f.now, f.fail.retry_in, f.fail.permanent);
        let outcome = outcome_for(&d, &t);
        let e = error_entry(&t, &f.fail.error, None, f.now);
        let queue = t.queue.clone();
        let gave_up = matches!(d, FailDecision::Discard);
        Self::apply_failures(&mut tx, &[(t, d, e)], f.now).await?;
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
    }

    async fn process_remove(&self, p: ProcessRemoveParams<'_>) -> Result<()> {
        let ProcessRemoveParams {
            task_id,
            token,
            namespace,
            id,
            now: _now,
        } = p;
        let mut tx = self.pool.begin().await?;
        let row =
            sqlx::query("SELECT state, lease_token FROM docket_tasks WHERE id = $1 FOR UPDATE")
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
        sqlx::query("DELETE FROM docket_tasks WHERE concurrency_key = $1")
            .bind(docket_core::process::key_of(namespace, id))
            .execute(&mut *tx)
            .await?;
        self.publish(
            &mut tx,
            namespace,
            id,
            &[("removed", None, serde_json::json!({}))],
            _now,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn process_import(&self, p: ProcessImport) -> Result<()> {
        let pr = &p.process;
        let mut tx = self.pool.begin().await?;
        let created: Option<String> = sqlx::query_scalar(
            "INSERT INTO docket_processes (namespace, id, status, previous_status, status_changed_at, detail, \
               aux_state, metadata, corrupted_by, created_at, last_event_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, NULL, $9, $10) ON CONFLICT DO NOTHING RETURNING id",
        )
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
            sqlx::query(
                "INSERT INTO docket_events (namespace, process_id, event_id, task_id, timestamp, metadata, payload) \
                 SELECT $1, $2, e, NULL, t, m, p FROM unnest($3::bigint[], $4::timestamptz[], $5::jsonb[], $6::jsonb[]) AS x(e, t, m, p)",
            )
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
            self.insert_one(&mut tx, t, p.now).await?;
        }
        self.publish(
            &mut tx,
            &pr.namespace,
            &pr.id,
            &[("created", None, serde_json::json!({"imported": true}))],
            p.now,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn process_simple_repair(&self, p: ProcessSimpleRepairParams<'_>) -> Result<()> {
        let ProcessSimpleRepairParams { namespace, id, now } = p;
        let mut tx = self.pool.begin().await?;
        let r = sqlx::query(
            "UPDATE docket_processes SET previous_status = status, status = 'running', status_changed_at = $3, \
               detail = NULL, corrupted_by = NULL WHERE namespace = $1 AND id = $2 AND status = 'error'",
        )
        .bind(namespace)
        .bind(id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        if r.rows_affected() == 1 {
            self.publish(
                &mut tx,
                namespace,
                id,
                &[("repaired", None, serde_json::json!({"simple": true}))],
                now,
            )
            .await?;
            tx.commit().await?;
            return Ok(());
        }
        drop(tx);
        let st: Option<String> = sqlx::query_scalar(
            "SELECT status FROM docket_processes WHERE namespace = $1 AND id = $2",
        )
        .bind(namespace)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        match st {
            None => Err(StoreError::NotFound(format!("process {namespace}/{id}"))),
            Some(st) => Err(StoreError::InvalidState(format!("process is {st}"))),
        }
    }

    async fn process_list(
        &self,
        p: ProcessListParams<'_>,
    ) -> Result<Vec<docket_core::process::Process>> {
        let ProcessListParams {
            namespace,
            status,
            after,
            limit,
        } = p;
        let rows = sqlx::query(
            "SELECT * FROM docket_processes WHERE namespace = $1 AND ($2::text IS NULL OR status = $2) \
             AND ($3::text IS NULL OR id > $3) ORDER BY id LIMIT $4",
        )
        .bind(namespace)
        .bind(status.map(|s| s.as_str()))
        .bind(after)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(decode_process).collect()
    }

    async fn process_collect_zombies(&self, p: ProcessCollectZombiesParams) -> Result<u64> {
        let ProcessCollectZombiesParams { now, limit } = p;
        let mut tx = self.pool.begin().await?;
        let sql = format!(
            "SELECT {COLS} FROM docket_tasks WHERE state = 'running' AND lease_expires_at < $1 \
               AND queue LIKE 'process:%' ORDER BY lease_expires_at LIMIT $2 FOR UPDATE SKIP LOCKED"
        );
        let rows = sqlx::query(&sql)
            .bind(now)
            .bind(limit)
            .fetch_all(&mut *tx)
            .await?;
        let mut queues = vec![];
        let mut failed = Vec::with_capacity(rows.len());
        let mut zombies = Vec::with_capacity(rows.len());
        for r in &rows {
            let t = decode(r)?;
            let ns = t.queue.trim_start_matches("process:").to_string();
            let pid = t.payload["process_id"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let e = error_entry(&t, ZOMBIE, None, now);
            queues.push(t.queue.clone());
            zombies.push((ns, pid, t.id));
            failed.push((t, FailDecision::Discard, e));
        }
        Self::apply_failures(&mut tx, &failed, now).await?;
        self.break_zombies(&mut tx, &zombies, now).await?;
        queues.sort();
        queues.dedup();
        self.notify(&mut tx, &queues).await?;
        let ids: Vec<i64> = rows.iter().map(|r| r.get::<i64, _>("id")).collect();
        self.notify_done(&mut tx, &ids).await?;
        tx.commit().await?;
        Ok(rows.len() as u64)
    }
}
