//! `/v1/events`: one shared tail of the notification outbox per node. A single task reads new
//! notifications (every 100 ms while anyone listens, every second otherwise) and broadcasts them;
//! each subscriber first catches up from the database from its own position, then follows the
//! broadcast — so N open streams cost one query per poll, not N. A subscriber that falls behind
//! the broadcast buffer goes back to reading the database from where it was.
//!
//! No notification is skipped: a subscriber subscribes before it catches up, so a row the tail
//! has not read yet comes through the broadcast, and a row it read earlier was committed before
//! and is found by the catch-up (the outbox's seq order is commit order).

use docket_core::process::Notification;
use docket_engine::Engine;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, OnceCell};
use tokio_util::sync::CancellationToken;

/// Notifications buffered for slow subscribers before they fall back to the database.
const BUFFER: usize = 4096;

/// The shared tail (one per server).
#[derive(Default)]
pub struct Tail {
    tx: OnceCell<broadcast::Sender<Arc<Notification>>>,
}

impl Tail {
    /// A receiver of every notification the tail reads from now on; starts the tail on first use.
    ///
    /// # Errors
    /// The store failed reading where the outbox ends.
    pub async fn subscribe(
        &self,
        engine: &Engine,
        shutdown: &CancellationToken,
    ) -> Result<broadcast::Receiver<Arc<Notification>>, docket_engine::EngineError> {
        let tx = self
            .tx
            .get_or_try_init(|| async {
                let start = engine.notification_last_seq().await?;
                let (tx, _) = broadcast::channel(BUFFER);
                tokio::spawn(run(engine.clone(), tx.clone(), start, shutdown.clone()));
                Ok::<_, docket_engine::EngineError>(tx)
            })
            .await?;
        Ok(tx.subscribe())
    }
}

async fn run(
    engine: Engine,
    tx: broadcast::Sender<Arc<Notification>>,
    mut cursor: i64,
    shutdown: CancellationToken,
) {
    loop {
        match engine.notification_list(None, cursor, 500).await {
            Ok(rows) if !rows.is_empty() => {
                cursor = rows.last().map_or(cursor, |n| n.seq);
                for n in rows {
                    // No receiver: nobody listens now; later subscribers catch up from the
                    // database.
                    let _ = tx.send(Arc::new(n));
                }
                continue;
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "reading notifications failed"),
        }
        let nap = if tx.receiver_count() > 0 {
            Duration::from_millis(100)
        } else {
            Duration::from_secs(1)
        };
        tokio::select! {
            _ = tokio::time::sleep(nap) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}
