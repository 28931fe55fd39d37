//! MySQL: claims and the calls made under a lease: heartbeat, complete, fail.

use super::*;

#[async_trait]
impl LeaseStore for MySqlStore {
    async fn task_claim(&self, p: TaskClaimParams) -> Result<Vec<Task>> {
        if p.limit <= 0 {
            return Ok(vec![]);
        }
        // Two claimers that lock the same new lock row at once can deadlock inside InnoDB's
        // duplicate-key check, and on Galera two claims through different nodes that took the
        // same task fail certification at COMMIT (1213): the loser is rolled back whole, so it
        // is safe to go again (a growing random pause between tries). On Galera every claim
        // through another node is a rival for the same first tasks in claim order: a claim loses
        // about two rounds in three when three nodes claim flat out, so it gets 30 tries (10 left
        // one claim in a hundred answering 503 with 24 claim loops over three Galera nodes).
        let most = crate::driver::Driver::contended_tries(self);
        crate::driver::again_up_to(most, || self.claim_once(&p)).await
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

impl MySqlStore {
    async fn claim_once(&self, p: &TaskClaimParams) -> Result<Vec<Task>> {
        let mut tx = self.begin().await?;
        let q = sqlx::query(
            "SELECT paused, concurrency_limit, schedule_limit, fair, partition_weights FROM docket_queues WHERE name = ?",
        )
        .bind(&p.queue)
        .fetch_optional(&mut *tx)
        .await?;
        let (paused, queue_limit, schedule_limit): (bool, Option<i32>, Option<i32>) = match &q {
            Some(r) => (
                r.try_get("paused")?,
                r.try_get("concurrency_limit")?,
                r.try_get("schedule_limit")?,
            ),
            None => (false, None, None),
        };
        let limit = schedule_limit.map_or(p.limit, |l| p.limit.min(i64::from(l)));
        let fair = match &q {
            Some(r) if r.try_get::<bool, _>("fair")? => Some(Fairness {
                weights: text_opt(r, "partition_weights")?
                    .map(|w| serde_json::from_str(&w))
                    .transpose()
                    .map_err(|e| {
                        StoreError::Corrupt(format!("queue {}: partition_weights: {e}", p.queue))
                    })?
                    .unwrap_or_default(),
            }),
            _ => None,
        };
        if paused {
            tx.commit().await?;
            return Ok(vec![]);
        }
        // The subquery counting a key's running tasks is a plain read (a locking clause does
        // not reach into subqueries), so it does not block on other claimers' rows.
        let kinds = match &p.kinds {
            Some(k) if k.is_empty() => {
                tx.commit().await?;
                return Ok(vec![]);
            }
            Some(k) => format!("AND t.kind IN ({}) ", marks(k.len())),
            None => String::new(),
        };
        let stages = match &p.stages {
            Some(k) if k.is_empty() => {
                tx.commit().await?;
                return Ok(vec![]);
            }
            Some(k) => format!("AND t.stage IN ({}) ", marks(k.len())),
            None => String::new(),
        };
        let name = if fair.is_some() {
            sql!(leases, claim_candidates_fair)
        } else {
            sql!(leases, claim_candidates)
        };
        let filters: Vec<&String> = p
            .kinds
            .iter()
            .flatten()
            .chain(p.stages.iter().flatten())
            .collect();
        let cands = if let Some(f) = &fair {
            // Ranked unlocked (a window function cannot be locked), ordered by weight, then the
            // ones still available locked, in that order. Concurrent fair claims read the same
            // first ranks, so what another claim locked first is left out and the ranks read
            // again, until this claim has its limit or another claim held none of them (with
            // one reading, all but one of eight claims came back empty from a full queue:
            // docket-engine's test concurrent_fair_claims_on_two_nodes).
            let (per, fetch) = f.fetch(limit);
            let mut skip: Vec<i64> = vec![];
            loop {
                let skipped = if skip.is_empty() {
                    String::new()
                } else {
                    format!("AND t.id NOT IN ({}) ", marks(skip.len()))
                };
                let sql = fill(
                    name,
                    &[("kinds", &kinds), ("stages", &stages), ("skip", &skipped)],
                );
                let mut q = sqlx::query(&sql).bind(&p.queue).bind(&p.node);
                for k in &filters {
                    q = q.bind(*k);
                }
                for id in &skip {
                    q = q.bind(id);
                }
                let all = q
                    .bind(dt(p.now))
                    .bind(dt(p.now))
                    .bind(per)
                    .bind(fetch)
                    .fetch_all(&mut *tx)
                    .await?;
                let ranks = all
                    .iter()
                    .map(|r| Ok((text_opt(r, "partition_key")?, r.try_get("rn")?)))
                    .collect::<Result<Vec<_>>>()?;
                let order = f.order(&ranks);
                let ids: Vec<i64> = order
                    .iter()
                    .map(|i| all[*i].try_get("id"))
                    .collect::<std::result::Result<_, _>>()?;
                let mut locked = std::collections::HashSet::new();
                if !ids.is_empty() {
                    let sql = fill(sql!(leases, lock_available), &[("ids", &marks(ids.len()))]);
                    let mut lq = sqlx::query_scalar::<_, i64>(&sql);
                    for id in &ids {
                        lq = lq.bind(id);
                    }
                    locked.extend(lq.fetch_all(&mut *tx).await?);
                }
                let missed: Vec<i64> = ids
                    .iter()
                    .copied()
                    .filter(|id| !locked.contains(id))
                    .collect();
                if locked.len() as i64 >= limit || missed.is_empty() {
                    let mut all: Vec<Option<MySqlRow>> = all.into_iter().map(Some).collect();
                    let mut out = Vec::new();
                    for (i, id) in order.into_iter().zip(ids) {
                        if out.len() as i64 >= limit {
                            break;
                        }
                        if locked.contains(&id) {
                            out.extend(all[i].take());
                        }
                    }
                    break out;
                }
                skip.extend(missed);
            }
        } else {
            let sql = fill(name, &[("kinds", &kinds), ("stages", &stages)]);
            let mut q = sqlx::query(&sql).bind(&p.queue).bind(&p.node);
            for k in &filters {
                q = q.bind(*k);
            }
            q.bind(dt(p.now))
                .bind(dt(p.now))
                .bind(limit)
                .fetch_all(&mut *tx)
                .await?
        };
        if cands.is_empty() {
            tx.commit().await?;
            return Ok(vec![]);
        }
        let cands = cands
            .iter()
            .map(|r| {
                let key = text_opt(r, "concurrency_key")?;
                let limit: Option<i32> = r.try_get("concurrency_limit")?;
                Ok(ClaimCandidate {
                    id: r.try_get("id")?,
                    key: key.map(|k| (k, limit.unwrap_or(1))),
                    rate: text_opt(r, "rate_limit")?,
                    timeout_ms: r.try_get("timeout_ms")?,
                    process: r.try_get::<i64, _>("process")? != 0,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let keys = claim_keys(&cands);
        let rated = cands.iter().any(|c| c.rate.is_some());
        let mut rate_keys = vec![];
        let picked: Vec<&ClaimCandidate> = if queue_limit.is_none() && keys.is_empty() && !rated {
            cands.iter().collect()
        } else {
            // Serialise on the queue and on each key (lock rows, in key order), then count what
            // runs now: READ COMMITTED makes each count see every claim committed before this
            // one got the lock.
            let mut room = usize::MAX;
            if let Some(limit) = queue_limit {
                Self::lock(&mut tx, &format!("docket-queue:{}", p.queue)).await?;
                let running: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM docket_tasks WHERE state = 'running' AND queue = ?",
                )
                .bind(&p.queue)
                .fetch_one(&mut *tx)
                .await?;
                room = (limit as i64 - running).max(0) as usize;
            }
            let mut key_room: HashMap<String, i64> = HashMap::new();
            for (k, l) in &keys {
                Self::lock(&mut tx, &format!("docket-key:{k}")).await?;
                let running: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM docket_tasks WHERE concurrency_key = ? AND state = 'running'",
                )
                .bind(k)
                .fetch_one(&mut *tx)
                .await?;
                key_room.insert(k.clone(), *l as i64 - running);
            }
            // Rate limit keys last (their rows, in key order): one lock order for every claim.
            if rated {
                let mut d = self.tx_of(tx);
                rate_keys = crate::rate_limits::rate_lock(&mut d, &cands, p.now).await?;
                tx = d.into_inner();
            }
            let rate_room = crate::rate_limits::rate_room(&rate_keys, p.now);
            claim_pick(&cands, room, key_room, &rate_room)
        };
        if !rate_keys.is_empty() {
            let mut d = self.tx_of(tx);
            crate::rate_limits::rate_record(&mut d, &rate_keys, &cands, &picked, p.now).await?;
            tx = d.into_inner();
        }
        if picked.is_empty() {
            tx.commit().await?;
            return Ok(vec![]);
        }
        // Each task's lease by `docket_core::lease::claim_lease`, by a CASE on its id.
        let c = ClaimColumns::of(&picked, p.now, p.lease);
        let ids = &c.ids;
        let nonce = p.nonce.unwrap_or_else(LeaseToken::new_nonce);
        let sql = fill(
            sql!(leases, claim),
            &[
                ("leases", &"WHEN ? THEN ? ".repeat(ids.len())),
                ("ids", &marks(ids.len())),
            ],
        );
        let mut q = sqlx::query(&sql)
            .bind(dt(p.now))
            .bind(&p.worker)
            .bind(lease::nonce_hex(nonce));
        for (id, ms) in ids.iter().zip(&c.lease_ms) {
            q = q.bind(id).bind(ms);
        }
        for (id, at) in ids.iter().zip(&c.expires_at) {
            q = q.bind(id).bind(dt(*at));
        }
        q = q.bind(&p.node);
        for id in ids {
            q = q.bind(id);
        }
        let started = q.execute(&mut *tx).await?.rows_affected();
        if started != ids.len() as u64 {
            // A picked task was claimed elsewhere meanwhile: never start it twice. Rolled back
            // whole (dropping `tx`); the claim goes again.
            return Err(StoreError::Database {
                kind: DbErrorKind::Retryable,
                message: format!(
                    "{} of the {} tasks picked were claimed meanwhile",
                    ids.len() as u64 - started,
                    ids.len()
                ),
            });
        }
        let sql = fill(sql!(tasks, get_many), &[("ids", &marks(ids.len()))]);
        let mut q = sqlx::query(&sql);
        for id in ids {
            q = q.bind(id);
        }
        let rows = q.fetch_all(&mut *tx).await?;
        tx.commit().await?;
        let tasks = rows.iter().map(decode).collect::<Result<Vec<_>>>()?;
        Ok(claimed(tasks, nonce, p.now))
    }
}
