//! SQLite: what the maintenance services run: promote, rescue, expire, prune.

use super::*;

#[async_trait]
impl MaintenanceStore for SqliteStore {
    async fn task_promote(&self, p: TaskPromoteParams) -> Result<Promoted> {
        let TaskPromoteParams { now, limit } = p;
        let mut tx = self.begin().await?;
        let queues: Vec<String> =
            sqlx::query_scalar(include_str!("sql/maintenance_task_promote.sql"))
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

    async fn task_rescue(&self, p: TaskRescueParams) -> Result<Vec<TaskLabels>> {
        let TaskRescueParams {
            now,
            limit,
            fail_rule,
        } = p;
        let mut tx = self.begin().await?;
        let sql = format!(
            "SELECT {COLS} FROM docket_tasks WHERE state = 'running' AND lease_expires_at < ? \
               AND namespace IS NULL ORDER BY lease_expires_at LIMIT ?"
        );
        let rows = sqlx::query(&sql)
            .bind(us(now))
            .bind(limit)
            .fetch_all(&mut *tx)
            .await?;
        let mut apply = Vec::with_capacity(rows.len());
        for r in &rows {
            let t = decode(r)?;
            let d = fail_rule(&t, now, None, false);
            let why = if past_deadline(&t, now) {
                TIMEOUT_MESSAGE
            } else {
                LOST_MESSAGE
            };
            let e = error_entry(&t, why, None, now);
            apply.push((t, d, e));
        }
        Self::apply_failures(&mut tx, &apply, now).await?;
        tx.commit().await?;
        self.wake_queues(apply.iter().map(|(t, _, _)| &t.queue));
        Ok(apply.iter().map(|(t, _, _)| TaskLabels::of(t)).collect())
    }

    async fn task_expire(&self, p: TaskExpireParams) -> Result<u64> {
        let TaskExpireParams { now, limit } = p;
        let mut tx = self.begin().await?;
        let r = sqlx::query(include_str!("sql/maintenance_task_expire.sql"))
            .bind(us(now))
            .bind(now.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))
            .bind(limit)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(r.rows_affected())
    }

    async fn task_prune(&self, p: TaskPruneParams) -> Result<u64> {
        let mut tx = self.begin().await?;
        let r = sqlx::query(include_str!("sql/maintenance_task_prune.sql"))
            .bind(us(p.now))
            .bind(ms(p.retention_completed))
            .bind(ms(p.retention_failed))
            .bind(p.limit)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(r.rows_affected())
    }

    async fn aux_prune(&self, p: AuxPruneParams) -> Result<AuxPruned> {
        let cut = |d: Duration| us(docket_core::time::sub(p.now, d));
        let mut tx = self.begin().await?;
        let notifications = sqlx::query(include_str!("sql/maintenance_aux_prune.sql"))
            .bind(cut(p.notifications))
            .bind(p.limit)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        let audit = sqlx::query(include_str!("sql/maintenance_aux_prune_2.sql"))
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
        tx.commit().await?;
        Ok(AuxPruned {
            workers,
            notifications,
            audit,
            nodes,
        })
    }

    async fn task_rotate(&self, _p: TaskRotateParams) -> Result<Rotation> {
        // One table here: the ring of slots is PostgreSQL's (migration 0021).
        Ok(Rotation::Unsupported)
    }
}
