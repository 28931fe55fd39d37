//! Wake-ups: claimers wait on their queue's [`Notify`]; inserts on this node and notifications
//! from the database (other nodes, plain SQL inserts) wake them at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// Per-queue wake-ups plus one for the scheduler.
#[derive(Debug, Default)]
pub struct Waker {
    queues: Mutex<HashMap<String, Arc<QueueWake>>>,
    tasks: Mutex<HashMap<i64, Arc<Notify>>>,
    scheduler: Notify,
    changes: ChangeFeed,
    /// Bumped when a process step finished (here, or elsewhere as a database notification
    /// says): a step is what writes notifications, so event sinks look again then.
    steps: StepFeed,
    /// Other nodes to tell (databases that cannot notify; see [`crate::peers`]).
    peers: std::sync::OnceLock<Arc<crate::peers::PeerWake>>,
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

/// See [`Waker::steps`].
#[derive(Debug)]
struct StepFeed(tokio::sync::watch::Sender<u64>);

impl Default for StepFeed {
    fn default() -> Self {
        StepFeed(tokio::sync::watch::channel(0).0)
    }
}

/// The wake-ups of one queue's idle claimers. An insert wakes one claimer (`one`), not all of
/// them: ten long-polling claimers woken for one task made ten claim statements race for it,
/// and the one that won waited for the others (issue 24). The rules that keep every task found
/// without a poll ([`crate::Engine::claim`] applies them):
/// - a claimer woken by `one` whose claim came back full wakes the next one (there may be
///   more);
/// - a claimer that takes only some kinds or stages, woken by `one`, whose claim was not full
///   (what is left may be of a kind or stage it does not take) wakes every claimer of the queue
///   through `all`, once (a claimer without a filter saw every task there is) — unless another
///   claimer passed on while it looked, in which case it looks again instead;
/// - a `one` notification given to a claimer that returns before waiting passes to the next
///   waiter (tokio's `Notified` forwards it when dropped), and one given while nobody waits is
///   kept for the next claimer.
#[derive(Debug, Default)]
pub struct QueueWake {
    /// One claimer at a time.
    pub one: Notify,
    /// Every claimer.
    pub all: Notify,
}

impl Waker {
    /// The wake-ups of `queue`.
    pub fn queue(&self, queue: &str) -> Arc<QueueWake> {
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

    /// Tasks became available on `queue`: wakes one of its claimers (see [`QueueWake`]), or
    /// keeps the wake-up for the next claimer when none waits.
    pub fn wake(&self, queue: &str) {
        self.wake_local(queue);
        if let Some(p) = self.peers.get() {
            p.send(queue);
        }
    }

    /// [`Waker::wake`] on this node only: for wake-ups that came from elsewhere (a database
    /// notification, a peer's datagram).
    pub fn wake_local(&self, queue: &str) {
        self.changed();
        let n = self.queue(queue);
        n.one.notify_one();
    }

    /// Sends this node's wake-ups to its peers from now on.
    pub fn set_peers(&self, peers: Arc<crate::peers::PeerWake>) {
        let _ = self.peers.set(peers);
    }

    /// The peer wake-ups, when this node sends them.
    pub fn peers(&self) -> Option<&Arc<crate::peers::PeerWake>> {
        self.peers.get()
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

    /// Ticks when a process step finished on this node, or a database notification says one
    /// did elsewhere (PostgreSQL), or notifications may have been lost: what event sinks wait
    /// on. A watch: ticks while nobody looks coalesce into one.
    pub fn steps(&self) -> tokio::sync::watch::Receiver<u64> {
        self.steps.0.subscribe()
    }

    /// Wakes whoever waits for task `id` to finish.
    pub fn task_done(&self, id: i64) {
        self.changed();
        self.steps.0.send_modify(|n| *n = n.wrapping_add(1));
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
        self.steps.0.send_modify(|n| *n = n.wrapping_add(1));
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
            n.all.notify_waiters();
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
