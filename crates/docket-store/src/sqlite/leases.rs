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
        let kinds = p.kinds.as_ref().map(|k| serde_json::json!(k).to_string());
        let stages = p.stages.as_ref().map(|k| serde_json::json!(k).to_string());
        let mut cands = sqlx::query(sql!(leases, claim_candidates))
            .bind(&p.queue)
            .bind(&p.node)
            .bind(us(p.now))
            .bind(p.limit)
            .bind(&kinds)
            .bind(&stages)
            .fetch_all(&mut *tx)
            .await?;
        // A fair queue (the candidates say so): its candidates again, in the fair order. The
        // writer lock is held: what the statement returns cannot be taken by another claim, so
        // the fair order is all there is to it.
        if cands
            .first()
            .map(|r| r.try_get::<bool, _>("fair"))
            .transpose()?
            == Some(true)
        {
            let q = sqlx::query(
                "SELECT partition_weights, schedule_limit FROM docket_queues WHERE name = ?",
            )
            .bind(&p.queue)
            .fetch_one(&mut *tx)
            .await?;
            let f = Fairness {
                weights: q
                    .try_get::<Option<String>, _>("partition_weights")?
                    .map(|w| serde_json::from_str(&w))
                    .transpose()
                    .map_err(|e| {
                        StoreError::Corrupt(format!("queue {}: partition_weights: {e}", p.queue))
                    })?
                    .unwrap_or_default(),
            };
            let schedule_limit: Option<i32> = q.try_get("schedule_limit")?;
            let want = schedule_limit.map_or(p.limit, |l| p.limit.min(i64::from(l)));
            let (per, fetch) = f.fetch(want);
            let all = sqlx::query(sql!(leases, claim_candidates_fair))
                .bind(&p.queue)
                .bind(&p.node)
                .bind(us(p.now))
                .bind(fetch)
                .bind(&kinds)
                .bind(&stages)
                .bind(per)
                .fetch_all(&mut *tx)
                .await?;
            let ranks = all
                .iter()
                .map(|r| Ok((r.try_get("partition_key")?, r.try_get("rn")?)))
                .collect::<Result<Vec<_>>>()?;
            let order = f.order(&ranks);
            let mut all: Vec<Option<SqliteRow>> = all.into_iter().map(Some).collect();
            cands = order
                .into_iter()
                .take(usize::try_from(want).unwrap_or(0))
                .filter_map(|i| all[i].take())
                .collect();
        }
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
                    rate: r.try_get("rate_limit")?,
                    timeout_ms: r.try_get("timeout_ms")?,
                    process: r.try_get("process")?,
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
        let mut rate_keys = vec![];
        if cands.iter().any(|c| c.rate.is_some()) {
            let mut d = self.tx_of(tx);
            rate_keys = crate::rate_limits::rate_lock(&mut d, &cands, p.now).await?;
            tx = d.into_inner();
        }
        let rate_room = crate::rate_limits::rate_room(&rate_keys, p.now);
        let picked = claim_pick(&cands, room, key_room, &rate_room);
        if !rate_keys.is_empty() {
            let mut d = self.tx_of(tx);
            crate::rate_limits::rate_record(&mut d, &rate_keys, &cands, &picked, p.now).await?;
            tx = d.into_inner();
        }
        if picked.is_empty() {
            tx.commit().await?;
            return Ok(vec![]);
        }
        // Each task's lease by `docket_core::lease::claim_lease`, as one JSON array of
        // [id, lease_ms, lease_expires_at µs, deadline_at µs].
        let c = ClaimColumns::of(&picked, p.now, p.lease);
        let leases: Vec<Value> = (0..c.ids.len())
            .map(|i| {
                serde_json::json!([
                    c.ids[i],
                    c.lease_ms[i],
                    us(c.expires_at[i]),
                    c.deadline_at[i].map(us)
                ])
            })
            .collect();
        let nonce = p.nonce.unwrap_or_else(LeaseToken::new_nonce);
        let sql = sql!(leases, claim);
        let rows = sqlx::query(sql)
            .bind(Value::Array(leases).to_string())
            .bind(us(p.now))
            .bind(&p.worker)
            .bind(lease::nonce_hex(nonce))
            .bind(&p.node)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        let tasks = rows.iter().map(decode).collect::<Result<Vec<_>>>()?;
        Ok(claimed(tasks, nonce, p.now))
    }

    async fn task_heartbeat(&self, p: TaskHeartbeatParams) -> Result<Task> {
        let mut tx = self.begin().await?;
        let Some((t, nonce, kept)) = Self::get_row_in(&mut tx, p.id).await? else {
            return Err(StoreError::NotFound(format!("task {}", p.id)));
        };
        let progress = p.progress.as_ref().map(|v| v.to_string());
        match lease::check(&t, nonce, &p.token, p.now) {
            LeaseCheck::Held => {
                let l = lease::renew(&t, kept, p.lease, p.now);
                let sql = sql!(leases, heartbeat);
                let row = sqlx::query(sql)
                    .bind(p.id)
                    .bind(progress)
                    .bind(us(p.now))
                    .bind(l.lease_ms)
                    .bind(us(l.expires_at))
                    .fetch_one(&mut *tx)
                    .await?;
                tx.commit().await?;
                decode(&row)
            }
            LeaseCheck::CancelRequested => {
                sqlx::query(sql!(leases, heartbeat_cancelled))
                    .bind(p.id)
                    .bind(us(p.now))
                    .bind(progress)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                self.wake_queues([&t.queue]);
                Err(StoreError::Cancelled)
            }
            LeaseCheck::PastDeadline => {
                let f = Failure::timed_out(&t, p.fail_rule, p.now);
                Self::apply_failures(&mut tx, std::slice::from_ref(&f), None).await?;
                tx.commit().await?;
                self.wake_queues([&t.queue]);
                Err(StoreError::TimedOut)
            }
            LeaseCheck::Cancelled => Err(StoreError::Cancelled),
            LeaseCheck::Lost => Err(StoreError::LeaseLost),
        }
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
            .map(|it| {
                // A malformed token, or one of another task, matches no stored nonce.
                let nonce = LeaseToken::nonce_for(&it.token, it.id).map(lease::nonce_hex);
                serde_json::json!({"id": it.id, "token": nonce, "result": it.result})
            })
            .collect();
        type Done = (i64, i64, String, bool, String, Option<i64>);
        let mut done: Vec<(TaskState, Done)> =
            sqlx::query_as::<_, Done>(sql!(leases, complete_held))
                .bind(us(now))
                .bind(Value::Array(batch).to_string())
                .fetch_all(&mut *tx)
                .await?
                .into_iter()
                .map(|d| (TaskState::Completed, d))
                .collect();
        for it in items {
            let Some(n) = &it.next else { continue };
            let d: Option<Done> = sqlx::query_as(sql!(leases, complete_to_next_stage))
                .bind(it.id)
                .bind(LeaseToken::nonce_for(&it.token, it.id).map(lease::nonce_hex))
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
        let mut freed: Vec<String> = done
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
            let Some((t, nonce)) = Self::get_in(&mut tx, it.id).await? else {
                out.push(LeaseOutcome::NotFound);
                continue;
            };
            let check = lease::check(&t, nonce, &it.token, now);
            match check {
                LeaseCheck::CancelRequested => {
                    // The work was done, but a cancel won: keep its result, end it cancelled.
                    sqlx::query(sql!(leases, complete_cancelled))
                        .bind(it.id)
                        .bind(us(now))
                        .bind(it.result.to_string())
                        .execute(&mut *tx)
                        .await?;
                    freed.push(t.queue.clone());
                }
                LeaseCheck::PastDeadline => timed_out.push(Failure::timed_out(&t, fail_rule, now)),
                // The statement took every held item; a duplicate id finds it completed.
                LeaseCheck::Held | LeaseCheck::Cancelled | LeaseCheck::Lost => {}
            }
            out.push(check.refusal());
        }
        Self::apply_failures(&mut tx, &timed_out, None).await?;
        tx.commit().await?;
        self.wake_queues(&freed);
        self.wake_queues(timed_out.iter().map(|f| &f.labels.queue));
        Ok(out)
    }

    async fn task_release(&self, p: TaskReleaseParams<'_>) -> Result<Vec<Released>> {
        crate::portable::task_release(self, p).await
    }

    async fn task_lease_token(&self, id: i64) -> Result<Option<String>> {
        const SQL: &str =
            "SELECT lease_token FROM docket_tasks WHERE id = ?1 AND state = 'running'";
        let t: Option<Option<String>> = sqlx::query_scalar(SQL)
            .bind(id)
            .fetch_optional(&self.reader)
            .await?;
        let nonce = t.flatten().as_deref().and_then(lease::nonce_from_hex);
        Ok(lease::token_string(nonce, id))
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
            let Some((t, nonce)) = Self::get_in(&mut tx, it.id).await? else {
                out.push(LeaseOutcome::NotFound);
                continue;
            };
            // A worker's failure is taken past the deadline too (it is the same end); a cancel
            // requested meanwhile is the fail rule's to apply. A second item of the same id
            // finds the task failed already.
            let check = lease::check(&t, nonce, &it.token, now);
            if !matches!(
                check,
                LeaseCheck::Held | LeaseCheck::PastDeadline | LeaseCheck::CancelRequested
            ) {
                out.push(check.refusal());
                continue;
            }
            let d = fail_rule(&t, now, it.retry_in, it.permanent);
            let f = Failure::new(&t, d, &it.error, worker, now);
            out.push(f.outcome());
            freed.push(t.queue.clone());
            Self::apply_failures(&mut tx, std::slice::from_ref(&f), None).await?;
        }
        tx.commit().await?;
        self.wake_queues(&freed);
        Ok(out)
    }
}
