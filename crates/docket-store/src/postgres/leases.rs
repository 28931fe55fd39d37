//! PostgreSQL: claims and the calls made under a lease: heartbeat, complete, fail. Which call
//! applies and what it writes is `docket_core::lease`'s; this file locks, fetches and writes.

use super::*;
use docket_core::lease::{self, LeaseToken};

/// A candidate row of the claim's first statement.
fn candidate(r: &PgRow) -> Result<ClaimCandidate> {
    let key = r.try_get::<Option<String>, _>("concurrency_key")?;
    let limit: Option<i32> = r.try_get("concurrency_limit")?;
    Ok(ClaimCandidate {
        id: r.try_get("id")?,
        key: key.map(|k| (k, limit.unwrap_or(1))),
        rate: r.try_get("rate_limit")?,
        timeout_ms: r.try_get("timeout_ms")?,
        process: r.try_get("process")?,
    })
}

/// Longest lease or timeout the one-statement claim computes in SQL (100 years); past it the
/// claim takes the transaction, where `docket_core::lease::claim_lease` saturates instead of
/// overflowing. The API bounds both to 30 days; this guards library callers and rows written
/// with plain SQL.
const FAST_CLAIM_MAX: Duration = Duration::from_secs(100 * 365 * 86_400);

#[async_trait]
impl LeaseStore for PgStore {
    async fn task_claim(&self, p: TaskClaimParams) -> Result<Vec<Task>> {
        let p = &p;
        again(|| async move {
            let p = p.clone();
            if p.limit <= 0 {
                return Ok(vec![]);
            }
            let nonce = p.nonce.unwrap_or_else(LeaseToken::new_nonce);
            let fast_max = docket_core::duration::to_ms(FAST_CLAIM_MAX);
            let lease_ms = p.lease.map(docket_core::duration::to_ms);
            let rows = if lease_ms.is_some_and(|l| l > fast_max) {
                vec![]
            } else {
                sqlx::query(sql!(leases, claim_fast))
                .bind(&p.queue)
                .bind(&p.node)
                .bind(p.now)
                .bind(p.limit)
                .bind(&p.kinds)
                .bind(&p.stages)
                .bind(lease_ms)
                .bind(&p.worker)
                .bind(uuid::Uuid::from_u128(nonce))
                .bind(fast_max)
                .fetch_all(&self.claim_pool)
                .await?
            };
            // No row at all: the fast path was not tried (a lease past FAST_CLAIM_MAX).
            if rows.first().map(|r| r.try_get::<bool, _>("fast_ok")).transpose()?
                == Some(true)
            {
                let mut tasks = Vec::with_capacity(rows.len());
                for r in &rows {
                    // The one row of an empty claim: no task, only `fast_ok`.
                    if r.try_get::<Option<i64>, _>("id")?.is_some() {
                        tasks.push(decode(r)?);
                    }
                }
                self.claims_fast.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return Ok(claimed(tasks, nonce, p.now));
            }
            // Slow path: a concurrency key or a queue limit among the candidates, or a lease or
            // timeout past FAST_CLAIM_MAX.
            let mut tx = self.begin_hot().await?;
            let q = sqlx::query(
                "SELECT fair, partition_weights, schedule_limit FROM docket_queues WHERE name = $1",
            )
            .bind(&p.queue)
            .fetch_optional(&mut *tx)
            .await?;
            let fair = match &q {
                Some(r) if r.try_get::<bool, _>("fair")? => Some(Fairness {
                    weights: r
                        .try_get::<Option<serde_json::Value>, _>("partition_weights")?
                        .map(serde_json::from_value)
                        .transpose()
                        .map_err(|e| StoreError::Corrupt(format!("queue {}: partition_weights: {e}", p.queue)))?
                        .unwrap_or_default(),
                }),
                _ => None,
            };
            let rows = if let Some(f) = &fair {
                let schedule_limit: Option<i32> = q.as_ref().map(|r| r.try_get("schedule_limit")).transpose()?.flatten();
                let want = schedule_limit.map_or(p.limit, |l| p.limit.min(i64::from(l)));
                let (per, fetch) = f.fetch(want);
                // The generic plan, built once per connection: planning this statement takes
                // ~20 ms, and the planner would otherwise plan it afresh at every claim (its
                // custom plans look cheaper than the generic one, which runs as fast: 5.6 ms
                // against 6.6 ms at 100,000 waiting, EXPLAIN ANALYZE). Sorts allowed again (the
                // hot path's settings forbid them): its ranking sorts a few rows per partition,
                // and without sorts the planner finds a plan 3x slower (20 ms against 7 ms).
                for set in [
                    "SET LOCAL plan_cache_mode = force_generic_plan",
                    "SET LOCAL enable_sort = on",
                ] {
                    sqlx::query(set).execute(&mut *tx).await?;
                }
                let all = sqlx::query(sql!(leases, claim_candidates_fair))
                    .bind(&p.queue)
                    .bind(&p.node)
                    .bind(p.now)
                    .bind(fetch)
                    .bind(&p.kinds)
                    .bind(&p.stages)
                    .bind(per)
                    .fetch_all(&mut *tx)
                    .await?;
                let ranks = all
                    .iter()
                    .map(|r| Ok((r.try_get("partition_key")?, r.try_get("rn")?)))
                    .collect::<Result<Vec<_>>>()?;
                let order = f.order(&ranks);
                let ids: Vec<i64> = order
                    .iter()
                    .map(|i| all[*i].try_get("id"))
                    .collect::<std::result::Result<_, _>>()?;
                let locked: std::collections::HashSet<i64> =
                    sqlx::query_scalar(sql!(leases, lock_available))
                        .bind(&ids)
                        .fetch_all(&mut *tx)
                        .await?
                        .into_iter()
                        .collect();
                let mut all: Vec<Option<PgRow>> = all.into_iter().map(Some).collect();
                let mut out = Vec::new();
                for (i, id) in order.into_iter().zip(ids) {
                    if out.len() as i64 >= want {
                        break;
                    }
                    if locked.contains(&id) {
                        out.extend(all[i].take());
                    }
                }
                out
            } else {
                sqlx::query(sql!(leases, claim_candidates))
                    .bind(&p.queue)
                    .bind(&p.node)
                    .bind(p.now)
                    .bind(p.limit)
                    .bind(&p.kinds)
                    .bind(&p.stages)
                    .fetch_all(&mut *tx)
                    .await?
            };
            if rows.is_empty() {
                tx.commit().await?;
                return Ok(vec![]);
            }
            let queue_limit: Option<i32> = rows[0].try_get("queue_limit")?;
            let cands = rows.iter().map(candidate).collect::<Result<Vec<_>>>()?;
            let keys = claim_keys(&cands);
            let rated = cands.iter().any(|c| c.rate.is_some());
            let mut rate_keys = vec![];
            let picked = if queue_limit.is_none() && keys.is_empty() && !rated {
                cands.iter().collect()
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
                // Rate limit keys last (their rows, in key order), so every claim takes its
                // locks in one order: queue, concurrency keys, rate keys.
                if rated {
                    let mut d = PgTx::of(tx, &self.schema);
                    rate_keys = crate::rate_limits::rate_lock(&mut d, &cands, p.now).await?;
                    tx = d.into_inner();
                }
                let rate_room = crate::rate_limits::rate_room(&rate_keys, p.now);
                claim_pick(&cands, room, key_room, &rate_room)
            };
            if !rate_keys.is_empty() {
                let mut d = PgTx::of(tx, &self.schema);
                crate::rate_limits::rate_record(&mut d, &rate_keys, &cands, &picked, p.now)
                    .await?;
                tx = d.into_inner();
            }
            if picked.is_empty() {
                tx.commit().await?;
                return Ok(vec![]);
            }
            let cols = ClaimColumns::of(&picked, p.now, p.lease);
            let sql = sql!(leases, claim);
            let rows = sqlx::query(sql)
                .bind(&cols.ids)
                .bind(p.now)
                .bind(&p.worker)
                .bind(uuid::Uuid::from_u128(nonce))
                .bind(&p.node)
                .bind(&cols.lease_ms)
                .bind(&cols.expires_at)
                .bind(&cols.deadline_at)
                .fetch_all(&mut *tx)
                .await?;
            tx.commit().await?;
            let tasks = rows.iter().map(decode).collect::<Result<Vec<_>>>()?;
            Ok(claimed(tasks, nonce, p.now))
        })
        .await
    }

    async fn task_heartbeat(&self, p: TaskHeartbeatParams) -> Result<Task> {
        let p = &p;
        again(|| async move {
            let p = p.clone();
            let mut tx = self.pool.begin().await?;
            let sql = sql!(tasks, lock);
            let Some(row) = sqlx::query(sql).bind(p.id).fetch_optional(&mut *tx).await? else {
                return Err(StoreError::NotFound(format!("task {}", p.id)));
            };
            let t = decode(&row)?;
            match lease::check(&t, row.nonce("lease_token")?, &p.token, p.now) {
                LeaseCheck::Held => {
                    let l = lease::renew(&t, row.try_get("lease_ms")?, p.lease, p.now);
                    let sql = sql!(leases, heartbeat);
                    let row = sqlx::query(sql)
                        .bind(p.id)
                        .bind(&p.progress)
                        .bind(p.now)
                        .bind(l.lease_ms)
                        .bind(l.expires_at)
                        .fetch_one(&mut *tx)
                        .await?;
                    tx.commit().await?;
                    decode(&row)
                }
                LeaseCheck::CancelRequested => {
                    sqlx::query(sql!(leases, heartbeat_cancelled))
                        .bind(p.id)
                        .bind(p.now)
                        .bind(&p.progress)
                        .execute(&mut *tx)
                        .await?;
                    self.notify(&mut tx, std::slice::from_ref(&t.queue)).await?;
                    tx.commit().await?;
                    Err(StoreError::Cancelled)
                }
                LeaseCheck::PastDeadline => {
                    let f = [Failure::timed_out(&t, p.fail_rule, p.now)];
                    self.fail_locked(&mut tx, &f).await?;
                    tx.commit().await?;
                    Err(StoreError::TimedOut)
                }
                LeaseCheck::Cancelled => Err(StoreError::Cancelled),
                LeaseCheck::Lost => Err(StoreError::LeaseLost),
            }
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
            // A malformed token, or one of another task, can never match: nil is never issued.
            let nonce = |it: &TaskComplete| {
                uuid::Uuid::from_u128(LeaseToken::nonce_for(&it.token, it.id).unwrap_or(0))
            };
            let mut ids = Vec::with_capacity(items.len());
            let mut tokens = Vec::with_capacity(items.len());
            let mut results = Vec::with_capacity(items.len());
            for it in items.iter().filter(|it| it.next.is_none()) {
                ids.push(it.id);
                tokens.push(nonce(it));
                results.push(it.result.clone());
            }
            let mut tx = self.begin_hot().await?;
            // Fast path: one statement completes every item that `lease::check` would find
            // `Held` (the same conditions, on the deadline the claim stored). What it leaves is
            // locked and read below.
            // `frees`: finishing it lets another task of its key or limited queue start, so the
            // queue's claimers are woken (on every node) instead of waiting for a poll.
            type Done = (i64, Timestamp, String, bool, String, Option<Timestamp>);
            let mut done: Vec<(TaskState, Done)> = if ids.is_empty() {
                vec![]
            } else {
                sqlx::query_as::<_, Done>(sql!(leases, complete_held))
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
                let d: Option<Done> = sqlx::query_as(sql!(leases, complete_to_next_stage))
                    .bind(it.id)
                    .bind(nonce(it))
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
            let done: HashMap<i64, LeaseOutcome> = done
                .into_iter()
                .map(|(state, r)| {
                    let labels = TaskLabels {
                        queue: r.2,
                        kind: r.4,
                        attempted_at: r.5,
                    };
                    let ok = LeaseOutcome::Ok {
                        state,
                        run_at: r.1,
                        labels,
                    };
                    (r.0, ok)
                })
                .collect();
            if done.len() == items.len() {
                tx.commit().await?;
                return Ok(items.iter().map(|it| done[&it.id].clone()).collect());
            }
            let missing: Vec<i64> = items
                .iter()
                .map(|i| i.id)
                .filter(|i| !done.contains_key(i))
                .collect();
            let sql = sql!(tasks, lock_many);
            let rows = sqlx::query(sql).bind(&missing).fetch_all(&mut *tx).await?;
            let rows: HashMap<i64, PgRow> = rows
                .into_iter()
                .map(|r| (r.get::<i64, _>("id"), r))
                .collect();
            let mut timed_out = vec![];
            let mut out = Vec::with_capacity(items.len());
            for it in items {
                if let Some(o) = done.get(&it.id) {
                    out.push(o.clone());
                    continue;
                }
                let Some(row) = rows.get(&it.id) else {
                    out.push(LeaseOutcome::NotFound);
                    continue;
                };
                let t = decode(row)?;
                let check = lease::check(&t, row.nonce("lease_token")?, &it.token, now);
                match check {
                    LeaseCheck::CancelRequested => {
                        // The work was done, but a cancel won: keep its result, end it cancelled.
                        sqlx::query(sql!(leases, complete_cancelled))
                            .bind(it.id)
                            .bind(now)
                            .bind(&it.result)
                            .execute(&mut *tx)
                            .await?;
                        self.notify(&mut tx, std::slice::from_ref(&t.queue)).await?;
                    }
                    LeaseCheck::PastDeadline => {
                        timed_out.push(Failure::timed_out(&t, fail_rule, now))
                    }
                    // The fast path took every held item; one seen again in the same call
                    // (a duplicate id) finds it completed.
                    LeaseCheck::Held | LeaseCheck::Cancelled | LeaseCheck::Lost => {}
                }
                out.push(check.refusal());
            }
            self.fail_locked(&mut tx, &timed_out).await?;
            tx.commit().await?;
            Ok(out)
        })
        .await
    }

    async fn task_release(&self, p: TaskReleaseParams<'_>) -> Result<Vec<Released>> {
        crate::portable::task_release(self, p).await
    }

    async fn task_lease_token(&self, id: i64) -> Result<Option<String>> {
        const SQL: &str =
            "SELECT lease_token FROM docket_tasks WHERE id = $1 AND state = 'running'";
        let t: Option<Option<uuid::Uuid>> = sqlx::query_scalar(SQL)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(t.flatten().map(|u| {
            LeaseToken {
                nonce: u.as_u128(),
                id,
            }
            .to_string()
        }))
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
            let sql = sql!(tasks, lock_many);
            let rows = sqlx::query(sql).bind(&ids).fetch_all(&mut *tx).await?;
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
                // A worker's failure is taken past the deadline too (it is the same end); a
                // cancel requested meanwhile is the fail rule's to apply.
                let check = lease::check(&t, row.nonce("lease_token")?, &it.token, now);
                let applies = matches!(
                    check,
                    LeaseCheck::Held | LeaseCheck::PastDeadline | LeaseCheck::CancelRequested
                );
                if !applies {
                    out.push(check.refusal());
                    continue;
                }
                // The same id twice in one batch: the second finds it failed already.
                if !touched.insert(it.id) {
                    out.push(LeaseOutcome::LeaseLost);
                    continue;
                }
                let d = fail_rule(&t, now, it.retry_in, it.permanent);
                let f = Failure::new(&t, d, &it.error, worker, now);
                out.push(f.outcome());
                apply.push(f);
            }
            self.fail_locked(&mut tx, &apply).await?;
            tx.commit().await?;
            Ok(out)
        })
        .await
    }
}
