//! MySQL: wake-ups, process notifications and their delivery cursors (sinks).

use super::*;

#[async_trait]
impl NotificationStore for MySqlStore {
    async fn listen(&self) -> Result<Option<tokio::sync::mpsc::Receiver<Wake>>> {
        // Only this process's changes: other processes' are seen by polling.
        Ok(Some(self.wake.listen()))
    }

    async fn notification_list(&self, p: NotificationListParams<'_>) -> Result<Vec<Notification>> {
        let NotificationListParams {
            namespace,
            after,
            limit,
        } = p;
        let rows = sqlx::query(sql!(notifications, list))
            .bind(after)
            .bind(namespace)
            .bind(namespace)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(crate::row::notification).collect()
    }

    async fn notification_last_seq(&self) -> Result<i64> {
        Ok(sqlx::query_scalar(
            "SELECT CAST(COALESCE(max(seq), 0) AS SIGNED) FROM docket_notifications",
        )
        .fetch_one(&self.pool)
        .await?)
    }

    async fn sink_lease(&self, p: SinkLeaseParams<'_>) -> Result<Option<i64>> {
        let SinkLeaseParams {
            name,
            owner,
            until,
            now,
        } = p;
        let mut tx = self.begin().await?;
        sqlx::query(
            "INSERT INTO docket_sinks (name) VALUES (?) ON DUPLICATE KEY UPDATE name = name",
        )
        .bind(name)
        .execute(&mut *tx)
        .await?;
        let r = sqlx::query(sql!(notifications, sink_lease))
            .bind(owner)
            .bind(dt(until))
            .bind(name)
            .bind(owner)
            .bind(dt(now))
            .execute(&mut *tx)
            .await?;
        let seq = if r.rows_affected() == 1 {
            Some(
                sqlx::query_scalar("SELECT seq FROM docket_sinks WHERE name = ?")
                    .bind(name)
                    .fetch_one(&mut *tx)
                    .await?,
            )
        } else {
            None
        };
        tx.commit().await?;
        Ok(seq)
    }

    async fn sink_advance(&self, p: SinkAdvanceParams<'_>) -> Result<bool> {
        let SinkAdvanceParams { name, owner, seq } = p;
        let r = sqlx::query("UPDATE docket_sinks SET seq = ? WHERE name = ? AND owner = ?")
            .bind(seq)
            .bind(name)
            .bind(owner)
            .execute(&self.pool)
            .await?;
        Ok(r.rows_affected() == 1)
    }
}
