//! PostgreSQL: the maintenance steps whose batch is chosen per backend
//! ([`crate::driver::MaintenanceDriver`]), and the ring of slots (migration 0021).

use super::*;
use crate::driver::{args, stmt, DriverTx};
use crate::{Rotation, TaskPruneParams, TaskRotateParams};
use docket_core::TaskState;

#[async_trait]
impl crate::driver::MaintenanceDriver for PgStore {
    async fn promote_in(&self, tx: &mut PgTx, now: Timestamp, limit: i64) -> Result<Vec<String>> {
        crate::portable::promote_returning(tx, stmt!(maintenance, promote), now, limit).await
    }

    async fn expire_in(&self, tx: &mut PgTx, now: Timestamp, limit: i64) -> Result<u64> {
        tx.execute(stmt!(maintenance, expire), args![now, limit])
            .await
    }

    async fn prune_in(
        &self,
        tx: &mut PgTx,
        p: &TaskPruneParams,
    ) -> Result<Vec<(String, TaskState, Option<Timestamp>)>> {
        crate::portable::prune_returning(tx, stmt!(maintenance, prune), p).await
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
        if p.min_fill_bytes > 0
            && rotated_at.is_some_and(|t| p.now < docket_core::time::add(t, p.idle_every))
        {
            let filling = format!("docket_tasks_live_{current}");
            let size: i64 = sqlx::query_scalar("SELECT pg_relation_size($1::regclass)")
                .bind(&filling)
                .fetch_one(&self.pool)
                .await?;
            if size < p.min_fill_bytes {
                return Ok(Rotation::NotDue);
            }
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
            // The schema's ring: another schema's turn must not make this one skip (see lock_key).
            "SELECT pg_try_advisory_xact_lock(hashtextextended(current_schema() || ':docket-rotate', 0))",
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
