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
