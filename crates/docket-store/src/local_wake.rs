//! What the backends share that does not depend on the SQL dialect: the in-process wake-ups
//! of the backends without LISTEN/NOTIFY (SQLite, MySQL).
//! The rules every backend applies (deadline, lease, failure) are `docket_core::lease`.

use crate::Wake;

/// Wake-ups within one process: what a backend without LISTEN/NOTIFY sends after each commit
/// (other processes' changes are found by polling).
#[derive(Debug, Clone)]
pub(crate) struct LocalWake(tokio::sync::broadcast::Sender<Wake>);

impl Default for LocalWake {
    fn default() -> Self {
        LocalWake(tokio::sync::broadcast::channel(1024).0)
    }
}

impl LocalWake {
    /// Claimers of these queues should look again (each queue once).
    pub(crate) fn queues<'a>(&self, queues: impl IntoIterator<Item = &'a String>) {
        let mut qs: Vec<&String> = queues.into_iter().collect();
        qs.sort();
        qs.dedup();
        for q in qs {
            // No receiver (no engine listening) is fine.
            let _ = self.0.send(Wake::Queue(q.clone()));
        }
    }

    /// A subscription: every wake-up from now on; `Wake::All` when some were missed.
    pub(crate) fn listen(&self) -> tokio::sync::mpsc::Receiver<Wake> {
        let mut sub = self.0.subscribe();
        let (tx, rx) = tokio::sync::mpsc::channel(1024);
        tokio::spawn(async move {
            loop {
                let w = match sub.recv().await {
                    Ok(w) => w,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => Wake::All,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                };
                if tx.send(w).await.is_err() {
                    return;
                }
            }
        });
        rx
    }
}
