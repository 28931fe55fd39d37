//! PostgreSQL: what the maintenance services run: promote, rescue, expire, prune, the ring of
//! slots (migration 0021).

use super::*;
use crate::driver::{args, stmt, DriverTx};

#[async_trait]
impl MaintenanceStore for PgStore {
    async fn task_promote(&self, p: TaskPromoteParams) -> Result<Promoted> {
        let p = &p;
        again(|| async move {
            let p = p.clone();
            let TaskPromoteParams { now, limit } = p;
            let mut tx = self.pool.begin().await?;
            let queues: Vec<String> = sqlx::query_scalar(sql!(maintenance, promote))
                .bind(now)
                .bind(limit)
                .fetch_all(&mut *tx)
                .await?;
            let count = queues.len() as u64;
            let mut qs = queues;
            qs.sort();
            qs.dedup();
            self.notify(&mut tx, &qs).await?;
            tx.commit().await?;
            Ok(Promoted { count, queues: qs })
        })
        .await
    }

    async fn task_rescue_list(&self, p: TaskRescueListParams) -> Result<Vec<Task>> {
        let sql = sql!(maintenance, rescue_list);
        let rows = sqlx::query(sql)
            .bind(p.now)
            .bind(p.limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(decode).collect()
    }

    async fn task_rescue_many(&self, p: TaskRescueManyParams) -> Result<Vec<TaskLabels>> {
        let p = &p;
        again(|| async move {
            let mut tx = self.pool.begin().await?;
            let done = Self::apply_failures(&mut tx, &p.items, Some(p.now)).await?;
            let rescued: Vec<&Failure> = p.items.iter().filter(|f| done.contains(&f.id)).collect();
            let qs: Vec<String> = rescued.iter().map(|f| f.labels.queue.clone()).collect();
            self.notify(&mut tx, &qs).await?;
            tx.commit().await?;
            Ok(rescued.into_iter().map(|f| f.labels.clone()).collect())
        })
        .await
    }

    async fn task_expire(&self, p: TaskExpireParams) -> Result<u64> {
        let p = &p;
        again(|| async move {
            let p = p.clone();
            let TaskExpireParams { now, limit } = p;
            let r = sqlx::query(sql!(maintenance, expire))
                .bind(now)
                .bind(limit)
                .execute(&self.pool)
                .await?;
            Ok(r.rows_affected())
        })
        .await
    }

    async fn task_prune(&self, p: TaskPruneParams) -> Result<u64> {
        let p = &p;
        again(|| async move {
            let p = p.clone();
            // Queues with their own retention are pruned by their own cutoffs; the rest by the
            // defaults. One statement, one small batch: it never holds many rows locked.
            // Under the kept counts' lock, so what it subtracts from them matches what they
            // counted (docket_core::counts).
            let mut tx = crate::driver::Driver::begin(self).await?;
            let counted_to = crate::portable::counts_lock(&mut tx).await?;
            let rows = tx
                .fetch(
                    stmt!(maintenance, prune),
                    args![
                        p.now,
                        ms(p.retention_completed),
                        ms(p.retention_failed),
                        p.limit
                    ],
                )
                .await?;
            let rows = crate::portable::pruned_rows(&rows)?;
            crate::portable::counts_forget(&mut tx, counted_to, &rows).await?;
            tx.commit().await?;
            Ok(rows.len() as u64)
        })
        .await
    }

    async fn aux_prune(&self, p: AuxPruneParams) -> Result<AuxPruned> {
        let cut = |d: Duration| docket_core::time::sub(p.now, d);
        let notifications = sqlx::query(sql!(maintenance, prune_notifications))
            .bind(cut(p.notifications))
            .bind(p.limit)
            .execute(&self.pool)
            .await?
            .rows_affected();
        let audit = sqlx::query(sql!(maintenance, prune_audit))
            .bind(cut(p.audit))
            .bind(p.limit)
            .execute(&self.pool)
            .await?
            .rows_affected();
        let nodes =
            sqlx::query("DELETE FROM docket_nodes WHERE COALESCE(stopped_at, heartbeat_at) < $1")
                .bind(cut(p.nodes))
                .execute(&self.pool)
                .await?
                .rows_affected();
        // Workers leave with the nodes' retention: a report that old is of a worker gone.
        let workers = sqlx::query("DELETE FROM docket_workers WHERE reported_at < $1")
            .bind(cut(p.nodes))
            .execute(&self.pool)
            .await?
            .rows_affected();
        let task_events = sqlx::query(sql!(maintenance, prune_task_events))
            .bind(cut(p.notifications))
            .bind(p.limit)
            .execute(&self.pool)
            .await?
            .rows_affected();
        Ok(AuxPruned {
            workers,
            notifications,
            audit,
            nodes,
            task_events,
        })
    }

    async fn task_rotate(&self, p: TaskRotateParams) -> Result<Rotation> {
        let row: Option<(i16, Option<Timestamp>)> =
            sqlx::query_as("SELECT current, rotated_at FROM docket_task_slots")
                .fetch_optional(&self.pool)
                .await?;
        let Some((current, rotated_at)) = row else {
            // Deleted by hand: inserts fall back to slot 0 meanwhile; the ring starts again.
            sqlx::query(
                "INSERT INTO docket_task_slots (current) VALUES (1) ON CONFLICT DO NOTHING",
            )
            .execute(&self.pool)
            .await?;
            return Ok(Rotation::NotDue);
        };
        if rotated_at.is_some_and(|t| p.now < docket_core::time::add(t, p.every)) {
            return Ok(Rotation::NotDue);
        }
        let next = current % SLOTS + 1;
        // The leaf is named, not reached through the parent: TRUNCATE and LOCK need it, and a
        // statement on the parent would lock every slot.
        let leaf = format!("docket_tasks_live_{next}");
        let left: i64 = sqlx::query_scalar(&format!(
            "SELECT count(*) FROM (SELECT FROM {leaf} LIMIT $1) s"
        ))
        .bind(p.most_moved.saturating_add(1))
        .fetch_one(&self.pool)
        .await?;
        if left > p.most_moved {
            return Ok(Rotation::Full);
        }
        // Most of what is left moves before the lock is taken, in small batches that skip rows
        // a claim or a completion holds; only what arrives meanwhile moves under the lock.
        let mut moved = 0;
        loop {
            let n = again(|| async {
                let sql = crate::sql::fill(sql!(maintenance, ring_move_batch), &[("leaf", &leaf)]);
                Ok(sqlx::query(&sql)
                    .bind(next)
                    .bind(p.batch)
                    .execute(&self.pool)
                    .await?
                    .rows_affected())
            })
            .await?;
            moved += n;
            if (n as i64) < p.batch.max(1) {
                break;
            }
        }
        let mut tx = self.pool.begin().await?;
        let mine: bool = sqlx::query_scalar(
            "SELECT pg_try_advisory_xact_lock(hashtextextended('docket-rotate', 0))",
        )
        .fetch_one(&mut *tx)
        .await?;
        let still: i16 = sqlx::query_scalar("SELECT current FROM docket_task_slots FOR UPDATE")
            .fetch_one(&mut *tx)
            .await?;
        if !mine || still != current {
            return Ok(Rotation::NotDue);
        }
        // A leaf no row was ever written to since its last truncate has no pages.
        let size: i64 = sqlx::query_scalar("SELECT pg_relation_size($1::regclass)")
            .bind(&leaf)
            .fetch_one(&mut *tx)
            .await?;
        let truncated = size > 0;
        if truncated {
            let ms = p.lock_timeout.as_millis().clamp(1, i32::MAX as u128);
            sqlx::query(&format!("SET LOCAL lock_timeout = {ms}"))
                .execute(&mut *tx)
                .await?;
            let lock = sqlx::query(&format!("LOCK TABLE {leaf} IN ACCESS EXCLUSIVE MODE"))
                .execute(&mut *tx)
                .await;
            match lock {
                Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("55P03") => {
                    return Ok(Rotation::Blocked);
                }
                r => {
                    r?;
                }
            }
            // Under the lock nothing can reach the leaf: what is moved now is all that is left.
            moved += sqlx::query("UPDATE docket_tasks_live SET slot = 0 WHERE slot = $1")
                .bind(next)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            sqlx::query(&format!("TRUNCATE {leaf}"))
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query("UPDATE docket_task_slots SET current = $1, rotated_at = $2")
            .bind(next)
            .bind(p.now)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Rotation::Turned {
            slot: next,
            moved,
            truncated,
        })
    }
}

/// Ring slots of migration 0021 (`docket_tasks_live_1` … `_4`).
const SLOTS: i16 = 4;
