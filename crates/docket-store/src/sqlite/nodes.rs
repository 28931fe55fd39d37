//! SQLite: the node registry.

use super::*;

#[async_trait]
impl NodeStore for SqliteStore {
    async fn node_heartbeat(&self, n: &NodeRecord) -> Result<()> {
        let mut tx = self.begin().await?;
        sqlx::query(
            "INSERT INTO docket_nodes (name, started_at, heartbeat_at, stopped_at, version, info) \
             VALUES (?1, ?2, ?3, NULL, ?4, ?5) ON CONFLICT (name) DO UPDATE SET \
             started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at, \
             stopped_at = NULL, version = excluded.version, info = excluded.info",
        )
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
        rows.iter()
            .map(|r| {
                Ok(NodeRecord {
                    name: r.try_get("name")?,
                    started_at: time(r, "started_at")?,
                    heartbeat_at: time(r, "heartbeat_at")?,
                    stopped_at: time_opt(r, "stopped_at")?,
                    version: r.try_get("version")?,
                    info: json(r, "info")?,
                })
            })
            .collect()
    }
}
