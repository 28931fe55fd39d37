//! PostgreSQL: claims and the calls made under a lease: heartbeat, complete, fail. Which call
//! applies and what it writes is `docket_core::lease`'s; this file locks, fetches and writes.

use super::*;
use docket_core::lease::LeaseToken;

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
        crate::portable::task_heartbeat(self, p).await
    }

    async fn task_complete_many(&self, p: TaskCompleteManyParams<'_>) -> Result<Vec<LeaseOutcome>> {
        crate::portable::task_complete_many(self, p).await
    }

    async fn task_release(&self, p: TaskReleaseParams<'_>) -> Result<Vec<Released>> {
        crate::portable::task_release(self, p).await
    }

    async fn task_lease_token(&self, id: i64) -> Result<Option<String>> {
        crate::portable::task_lease_token(self, id).await
    }

    async fn task_fail_many(&self, p: TaskFailManyParams<'_>) -> Result<Vec<LeaseOutcome>> {
        crate::portable::task_fail_many(self, p).await
    }
}
