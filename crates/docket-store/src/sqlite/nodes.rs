//! SQLite: the node registry.

use super::*;

#[async_trait]
impl NodeStore for SqliteStore {
    async fn node_heartbeat(&self, n: &NodeRecord) -> Result<()> {
        let mut tx = self.begin().await?;
        sqlx::query(sql!(nodes, heartbeat))
            .bind(&n.name)
            .bind(us(n.started_at))
            .bind(us(n.heartbeat_at))
            .bind(&n.version)
            .bind(n.info.to_string())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn node_stop(&self, p: NodeStopParams<'_>) -> Result<()> {
        let NodeStopParams { name, now } = p;
        let mut tx = self.begin().await?;
        sqlx::query("UPDATE docket_nodes SET stopped_at = ?2 WHERE name = ?1")
            .bind(name)
            .bind(us(now))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn node_list(&self) -> Result<Vec<NodeRecord>> {
        let rows = sqlx::query("SELECT * FROM docket_nodes ORDER BY name")
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(crate::row::node).collect()
    }

    async fn node_drain(&self, p: NodeDrainParams<'_>) -> Result<Option<u64>> {
        let mut tx = self.begin().await?;
        let found = sqlx::query(sql!(nodes, drain))
            .bind(p.name)
            .bind(p.drain)
            .bind(us(p.now))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if found == 0 {
            return Ok(None);
        }
        let mut moved = 0;
        if p.drain {
            moved = sqlx::query(sql!(nodes, hand_over_tasks))
                .bind(p.name)
                .bind(p.to)
                .execute(&mut *tx)
                .await?
                .rows_affected();
        }
        tx.commit().await?;
        if p.drain {
            // Tasks that may now run anywhere (or on `to`): claimers look again.
            self.wake.all();
        }
        Ok(Some(moved))
    }

    async fn worker_report(&self, p: WorkerReportParams<'_>) -> Result<()> {
        let mut tx = self.begin().await?;
        sqlx::query(sql!(nodes, worker_report))
            .bind(p.name)
            .bind(p.report.to_string())
            .bind(us(p.now))
            .bind(p.interval_ms)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn worker_list(&self) -> Result<Vec<WorkerRecord>> {
        let rows = sqlx::query("SELECT * FROM docket_workers ORDER BY name")
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(crate::row::worker).collect()
    }
}
