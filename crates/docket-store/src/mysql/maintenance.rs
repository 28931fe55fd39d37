//! MySQL: the maintenance steps whose batch is chosen per backend
//! ([`crate::driver::MaintenanceDriver`]), and the move of finished tasks to
//! `docket_tasks_done` (0004).
//!
//! MySQL cannot `LIMIT` a subquery of `IN` nor read the table a `DELETE` changes, so each job
//! first selects its batch of ids (locked, skipping rows other nodes hold), then changes them.

use super::*;
use crate::{Rotation, TaskPruneParams, TaskRotateParams};

/// Fills `sql`'s `{ids}` with `ids`' placeholders, binds them and runs it.
async fn by_ids(tx: &mut Transaction<'_, MySql>, sql: &str, ids: &[i64]) -> Result<u64> {
    if ids.is_empty() {
        return Ok(0);
    }
    let sql = fill(sql, &[("ids", &marks(ids.len()))]);
    let mut q = sqlx::query(&sql);
    for id in ids {
        q = q.bind(id);
    }
    Ok(q.execute(&mut **tx).await?.rows_affected())
}

#[async_trait]
impl crate::driver::MaintenanceDriver for MySqlStore {
    async fn promote_in(&self, t: &mut MySqlTx, now: Timestamp, limit: i64) -> Result<Vec<String>> {
        let tx = &mut t.tx;
        // Found without locks, then locked by primary key (see `expire_in`).
        let found: Vec<i64> = sqlx::query_scalar(sql!(maintenance, promotable))
            .bind(dt(now))
            .bind(dt(now))
            .bind(limit)
            .fetch_all(&mut **tx)
            .await?;
        let rows = if found.is_empty() {
            vec![]
        } else {
            let sql = fill(
                sql!(maintenance, lock_promotable),
                &[("ids", &marks(found.len()))],
            );
            let mut q = sqlx::query(&sql).bind(dt(now));
            for id in &found {
                q = q.bind(id);
            }
            q.fetch_all(&mut **tx).await?
        };
        let mut ids = Vec::with_capacity(rows.len());
        let mut qs = Vec::with_capacity(rows.len());
        for r in &rows {
            ids.push(r.try_get::<i64, _>("id")?);
            qs.push(text(r, "queue")?);
        }
        by_ids(
            tx,
            "UPDATE docket_tasks SET state = 'available' WHERE id IN ({ids})",
            &ids,
        )
        .await?;
        Ok(qs)
    }

    async fn expire_in(&self, t: &mut MySqlTx, now: Timestamp, limit: i64) -> Result<u64> {
        let tx = &mut t.tx;
        // Found without locks, then locked by primary key (as `task_rotate` does): a claim's
        // SKIP LOCKED must not meet waiting tasks this job only looked at.
        let found: Vec<i64> = sqlx::query_scalar(sql!(maintenance, expirable))
            .bind(dt(now))
            .bind(limit)
            .fetch_all(&mut **tx)
            .await?;
        let ids: Vec<i64> = if found.is_empty() {
            vec![]
        } else {
            let sql = fill(
                sql!(maintenance, lock_expirable),
                &[("ids", &marks(found.len()))],
            );
            let mut q = sqlx::query_scalar(&sql).bind(dt(now));
            for id in &found {
                q = q.bind(id);
            }
            q.fetch_all(&mut **tx).await?
        };
        let n = if ids.is_empty() {
            0
        } else {
            let sql = fill(sql!(maintenance, expire), &[("ids", &marks(ids.len()))]);
            let mut q = sqlx::query(&sql)
                .bind(dt(now))
                .bind(now.to_rfc3339_opts(chrono::SecondsFormat::Micros, true));
            for id in &ids {
                q = q.bind(id);
            }
            q.execute(&mut **tx).await?.rows_affected()
        };
        Ok(n)
    }

    async fn prune_in(
        &self,
        t: &mut MySqlTx,
        p: &TaskPruneParams,
    ) -> Result<Vec<(String, TaskState, Option<Timestamp>)>> {
        let mut gone = vec![];
        let tx = &mut t.tx;
        let cut = |d: Duration| docket_core::time::sub(p.now, d);
        let mut n = 0;
        // docket_tasks_done (0004), then what `rotate` has not moved there yet.
        for table in ["docket_tasks_done", "docket_tasks"] {
            let left = p.limit - n as i64;
            if left <= 0 {
                break;
            }
            // Per-queue retention is read first, so the select compares each row with a bound
            // time.
            let sql = sql!(maintenance, prunable)
                .replace("FROM docket_tasks t", &format!("FROM {table} t"));
            let ids: Vec<i64> = sqlx::query_scalar(&sql)
                .bind(dt(cut(p.retention_completed)))
                .bind(dt(p.now))
                .bind(dt(cut(p.retention_failed)))
                .bind(dt(p.now))
                .bind(left)
                .fetch_all(&mut **tx)
                .await?;
            // Unlocked select (a locking one would lock the joined queue rows too): a task
            // retried since is no longer finished and stays.
            if ids.is_empty() {
                continue;
            }
            let sql = fill(
                sql!(maintenance, prune_lock),
                &[("table", table), ("ids", &marks(ids.len()))],
            );
            let mut q = sqlx::query(&sql);
            for id in &ids {
                q = q.bind(id);
            }
            let rows = q.fetch_all(&mut **tx).await?;
            let locked = rows
                .iter()
                .map(|r| r.try_get::<i64, _>("id"))
                .collect::<std::result::Result<Vec<i64>, _>>()?;
            n += by_ids(
                tx,
                &fill(sql!(maintenance, prune), &[("table", table)]),
                &locked,
            )
            .await?;
            MySqlStore::forget(tx, &locked).await?;
            gone.extend(crate::portable::pruned_rows(&rows)?);
        }
        Ok(gone)
    }

    async fn task_rotate(&self, p: TaskRotateParams) -> Result<Rotation> {
        // No ring here (PostgreSQL's 0021): finished tasks move to docket_tasks_done (0004).
        // Every node may run it at once; SKIP LOCKED gives each its own rows.
        let batch = p.batch.max(1);
        let mut moved = 0u64;
        for _ in 0..100 {
            let mut tx = self.begin().await?;
            // Found without locks, then locked by primary key: a locking scan may lock (and
            // at READ COMMITTED release again) rows it does not keep — on a small table it is a
            // scan of the whole table — and a claim's SKIP LOCKED would skip available tasks
            // meanwhile (seen: a claim of 2 waiting tasks answered none).
            let found: Vec<i64> = sqlx::query_scalar(sql!(maintenance, finished))
                .bind(batch)
                .fetch_all(&mut *tx)
                .await?;
            let ids: Vec<i64> = if found.is_empty() {
                vec![]
            } else {
                let sql = fill(
                    sql!(maintenance, lock_finished),
                    &[("ids", &marks(found.len()))],
                );
                let mut q = sqlx::query_scalar(&sql);
                for id in &found {
                    q = q.bind(id);
                }
                q.fetch_all(&mut *tx).await?
            };
            let sql = sql!(maintenance, archive);
            by_ids(&mut tx, sql, &ids).await?;
            by_ids(
                &mut tx,
                "DELETE FROM docket_tasks WHERE id IN ({ids})",
                &ids,
            )
            .await?;
            self.commit(tx).await?;
            moved += ids.len() as u64;
            // The last ones, or all of a full batch held by another node's move.
            if (found.len() as i64) < batch || ids.is_empty() {
                break;
            }
        }
        Ok(Rotation::Archived { moved })
    }
}
