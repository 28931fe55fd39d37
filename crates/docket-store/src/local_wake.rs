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

/// A transaction of a backend without LISTEN/NOTIFY (SQLite's writer, MySQL's) with the queues
/// whose claimers [`LocalWake`] wakes once it commits: woken before the commit, a claimer would
/// look for rows it cannot see yet. The backend implements [`crate::driver::DriverTx`] on it.
pub(crate) struct LocalTx<DB: sqlx::Database> {
    pub(crate) tx: sqlx::Transaction<'static, DB>,
    wake: LocalWake,
    queues: Vec<String>,
    /// The backend checks before the commit that the transaction is still the one begun
    /// (MySQL on Galera: [`crate::mysql`]'s `MySqlStore::begin`).
    pub(crate) guarded: bool,
}

impl<DB: sqlx::Database> LocalTx<DB> {
    /// `tx`, whose commit wakes through `wake`.
    pub(crate) fn new(tx: sqlx::Transaction<'static, DB>, wake: &LocalWake) -> Self {
        LocalTx {
            tx,
            wake: wake.clone(),
            queues: vec![],
            guarded: false,
        }
    }

    /// Claimers of `queues` look again after the commit.
    pub(crate) fn wake_after<'a>(&mut self, queues: impl IntoIterator<Item = &'a String>) {
        self.queues.extend(queues.into_iter().cloned());
    }

    /// Commits, then wakes the claimers of the queues named.
    ///
    /// # Errors
    /// The database failed.
    pub(crate) async fn commit_and_wake(self) -> crate::Result<()> {
        self.tx.commit().await?;
        self.wake.queues(&self.queues);
        Ok(())
    }
}
