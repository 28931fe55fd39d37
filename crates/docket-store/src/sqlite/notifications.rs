//! SQLite: wake-ups, process notifications and their delivery cursors (sinks).

use super::*;

#[async_trait]
impl NotificationStore for SqliteStore {
    async fn listen(&self) -> Result<Option<tokio::sync::mpsc::Receiver<Wake>>> {
        // Only this process's changes: other processes' are seen by polling.
        let mut sub = self.wake.subscribe();
        let (tx, rx) = tokio::sync::mpsc::channel(1024);
        tokio::spawn(async move {
            loop {
                match sub.recv().await {
                    Ok(q) => {
                        if tx.send(q).await.is_err() {
                            return;
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        if tx.send(Wake::All).await.is_err() {
                            return;
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        Ok(Some(rx))
    }

    async fn notification_list(&self, p: NotificationListParams<'_>) -> Result<Vec<Notification>> {
        let NotificationListParams {
            namespace,
            after,
            limit,
        } = p;
        let rows = sqlx::query(
            "SELECT * FROM docket_notifications WHERE seq > ?1 AND (?2 IS NULL OR namespace = ?2) \
             ORDER BY seq LIMIT ?3",
        )
        .bind(after)
        .bind(namespace)
        .bind(limit)
        .fetch_all(&self.reader)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(Notification {
                    seq: r.try_get("seq")?,
                    namespace: r.try_get("namespace")?,
                    process_id: r.try_get("process_id")?,
                    kind: r.try_get("kind")?,
                    event_id: r.try_get("event_id")?,
                    data: json(r, "data")?,
                    created_at: time(r, "created_at")?,
                })
            })
            .collect()
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
        let seq: Option<i64> = sqlx::query_scalar(
            "UPDATE docket_sinks SET owner = ?2, lease_until = ?3 WHERE name = ?1 \
             AND (owner IS NULL OR owner = ?2 OR lease_until < ?4) RETURNING seq",
        )
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
