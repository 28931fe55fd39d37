//! SQLite: what the maintenance services run: promote, rescue, expire, prune.

use super::*;
use crate::driver::{args, stmt, DriverTx};

#[async_trait]
impl MaintenanceStore for SqliteStore {
    async fn task_promote(&self, p: TaskPromoteParams) -> Result<Promoted> {
        let TaskPromoteParams { now, limit } = p;
        let mut tx = self.begin().await?;
        let queues: Vec<String> = sqlx::query_scalar(sql!(maintenance, promote))
            .bind(us(now))
            .bind(limit)
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        let count = queues.len() as u64;
        let mut qs = queues;
        qs.sort();
        qs.dedup();
        Ok(Promoted { count, queues: qs })
    }

    async fn task_rescue_list(&self, p: TaskRescueListParams) -> Result<Vec<Task>> {
        let sql = sql!(maintenance, rescue_list);
        let rows = sqlx::query(sql)
            .bind(us(p.now))
            .bind(p.limit)
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(decode).collect()
    }

    async fn task_rescue_many(&self, p: TaskRescueManyParams) -> Result<Vec<TaskLabels>> {
        let mut tx = self.begin().await?;
        let done = Self::apply_failures(&mut tx, &p.items, Some(p.now)).await?;
        tx.commit().await?;
        let rescued: Vec<&Failure> = p.items.iter().filter(|f| done.contains(&f.id)).collect();
        self.wake_queues(rescued.iter().map(|f| &f.labels.queue));
        Ok(rescued.into_iter().map(|f| f.labels.clone()).collect())
    }

    async fn task_expire(&self, p: TaskExpireParams) -> Result<u64> {
        let TaskExpireParams { now, limit } = p;
        let mut tx = self.begin().await?;
        let r = sqlx::query(sql!(maintenance, expire))
            .bind(us(now))
            .bind(now.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))
            .bind(limit)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(r.rows_affected())
    }

    async fn task_prune(&self, p: TaskPruneParams) -> Result<u64> {
        // The write transaction also holds the kept counts still (docket_core::counts).
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
    }

    async fn aux_prune(&self, p: AuxPruneParams) -> Result<AuxPruned> {
        let cut = |d: Duration| us(docket_core::time::sub(p.now, d));
        let mut tx = self.begin().await?;
        let notifications = sqlx::query(sql!(maintenance, prune_notifications))
            .bind(cut(p.notifications))
            .bind(p.limit)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        let audit = sqlx::query(sql!(maintenance, prune_audit))
            .bind(cut(p.audit))
            .bind(p.limit)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        let nodes =
            sqlx::query("DELETE FROM docket_nodes WHERE COALESCE(stopped_at, heartbeat_at) < ?1")
                .bind(cut(p.nodes))
                .execute(&mut *tx)
                .await?
                .rows_affected();
        // Workers leave with the nodes' retention: a report that old is of a worker gone.
        let workers = sqlx::query("DELETE FROM docket_workers WHERE reported_at < ?1")
            .bind(cut(p.nodes))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        let task_events = sqlx::query(sql!(maintenance, prune_task_events))
            .bind(cut(p.notifications))
            .bind(p.limit)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(AuxPruned {
            workers,
            notifications,
            audit,
            nodes,
            task_events,
        })
    }

    async fn task_rotate(&self, _p: TaskRotateParams) -> Result<Rotation> {
        // One table here: the ring of slots is PostgreSQL's (migration 0021).
        Ok(Rotation::Unsupported)
    }
}
