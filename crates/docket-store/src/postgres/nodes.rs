//! PostgreSQL: the node registry.

use super::*;

#[async_trait]
impl NodeStore for PgStore {
    async fn node_heartbeat(&self, n: &NodeRecord) -> Result<()> {
        sqlx::query(
            "INSERT INTO docket_nodes (name, started_at, heartbeat_at, stopped_at, version, info) \
             VALUES ($1, $2, $3, NULL, $4, $5) ON CONFLICT (name) DO UPDATE SET \
             started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at, \
             stopped_at = NULL, version = excluded.version, info = excluded.info",
        )
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
        rows.iter()
            .map(|r| {
                Ok(NodeRecord {
                    name: r.try_get("name")?,
                    started_at: r.try_get("started_at")?,
                    heartbeat_at: r.try_get("heartbeat_at")?,
                    stopped_at: r.try_get("stopped_at")?,
                    version: r.try_get("version")?,
                    info: r.try_get("info")?,
                })
            })
            .collect()
    }
}
