//! SQLite: claims and the calls made under a lease: heartbeat, complete, fail.

use super::*;

#[async_trait]
impl LeaseStore for SqliteStore {
    async fn task_claim(&self, p: TaskClaimParams) -> Result<Vec<Task>> {
        if p.limit <= 0 {
            return Ok(vec![]);
        }
        let mut tx = self.begin().await?;
        // The writer lock is held for the whole transaction, so the counts below cannot change
        // under us: no row or advisory locks are needed on SQLite.
        let cands = sqlx::query(include_str!("sql/leases_task_claim.sql"))
            .bind(&p.queue)
            .bind(&p.node)
            .bind(us(p.now))
            .bind(p.limit)
            .bind(p.kinds.as_ref().map(|k| serde_json::json!(k).to_string()))
            .bind(p.stages.as_ref().map(|k| serde_json::json!(k).to_string()))
            .fetch_all(&mut *tx)
            .await?;
        if cands.is_empty() {
            tx.commit().await?;
            return Ok(vec![]);
        }
        let queue_limit: Option<i32> = cands[0].try_get("queue_limit")?;
        let cands = cands
            .iter()
            .map(|r| {
                let key = r.try_get::<Option<String>, _>("concurrency_key")?;
                let limit: Option<i32> = r.try_get("concurrency_limit")?;
                Ok(ClaimCandidate {
                    id: r.try_get("id")?,
                    key: key.map(|k| (k, limit.unwrap_or(1))),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let mut room = usize::MAX;
        if let Some(limit) = queue_limit {
            let running: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM docket_tasks WHERE state = 'running' AND queue = ?",
            )
            .bind(&p.queue)
            .fetch_one(&mut *tx)
            .await?;
            room = (limit as i64 - running).max(0) as usize;
        }
        let mut key_room: HashMap<String, i64> = HashMap::new();
        for (k, l) in claim_keys(&cands) {
            let running: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM docket_tasks WHERE state = 'running' AND concurrency_key = ?",
            )
            .bind(&k)
            .fetch_one(&mut *tx)
            .await?;
            key_room.insert(k, l as i64 - running);
        }
        let ids = claim_pick(&cands, room, key_room);
        if ids.is_empty() {
            tx.commit().await?;
            return Ok(vec![]);
        }
        let sql = format!(
            "UPDATE docket_tasks SET state = 'running', attempt = attempt + 1, attempted_at = ?2, \
               worker = ?3, lease_token = lower(hex(randomblob(16))), \
               lease_ms = COALESCE(?4, timeout_ms), \
               lease_expires_at = ?2 + (CASE WHEN namespace IS NOT NULL THEN COALESCE(?4, timeout_ms) \
                 ELSE min(COALESCE(?4, timeout_ms), timeout_ms) END) * 1000, cancel_requested_at = NULL, \
               attempt_node = ?5 \
             WHERE id IN (SELECT value FROM json_each(?1)) RETURNING {COLS}"
        );
        let rows = sqlx::query(&sql)
            .bind(ids_json(&ids))
            .bind(us(p.now))
            .bind(&p.worker)
            .bind(p.lease.map(ms))
            .bind(&p.node)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let mut t = decode(r)?;
            t.lease = Some(Lease {
                token: r
                    .try_get::<Option<String>, _>("lease_token")?
                    .unwrap_or_default(),
                expires_at: t.lease_expires_at.unwrap_or(p.now),
                trace_id: None,
            });
            out.push(t);
        }
        sort_claim_order(&mut out);
        Ok(out)
    }

    async fn task_heartbeat(&self, p: TaskHeartbeatParams) -> Result<Task> {
        let mut tx = self.begin().await?;
        let Some((t, token)) = Self::get_in(&mut tx, p.id).await? else {
            return Err(StoreError::NotFound(format!("task {}", p.id)));
        };
        let held = token.as_deref() == Some(p.token.as_str());
        if !held || t.state != TaskState::Running {
            tx.commit().await?;
            return Err(match crate::shared::lease_refusal(t.state, held) {
                LeaseOutcome::Cancelled => StoreError::Cancelled,
                _ => StoreError::LeaseLost,
            });
        }
        let progress = p.progress.as_ref().map(|v| v.to_string());
        if t.cancel_requested_at.is_some() {
            sqlx::query(sql_runs!("sql/leases_task_heartbeat.sql"))
                .bind(p.id)
                .bind(us(p.now))
                .bind(progress)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            self.wake_queues([&t.queue]);
            return Err(StoreError::Cancelled);
        }
        if past_deadline(&t, p.now) {
            let queue = t.queue.clone();
            let d = (p.fail_rule)(&t, p.now, None, false);
            let e = error_entry(&t, TIMEOUT_MESSAGE, None, p.now);
            Self::apply_failures(&mut tx, &[(t, d, e)], p.now).await?;
            tx.commit().await?;
            self.wake_queues([&queue]);
            return Err(StoreError::TimedOut);
        }
        // The lease never reaches past the attempt's deadline (process tasks excepted: their
        // lease is the zombie window).
        let sql = format!(
            "UPDATE docket_tasks SET progress = COALESCE(?2, progress), lease_ms = COALESCE(?3, lease_ms), \
               edited_at = CASE WHEN ?2 IS NULL THEN edited_at ELSE ?4 END, \
               lease_expires_at = CASE WHEN namespace IS NOT NULL \
                 THEN ?4 + COALESCE(?3, lease_ms, timeout_ms) * 1000 \
                 ELSE min(?4 + COALESCE(?3, lease_ms, timeout_ms) * 1000, attempted_at + timeout_ms * 1000) END \
             WHERE id = ?1 RETURNING {COLS}"
        );
        let row = sqlx::query(&sql)
            .bind(p.id)
            .bind(progress)
            .bind(p.lease.map(ms))
            .bind(us(p.now))
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        decode(&row)
    }

    async fn task_complete_many(&self, p: TaskCompleteManyParams<'_>) -> Result<Vec<LeaseOutcome>> {
        let TaskCompleteManyParams {
            items,
            now,
            fail_rule,
        } = p;
        if items.is_empty() {
            return Ok(vec![]);
        }
        let mut tx = self.begin().await?;
        // One statement for the whole batch: items travel as one JSON array.
        let batch: Vec<Value> = items
            .iter()
            .filter(|it| it.next.is_none())
            .map(|it| serde_json::json!({"id": it.id, "token": it.token, "result": it.result}))
            .collect();
        type Done = (i64, i64, String, bool, String, Option<i64>);
        let mut done: Vec<(TaskState, Done)> =
            sqlx::query_as::<_, Done>(sql_runs!("sql/leases_task_complete_many.sql"))
                .bind(us(now))
                .bind(Value::Array(batch).to_string())
                .fetch_all(&mut *tx)
                .await?
                .into_iter()
                .map(|d| (TaskState::Completed, d))
                .collect();
        for it in items {
            let Some(n) = &it.next else { continue };
            let d: Option<Done> = sqlx::query_as(sql_runs!("sql/leases_task_next_stage.sql"))
                .bind(it.id)
                .bind(&it.token)
                .bind(n.state.as_str())
                .bind(us(n.run_at))
                .bind(&n.stage)
                .bind(n.payload.as_ref().map(Value::to_string))
                .bind(n.priority)
                .bind(it.result.to_string())
                .bind(us(now))
                .fetch_optional(&mut *tx)
                .await?;
            if let Some(mut d) = d {
                // Back to waiting: an available task wakes its queue's claimers.
                d.3 |= n.state == TaskState::Available;
                done.push((n.state, d));
            }
        }
        let freed: Vec<String> = done
            .iter()
            .filter(|r| r.1 .3)
            .map(|r| r.1 .2.clone())
            .collect();
        let done: HashMap<i64, (TaskState, i64, TaskLabels)> = done
            .into_iter()
            .map(|(state, r)| {
                (
                    r.0,
                    (
                        state,
                        r.1,
                        TaskLabels {
                            queue: r.2,
                            kind: r.4,
                            attempted_at: r.5.map(from_us),
                        },
                    ),
                )
            })
            .collect();
        let mut out = Vec::with_capacity(items.len());
        let mut timed_out = vec![];
        for it in items {
            if let Some((state, run_at, labels)) = done.get(&it.id) {
                out.push(LeaseOutcome::Ok {
                    state: *state,
                    run_at: from_us(*run_at),
                    labels: labels.clone(),
                });
                continue;
            }
            let Some((t, token)) = Self::get_in(&mut tx, it.id).await? else {
                out.push(LeaseOutcome::NotFound);
                continue;
            };
            let held = token.as_deref() == Some(it.token.as_str());
            if held && t.state == TaskState::Running && t.cancel_requested_at.is_some() {
                sqlx::query(sql_runs!("sql/leases_task_complete_many_2.sql"))
                    .bind(it.id)
                    .bind(us(now))
                    .bind(it.result.to_string())
                    .execute(&mut *tx)
                    .await?;
                out.push(LeaseOutcome::Cancelled);
            } else if held && t.state == TaskState::Running {
                // Held, running, not cancelled, yet not updated: past its deadline.
                let d = fail_rule(&t, now, None, false);
                let e = error_entry(&t, TIMEOUT_MESSAGE, None, now);
                timed_out.push((t, d, e));
                out.push(LeaseOutcome::TimedOut);
            } else {
                out.push(crate::shared::lease_refusal(t.state, held));
            }
        }
        Self::apply_failures(&mut tx, &timed_out, now).await?;
        tx.commit().await?;
        self.wake_queues(&freed);
        self.wake_queues(timed_out.iter().map(|(t, _, _)| &t.queue));
        Ok(out)
    }

    async fn task_lease_token(&self, id: i64) -> Result<Option<String>> {
        const SQL: &str =
            "SELECT lease_token FROM docket_tasks WHERE id = ?1 AND state = 'running'";
        let t: Option<Option<String>> = sqlx::query_scalar(SQL)
            .bind(id)
            .fetch_optional(&self.reader)
            .await?;
        Ok(t.flatten())
    }

    async fn task_fail_many(&self, p: TaskFailManyParams<'_>) -> Result<Vec<LeaseOutcome>> {
        let TaskFailManyParams {
            items,
            worker,
            now,
            fail_rule,
        } = p;
        if items.is_empty() {
            return Ok(vec![]);
        }
        let mut tx = self.begin().await?;
        let mut out = Vec::with_capacity(items.len());
        let mut freed = vec![];
        for it in items {
            let Some((t, token)) = Self::get_in(&mut tx, it.id).await? else {
                out.push(LeaseOutcome::NotFound);
                continue;
            };
            let held = token.as_deref() == Some(it.token.as_str());
            if !held || t.state != TaskState::Running {
                out.push(crate::shared::lease_refusal(t.state, held));
                continue;
            }
            let d = fail_rule(&t, now, it.retry_in, it.permanent);
            out.push(outcome_for(&d, &t));
            let e = error_entry(&t, &it.error, worker, now);
            freed.push(t.queue.clone());
            Self::apply_failures(&mut tx, &[(t, d, e)], now).await?;
        }
        tx.commit().await?;
        self.wake_queues(&freed);
        Ok(out)
    }
}
