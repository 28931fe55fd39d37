//! Wake-ups: claimers wait on their queue's [`Notify`]; inserts on this node and notifications
//! from the database (other nodes, plain SQL inserts) wake them at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// Per-queue wake-ups plus one for the scheduler.
#[derive(Debug, Default)]
pub struct Waker {
    queues: Mutex<HashMap<String, Arc<Notify>>>,
    scheduler: Notify,
}

impl Waker {
    /// The notifier of `queue`.
    pub fn queue(&self, queue: &str) -> Arc<Notify> {
        let mut m = self.queues.lock().expect("waker lock");
        m.entry(queue.to_string()).or_default().clone()
    }

    /// Wakes every claimer waiting on `queue`.
    pub fn wake(&self, queue: &str) {
        let n = self.queues.lock().expect("waker lock").get(queue).cloned();
        if let Some(n) = n {
            n.notify_waiters();
        }
    }

    /// Wakes every waiting claimer (after a lost LISTEN connection).
    pub fn wake_all(&self) {
        let all: Vec<_> = self
            .queues
            .lock()
            .expect("waker lock")
            .values()
            .cloned()
            .collect();
        for n in all {
            n.notify_waiters();
        }
        self.scheduler.notify_one();
    }

    /// Tells the scheduler a task was scheduled, so it re-reads the next due time.
    pub fn wake_scheduler(&self) {
        self.scheduler.notify_one();
    }

    /// Waits for [`Waker::wake_scheduler`].
    pub async fn scheduler_woken(&self) {
        self.scheduler.notified().await
    }
}
