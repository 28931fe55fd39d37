//! Wake-ups: claimers wait on their queue's [`Notify`]; inserts on this node and notifications
//! from the database (other nodes, plain SQL inserts) wake them at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// Per-queue wake-ups plus one for the scheduler.
#[derive(Debug, Default)]
pub struct Waker {
    queues: Mutex<HashMap<String, Arc<Notify>>>,
    tasks: Mutex<HashMap<i64, Arc<Notify>>>,
    scheduler: Notify,
    changes: ChangeFeed,
}

/// A tick each time tasks changed on this node, or a database notification says they changed
/// elsewhere: what the dashboard's live pages listen to (no polling per browser).
#[derive(Debug)]
struct ChangeFeed(tokio::sync::broadcast::Sender<()>);

impl Default for ChangeFeed {
    fn default() -> Self {
        ChangeFeed(tokio::sync::broadcast::channel(64).0)
    }
}

impl Waker {
    /// The notifier of `queue`.
    pub fn queue(&self, queue: &str) -> Arc<Notify> {
        let mut m = self.queues.lock().expect("waker lock");
        m.entry(queue.to_string()).or_default().clone()
    }

    /// Publishes a change (tasks were enqueued, claimed, finished, cancelled, ...).
    pub fn changed(&self) {
        let _ = self.changes.0.send(());
    }

    /// Subscribes to the change feed.
    pub fn changes(&self) -> tokio::sync::broadcast::Receiver<()> {
        self.changes.0.subscribe()
    }

    /// Wakes every claimer waiting on `queue`.
    pub fn wake(&self, queue: &str) {
        self.changed();
        let n = self.queues.lock().expect("waker lock").get(queue).cloned();
        if let Some(n) = n {
            n.notify_waiters();
        }
    }

    /// The notifier of task `id` (a synchronous caller waits on it); pair with
    /// [`Waker::forget_task`].
    pub fn task(&self, id: i64) -> Arc<Notify> {
        self.tasks
            .lock()
            .expect("waker lock")
            .entry(id)
            .or_default()
            .clone()
    }

    /// Wakes whoever waits for task `id` to finish.
    pub fn task_done(&self, id: i64) {
        self.changed();
        let n = self.tasks.lock().expect("waker lock").get(&id).cloned();
        if let Some(n) = n {
            n.notify_waiters();
        }
    }

    /// Drops the notifier of task `id` once nobody else waits on it.
    pub fn forget_task(&self, id: i64, mine: Arc<Notify>) {
        let mut m = self.tasks.lock().expect("waker lock");
        // Two references left: the map's and `mine`.
        if Arc::strong_count(&mine) <= 2 {
            m.remove(&id);
        }
    }

    /// Wakes every waiting claimer and caller (after a lost LISTEN connection).
    pub fn wake_all(&self) {
        self.changed();
        let tasks: Vec<_> = self
            .tasks
            .lock()
            .expect("waker lock")
            .values()
            .cloned()
            .collect();
        for n in tasks {
            n.notify_waiters();
        }
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
        self.changed();
        self.scheduler.notify_one();
    }

    /// Waits for [`Waker::wake_scheduler`].
    pub async fn scheduler_woken(&self) {
        self.scheduler.notified().await
    }
}
