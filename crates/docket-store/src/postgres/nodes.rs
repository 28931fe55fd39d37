//! PostgreSQL: the node registry.

use super::*;

#[async_trait]
impl NodeStore for PgStore {
    async fn node_heartbeat(&self, n: &NodeRecord) -> Result<()> {
        sqlx::query(sql!(nodes, heartbeat))
            .bind(&n.name)
            .bind(n.started_at)
            .bind(n.heartbeat_at)
            .bind(&n.version)
            .bind(&n.info)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn node_stop(&self, p: NodeStopParams<'_>) -> Result<()> {
        let NodeStopParams { name, now } = p;
        sqlx::query("UPDATE docket_nodes SET stopped_at = $2 WHERE name = $1")
            .bind(name)
            .bind(now)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn node_list(&self) -> Result<Vec<NodeRecord>> {
        let rows = sqlx::query("SELECT * FROM docket_nodes ORDER BY name")
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(crate::row::node).collect()
    }

    async fn node_drain(&self, p: NodeDrainParams<'_>) -> Result<Option<u64>> {
        let p = &p;
        again(|| async move {
            let p = p.clone();
            let mut tx = self.pool.begin().await?;
            let found = sqlx::query(sql!(nodes, drain))
                .bind(p.name)
                .bind(p.drain)
                .bind(p.now)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if found == 0 {
                return Ok(None);
            }
            let mut moved = 0;
            if p.drain {
                let mut queues: Vec<String> = sqlx::query_scalar(sql!(nodes, hand_over_tasks))
                    .bind(p.name)
                    .bind(p.to)
                    .fetch_all(&mut *tx)
                    .await?;
                moved = queues.len() as u64;
                queues.sort();
                queues.dedup();
                // Claimers on every node look at these queues again.
                self.notify(&mut tx, &queues).await?;
            }
            tx.commit().await?;
            Ok(Some(moved))
        })
        .await
    }

    async fn worker_report(&self, p: WorkerReportParams<'_>) -> Result<()> {
        sqlx::query(sql!(nodes, worker_report))
            .bind(p.name)
            .bind(p.report)
            .bind(p.now)
            .bind(p.interval_ms)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn worker_list(&self) -> Result<Vec<WorkerRecord>> {
        let rows = sqlx::query("SELECT * FROM docket_workers ORDER BY name")
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(crate::row::worker).collect()
    }
}
