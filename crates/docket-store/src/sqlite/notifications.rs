//! SQLite: wake-ups, process notifications and their delivery cursors (sinks).

use super::*;

#[async_trait]
impl NotificationStore for SqliteStore {
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
            .bind(limit)
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(crate::row::notification).collect()
    }

    async fn notification_last_seq(&self) -> Result<i64> {
        Ok(
            sqlx::query_scalar("SELECT COALESCE(max(seq), 0) FROM docket_notifications")
                .fetch_one(&self.reader)
                .await?,
        )
    }

    async fn sink_lease(&self, p: SinkLeaseParams<'_>) -> Result<Option<i64>> {
        let SinkLeaseParams {
            name,
            owner,
            until,
            now,
        } = p;
        let mut tx = self.begin().await?;
        sqlx::query("INSERT INTO docket_sinks (name) VALUES (?1) ON CONFLICT DO NOTHING")
            .bind(name)
            .execute(&mut *tx)
            .await?;
        let seq: Option<i64> = sqlx::query_scalar(sql!(notifications, sink_lease))
            .bind(name)
            .bind(owner)
            .bind(us(until))
            .bind(us(now))
            .fetch_optional(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(seq)
    }

    async fn sink_advance(&self, p: SinkAdvanceParams<'_>) -> Result<bool> {
        let SinkAdvanceParams { name, owner, seq } = p;
        let mut tx = self.begin().await?;
        let r = sqlx::query("UPDATE docket_sinks SET seq = ?3 WHERE name = ?1 AND owner = ?2")
            .bind(name)
            .bind(owner)
            .bind(seq)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(r.rows_affected() == 1)
    }
}
