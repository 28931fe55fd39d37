//! PostgreSQL: wake-ups, process notifications and their delivery cursors (sinks).

use super::*;

#[async_trait]
impl NotificationStore for PgStore {
    async fn listen(&self) -> Result<Option<tokio::sync::mpsc::Receiver<Wake>>> {
        let mut l = PgListener::connect_with(&self.pool).await?;
        l.listen_all([CHANNEL, DONE_CHANNEL]).await?;
        let (tx, rx) = tokio::sync::mpsc::channel(1024);
        let prefix = format!("{}|", self.schema);
        let pool = self.pool.clone();
        tokio::spawn(async move {
            loop {
                match l.try_recv().await {
                    Ok(Some(n)) => {
                        let Some(rest) = n.payload().strip_prefix(&prefix) else {
                            continue;
                        };
                        let wake = if n.channel() == DONE_CHANNEL {
                            match rest.parse() {
                                Ok(id) => Wake::Task(id),
                                Err(_) => continue,
                            }
                        } else if rest.is_empty() {
                            // A plain-SQL insert (migration 0009): no queue named.
                            Wake::All
                        } else {
                            Wake::Queue(rest.to_string())
                        };
                        if tx.send(wake).await.is_err() {
                            return;
                        }
                    }
                    // The connection dropped; PgListener reconnects on the next call.
                    // Notifications sent meanwhile are lost: tell waiters to look anyway.
                    Ok(None) => {
                        if tx.send(Wake::All).await.is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        if tx.is_closed() || pool.is_closed() {
                            return;
                        }
                        tracing::warn!(error = %e, "LISTEN connection failed; retrying in 1s");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
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
        let rows = sqlx::query(sql!(notifications, list))
            .bind(after)
            .bind(namespace)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(crate::row::notification).collect()
    }

    async fn notification_last_seq(&self) -> Result<i64> {
        Ok(
            sqlx::query_scalar("SELECT COALESCE(max(seq), 0)::int8 FROM docket_notifications")
                .fetch_one(&self.pool)
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
        sqlx::query("INSERT INTO docket_sinks (name) VALUES ($1) ON CONFLICT DO NOTHING")
            .bind(name)
            .execute(&self.pool)
            .await?;
        Ok(sqlx::query_scalar(sql!(notifications, sink_lease))
            .bind(name)
            .bind(owner)
            .bind(until)
            .bind(now)
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn sink_advance(&self, p: SinkAdvanceParams<'_>) -> Result<bool> {
        let SinkAdvanceParams { name, owner, seq } = p;
        let r = sqlx::query("UPDATE docket_sinks SET seq = $3 WHERE name = $1 AND owner = $2")
            .bind(name)
            .bind(owner)
            .bind(seq)
            .execute(&self.pool)
            .await?;
        Ok(r.rows_affected() == 1)
    }
}
