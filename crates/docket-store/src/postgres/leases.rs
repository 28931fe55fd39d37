//! PostgreSQL: claims and the calls made under a lease: heartbeat, complete, fail.

use super::*;

#[async_trait]
impl LeaseStore for PgStore {
    async fn task_claim(&self, p: TaskClaimParams) -> Result<Vec<Task>> {
        let p = &p;
        again(|| async move {
            let p = p.clone();
        if p.limit <= 0 {
            return Ok(vec![]);
        }
        let mut tx = self.begin_hot().await?;
        let cands = sqlx::query(include_str!("sql/leases_task_claim.sql"))
            .bind(&p.queue)
            .bind(&p.node)
            .bind(p.now)
            .bind(p.limit)
            .bind(&p.kinds)
            .bind(&p.stages)
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
        let keys = claim_keys(&cands);
        let ids = if queue_limit.is_none() && keys.is_empty() {
            cands.iter().map(|c| c.id).collect()
        } else {
            // Slow path: serialise on the queue and on each key (advisory locks, in key
            // order), then count what runs now.
            let mut room = usize::MAX;
            if let Some(limit) = queue_limit {
                lock_key(&mut tx, &format!("docket-queue:{}", p.queue)).await?;
                let running: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM docket_tasks WHERE state = 'running' AND queue = $1",
                )
                .bind(&p.queue)
                .fetch_one(&mut *tx)
                .await?;
                room = (limit as i64 - running).max(0) as usize;
            }
            let mut key_room: HashMap<String, i64> = HashMap::new();
            for (k, l) in &keys {
                lock_key(&mut tx, &format!("docket-key:{k}")).await?;
                let running: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM docket_tasks WHERE state = 'running' AND concurrency_key = $1",
                )
                .bind(k)
                .fetch_one(&mut *tx)
                .await?;
                key_room.insert(k.clone(), *l as i64 - running);
            }
            claim_pick(&cands, room, key_room)
        };
        if ids.is_empty() {
            tx.commit().await?;
            return Ok(vec![]);
        }
        let sql = format!(
            "UPDATE docket_tasks SET state = 'running', attempt = attempt + 1, attempted_at = $2, \
               worker = $3, lease_token = gen_random_uuid(), lease_ms = COALESCE($4, timeout_ms), \
               lease_expires_at = $2 + (CASE WHEN namespace IS NOT NULL THEN COALESCE($4, timeout_ms) \
                 ELSE LEAST(COALESCE($4, timeout_ms), timeout_ms) END) * interval '1 millisecond', \
               cancel_requested_at = NULL, attempt_node = $5 \
             WHERE id = ANY($1) RETURNING {COLS}"
        );
        let rows = sqlx::query(&sql)
            .bind(&ids)
            .bind(p.now)
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
                token: token_of(r)?.unwrap_or_default(),
                expires_at: t.lease_expires_at.unwrap_or(p.now),
                trace_id: None,
            });
            out.push(t);
        }
        sort_claim_order(&mut out);
        Ok(out)
        })
        .await
    }

    async fn task_heartbeat(&self, p: TaskHeartbeatParams) -> Result<Task> {
        let p = &p;
        again(|| async move {
            let p = p.clone();
        let Some(token) = parse_token(&p.token) else {
            return match self.task_get(p.id).await? {
                None => Err(StoreError::NotFound(format!("task {}", p.id))),
                Some(_) => Err(StoreError::LeaseLost),
            };
        };
        let mut tx = self.pool.begin().await?;
        let sql = format!(
            "UPDATE docket_tasks SET progress = COALESCE($3, progress), \
               edited_at = CASE WHEN $3 IS NULL THEN edited_at ELSE $5 END, \
               lease_ms = COALESCE($4, lease_ms), \
               lease_expires_at = CASE WHEN namespace IS NOT NULL \
                 THEN $5 + COALESCE($4, lease_ms, timeout_ms) * interval '1 millisecond' \
                 ELSE LEAST($5 + COALESCE($4, lease_ms, timeout_ms) * interval '1 millisecond', \
                   attempted_at + timeout_ms * interval '1 millisecond') END \
             WHERE id = $1 AND lease_token = $2 AND state = 'running' AND cancel_requested_at IS NULL \
               AND (namespace IS NOT NULL OR $5 < attempted_at + timeout_ms * interval '1 millisecond') \
             RETURNING {COLS}"
        );
        if let Some(row) = sqlx::query(&sql)
            .bind(p.id)
            .bind(token)
            .bind(&p.progress)
            .bind(p.lease.map(ms))
            .bind(p.now)
            .fetch_optional(&mut *tx)
            .await?
        {
            tx.commit().await?;
            return decode(&row);
        }
        let sql = format!("SELECT {COLS} FROM docket_tasks WHERE id = $1 FOR UPDATE");
        let Some(row) = sqlx::query(&sql)
            .bind(p.id)
            .fetch_optional(&mut *tx)
            .await?
        else {
            return Err(StoreError::NotFound(format!("task {}", p.id)));
        };
        let t = decode(&row)?;
        let held = token_of(&row)?.as_deref() == Some(p.token.as_str());
        if held && t.state == TaskState::Running && t.cancel_requested_at.is_some() {
            sqlx::query(sql_runs!("sql/leases_task_heartbeat.sql"))
                .bind(p.id)
                .bind(p.now)
                .bind(&p.progress)
                .execute(&mut *tx)
                .await?;
            self.notify(&mut tx, std::slice::from_ref(&t.queue)).await?;
            tx.commit().await?;
            return Err(StoreError::Cancelled);
        }
        if held && t.state == TaskState::Running && past_deadline(&t, p.now) {
            self.fail_timed_out(&mut tx, t, p.now, p.fail_rule).await?;
            tx.commit().await?;
            return Err(StoreError::TimedOut);
        }
        tx.commit().await?;
        Err(match lease_refusal(&row, &p.token)? {
            LeaseOutcome::Cancelled => StoreError::Cancelled,
            _ => StoreError::LeaseLost,
        })
        })
        .await
    }

    async fn task_complete_many(&self, p: TaskCompleteManyParams<'_>) -> Result<Vec<LeaseOutcome>> {
        let p = &p;
        again(|| async move {
            let p = p.clone();
            let TaskCompleteManyParams {
                items,
                now,
                fail_rule,
            } = p;
            if items.is_empty() {
                return Ok(vec![]);
            }
            let mut ids = Vec::with_capacity(items.len());
            let mut tokens = Vec::with_capacity(items.len());
            let mut results = Vec::with_capacity(items.len());
            for it in items.iter().filter(|it| it.next.is_none()) {
                ids.push(it.id);
                // A malformed token can never match: the nil uuid is never issued.
                tokens.push(parse_token(&it.token).unwrap_or(uuid::Uuid::nil()));
                results.push(it.result.clone());
            }
            let mut tx = self.begin_hot().await?;
            // `frees`: finishing it lets another task of its key or limited queue start, so the
            // queue's claimers are woken (on every node) instead of waiting for a poll.
            type Done = (i64, Timestamp, String, bool, String, Option<Timestamp>);
            let mut done: Vec<(TaskState, Done)> = if ids.is_empty() {
                vec![]
            } else {
                sqlx::query_as::<_, Done>(sql_runs!("sql/leases_task_complete_many.sql"))
                    .bind(now)
                    .bind(&ids)
                    .bind(&tokens)
                    .bind(&results)
                    .fetch_all(&mut *tx)
                    .await?
                    .into_iter()
                    .map(|d| (TaskState::Completed, d))
                    .collect()
            };
            for it in items {
                let Some(n) = &it.next else { continue };
                let token = parse_token(&it.token).unwrap_or(uuid::Uuid::nil());
                let d: Option<Done> = sqlx::query_as(sql_runs!("sql/leases_task_next_stage.sql"))
                    .bind(it.id)
                    .bind(token)
                    .bind(n.state.as_str())
                    .bind(n.run_at)
                    .bind(&n.stage)
                    .bind(&n.payload)
                    .bind(n.priority)
                    .bind(&it.result)
                    .bind(now)
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
            freed.sort();
            freed.dedup();
            self.notify(&mut tx, &freed).await?;
            let done: HashMap<i64, (TaskState, Timestamp, TaskLabels)> = done
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
                                attempted_at: r.5,
                            },
                        ),
                    )
                })
                .collect();
            let mut out = Vec::with_capacity(items.len());
            if done.len() == items.len() {
                tx.commit().await?;
                for it in items {
                    let (state, run_at, labels) = done[&it.id].clone();
                    out.push(LeaseOutcome::Ok {
                        state,
                        run_at,
                        labels,
                    });
                }
                return Ok(out);
            }
            let missing: Vec<i64> = items
                .iter()
                .map(|i| i.id)
                .filter(|i| !done.contains_key(i))
                .collect();
            let sql = format!("SELECT {COLS} FROM docket_tasks WHERE id = ANY($1) FOR UPDATE");
            let rows = sqlx::query(&sql).bind(&missing).fetch_all(&mut *tx).await?;
            let mut timed_out = vec![];
            let rows: HashMap<i64, PgRow> = rows
                .into_iter()
                .map(|r| (r.get::<i64, _>("id"), r))
                .collect();
            for it in items {
                if let Some((state, run_at, labels)) = done.get(&it.id) {
                    out.push(LeaseOutcome::Ok {
                        state: *state,
                        run_at: *run_at,
                        labels: labels.clone(),
                    });
                    continue;
                }
                let Some(row) = rows.get(&it.id) else {
                    out.push(LeaseOutcome::NotFound);
                    continue;
                };
                let state: String = row.try_get("state")?;
                let requested: Option<Timestamp> = row.try_get("cancel_requested_at")?;
                let held = token_of(row)?.as_deref() == Some(it.token.as_str());
                if held && state == "running" && requested.is_some() {
                    // The work was done, but a cancel won: keep its result, end it cancelled.
                    sqlx::query(sql_runs!("sql/leases_task_complete_many_2.sql"))
                        .bind(it.id)
                        .bind(now)
                        .bind(&it.result)
                        .execute(&mut *tx)
                        .await?;
                    out.push(LeaseOutcome::Cancelled);
                } else if held && state == "running" {
                    // Held, running, not cancelled, yet not updated: past its deadline.
                    let t = decode(row)?;
                    let d = fail_rule(&t, now, None, false);
                    let e = error_entry(&t, TIMEOUT_MESSAGE, None, now);
                    timed_out.push((t, d, e));
                    out.push(LeaseOutcome::TimedOut);
                } else {
                    out.push(lease_refusal(row, &it.token)?);
                }
            }
            Self::apply_failures(&mut tx, &timed_out, now).await?;
            self.notify_freed(&mut tx, &timed_out).await?;
            tx.commit().await?;
            Ok(out)
        })
        .await
    }

    async fn task_lease_token(&self, id: i64) -> Result<Option<String>> {
        const SQL: &str =
            "SELECT lease_token FROM docket_tasks WHERE id = $1 AND state = 'running'";
        let t: Option<Option<uuid::Uuid>> = sqlx::query_scalar(SQL)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(t.flatten().map(|u| u.to_string()))
    }

    async fn task_fail_many(&self, p: TaskFailManyParams<'_>) -> Result<Vec<LeaseOutcome>> {
        let p = &p;
        again(|| async move {
            let p = p.clone();
            let TaskFailManyParams {
                items,
                worker,
                now,
                fail_rule,
            } = p;
            if items.is_empty() {
                return Ok(vec![]);
            }
            let ids: Vec<i64> = items.iter().map(|i| i.id).collect();
            let mut tx = self.pool.begin().await?;
            let sql = format!(
                "SELECT {COLS} FROM docket_tasks WHERE id = ANY($1) ORDER BY id FOR UPDATE"
            );
            let rows = sqlx::query(&sql).bind(&ids).fetch_all(&mut *tx).await?;
            let rows: HashMap<i64, PgRow> = rows
                .into_iter()
                .map(|r| (r.get::<i64, _>("id"), r))
                .collect();
            let mut apply = vec![];
            let mut out = Vec::with_capacity(items.len());
            let mut touched = std::collections::HashSet::new();
            for it in items {
                let Some(row) = rows.get(&it.id) else {
                    out.push(LeaseOutcome::NotFound);
                    continue;
                };
                let t = decode(row)?;
                let held = token_of(row)?.as_deref() == Some(it.token.as_str());
                if !held || t.state != TaskState::Running || !touched.insert(it.id) {
                    out.push(lease_refusal(row, &it.token)?);
                    continue;
                }
                let d = fail_rule(&t, now, it.retry_in, it.permanent);
                out.push(outcome_for(&d, &t));
                let e = error_entry(&t, &it.error, worker, now);
                apply.push((t, d, e));
            }
            Self::apply_failures(&mut tx, &apply, now).await?;
            self.notify_freed(&mut tx, &apply).await?;
            tx.commit().await?;
            Ok(out)
        })
        .await
    }
}
