//! Process notifications, webhook sinks and wake-ups ([`NotificationStore`]).

use crate::Result;
use async_trait::async_trait;
pub use docket_core::process::Notification;
pub use docket_core::sink::TaskTransition;
use docket_core::Timestamp;

/// What a [`NotificationStore::listen`] subscription delivers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wake {
    /// Look at this queue again (a task became available or a slot was freed).
    Queue(String),
    /// This task finished (process steps: wakes the synchronous caller waiting for it).
    Task(i64),
    /// Notifications may have been lost: look at everything.
    All,
}

/// Wake-ups, process notifications and their delivery cursors (sinks).
#[async_trait]
pub trait NotificationStore: Send + Sync {
    /// Subscribes to "look again" notifications: a task became available, a finished attempt
    /// freed a concurrency slot ([`Wake::Queue`]), or a process step finished ([`Wake::Task`]). PostgreSQL
    /// delivers every process's notifications (LISTEN/NOTIFY); SQLite only this process's, so
    /// other processes' changes are seen by polling. `None` where there is nothing to listen to.
    ///
    /// # Errors
    /// Database failure.
    async fn listen(&self) -> Result<Option<tokio::sync::mpsc::Receiver<Wake>>>;

    /// Notifications after `after`, oldest first, optionally of one namespace.
    ///
    /// # Errors
    /// Database failure.
    async fn notification_list(&self, p: NotificationListParams<'_>) -> Result<Vec<Notification>>;

    /// The seq of the newest notification (0 when there is none): where a live tail starts.
    ///
    /// # Errors
    /// Database failure.
    async fn notification_last_seq(&self) -> Result<i64>;

    /// A sink's backlog: how many notifications of `namespace` come after `after` (counted up
    /// to `limit`, so a long outage costs a bounded read) and when the oldest was written.
    ///
    /// # Errors
    /// Database failure.
    async fn notification_backlog(
        &self,
        p: NotificationBacklogParams<'_>,
    ) -> Result<(i64, Option<Timestamp>)>;

    /// Watches these queues' task events: from now on every insert of one of their tasks and
    /// every change of its state is written to the task event outbox (`docket_task_events`) in
    /// the transaction that makes it — arming the backend's triggers the first time any queue
    /// is watched (before that, plain queues pay nothing). Idempotent; a queue stays watched
    /// (rows no sink takes go by the notifications' retention).
    ///
    /// # Errors
    /// Database failure (MySQL: creating a trigger may need the `TRIGGER` privilege, and with
    /// binary logging on, `log_bin_trust_function_creators`).
    async fn task_events_watch(&self, queues: &[String]) -> Result<()>;

    /// The oldest rows of one queue's task event outbox, in seq order.
    ///
    /// # Errors
    /// Database failure.
    async fn task_event_list(&self, p: TaskEventListParams<'_>) -> Result<Vec<TaskTransition>>;

    /// Deletes task event rows by seq (the ones a sink published); how many there were.
    ///
    /// # Errors
    /// Database failure.
    async fn task_event_delete(&self, seqs: &[i64]) -> Result<u64>;

    /// Leases sink `name` to `owner` until `until` when it is free, expired or already theirs
    /// (creating its cursor at 0); returns the cursor (deliver notifications after it).
    ///
    /// # Errors
    /// Database failure.
    async fn sink_lease(&self, p: SinkLeaseParams<'_>) -> Result<Option<i64>>;

    /// Moves sink `name`'s cursor to `seq` if `owner` still holds it; false otherwise.
    ///
    /// # Errors
    /// Database failure.
    async fn sink_advance(&self, p: SinkAdvanceParams<'_>) -> Result<bool>;
}

/// Params of [`NotificationStore::notification_list`].
#[derive(Debug, Clone)]
pub struct NotificationListParams<'a> {
    /// The process's namespace.
    pub namespace: Option<&'a str>,
    /// Start after this (keyset paging).
    pub after: i64,
    /// Most rows to touch (or return).
    pub limit: i64,
}

/// Params of [`NotificationStore::notification_backlog`].
#[derive(Debug, Clone)]
pub struct NotificationBacklogParams<'a> {
    /// The sink's namespace.
    pub namespace: &'a str,
    /// The sink's cursor.
    pub after: i64,
    /// Count at most this many.
    pub limit: i64,
}

/// Params of [`NotificationStore::task_event_list`].
#[derive(Debug, Clone)]
pub struct TaskEventListParams<'a> {
    /// The queue.
    pub queue: &'a str,
    /// Most rows.
    pub limit: i64,
}

/// Params of [`NotificationStore::sink_lease`].
#[derive(Debug, Clone)]
pub struct SinkLeaseParams<'a> {
    /// The sink (`webhook:NS`, or `sink:NAME:NS` for a broker sink).
    pub name: &'a str,
    /// Who holds (or asks for) the sink's lease.
    pub owner: &'a str,
    /// The lease's end.
    pub until: Timestamp,
    /// The current time (the engine's clock).
    pub now: Timestamp,
}

/// Params of [`NotificationStore::sink_advance`].
#[derive(Debug, Clone)]
pub struct SinkAdvanceParams<'a> {
    /// The sink (`webhook:NS`, or `sink:NAME:NS` for a broker sink).
    pub name: &'a str,
    /// Who holds (or asks for) the sink's lease.
    pub owner: &'a str,
    /// The seq delivered up to.
    pub seq: i64,
}
