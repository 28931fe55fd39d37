//! MySQL: the node registry.

use super::*;

#[async_trait]
impl NodeStore for MySqlStore {
    async fn node_heartbeat(&self, n: &NodeRecord) -> Result<()> {
        sqlx::query(sql!(nodes, heartbeat))
            .bind(&n.name)
            .bind(dt(n.started_at))
            .bind(dt(n.heartbeat_at))
            .bind(&n.version)
            .bind(n.info.to_string())
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn node_stop(&self, p: NodeStopParams<'_>) -> Result<()> {
        let NodeStopParams { name, now } = p;
        sqlx::query("UPDATE docket_nodes SET stopped_at = ? WHERE name = ?")
            .bind(dt(now))
            .bind(name)
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
        let mut tx = self.begin().await?;
        // MySQL's affected rows count matched rows (FOUND_ROWS), so a node already drained is
        // found too.
        let found = sqlx::query(sql!(nodes, drain))
            .bind(p.drain)
            .bind(dt(p.now))
            .bind(p.name)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if found == 0 {
            return Ok(None);
        }
        let mut moved = 0;
        if p.drain {
            moved = sqlx::query(sql!(nodes, hand_over_tasks))
                .bind(p.to)
                .bind(p.name)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        }
        tx.commit().await?;
        if p.drain {
            self.wake.all();
        }
        Ok(Some(moved))
    }

    async fn worker_report(&self, p: WorkerReportParams<'_>) -> Result<()> {
        sqlx::query(sql!(nodes, worker_report))
            .bind(p.name)
            .bind(p.report.to_string())
            .bind(dt(p.now))
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
