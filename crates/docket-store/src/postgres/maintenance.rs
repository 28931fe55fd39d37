//! PostgreSQL: what the maintenance services run: promote, rescue, expire, prune.

use super::*;

#[async_trait]
impl MaintenanceStore for PgStore {
    async fn task_promote(&self, p: TaskPromoteParams) -> Result<Promoted> {
        let p = &p;
        again(|| async move {
            let p = p.clone();
            let TaskPromoteParams { now, limit } = p;
            let mut tx = self.pool.begin().await?;
            let queues: Vec<String> =
                sqlx::query_scalar(include_str!("sql/maintenance_task_promote.sql"))
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

    async fn task_rescue(&self, p: TaskRescueParams) -> Result<Vec<TaskLabels>> {
        let p = &p;
        again(|| async move {
            let p = p.clone();
            let TaskRescueParams {
                now,
                limit,
                fail_rule,
            } = p;
            let mut tx = self.pool.begin().await?;
            let sql = format!(
            "SELECT {COLS} FROM docket_tasks WHERE state = 'running' AND lease_expires_at < $1 \
               AND namespace IS NULL \
             ORDER BY lease_expires_at LIMIT $2 FOR UPDATE SKIP LOCKED"
        );
            let rows = sqlx::query(&sql)
                .bind(now)
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
            self.notify_freed(&mut tx, &apply).await?;
            tx.commit().await?;
            Ok(apply.iter().map(|(t, _, _)| TaskLabels::of(t)).collect())
        })
        .await
    }

    async fn task_expire(&self, p: TaskExpireParams) -> Result<u64> {
        let p = &p;
        again(|| async move {
            let p = p.clone();
            let TaskExpireParams { now, limit } = p;
            let r = sqlx::query(include_str!("sql/maintenance_task_expire.sql"))
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
            let r = sqlx::query(include_str!("sql/maintenance_task_prune.sql"))
                .bind(p.now)
                .bind(ms(p.retention_completed))
                .bind(ms(p.retention_failed))
                .bind(p.limit)
                .execute(&self.pool)
                .await?;
            Ok(r.rows_affected())
        })
        .await
    }

    async fn aux_prune(&self, p: AuxPruneParams) -> Result<AuxPruned> {
        let cut = |d: Duration| docket_core::time::sub(p.now, d);
        let notifications = sqlx::query(include_str!("sql/maintenance_aux_prune.sql"))
            .bind(cut(p.notifications))
            .bind(p.limit)
            .execute(&self.pool)
            .await?
            .rows_affected();
        let audit = sqlx::query(include_str!("sql/maintenance_aux_prune_2.sql"))
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
        Ok(AuxPruned {
            workers,
            notifications,
            audit,
            nodes,
        })
    }
}
