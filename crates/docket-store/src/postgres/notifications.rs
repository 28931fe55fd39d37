//! PostgreSQL: wake-ups, process notifications and their delivery cursors (sinks).

use super::*;
use crate::Wake;

#[async_trait]
impl crate::driver::Listen for PgStore {
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
}
