//! The [`Store`] trait and its backends: PostgreSQL ([`postgres::PgStore`]), SQLite
//! ([`sqlite::SqliteStore`], the embedded default) and MySQL/MariaDB ([`mysql::MySqlStore`]).
//!
//! Methods are named `noun_verb` and take plain params, so fields can be added. The store applies
//! decisions made by `docket-core` (defaults, backoff, fail rules) atomically; it does not make
//! policy of its own. `tests/conformance.rs` runs one suite (`testing::exercise`) against every
//! backend.

use async_trait::async_trait;
use docket_core::task::ResolvedTask;
use docket_core::{QueueSettings, QueueStats, Schedule, ScheduleSpec, Task, TaskState, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

mod decode;
pub mod mysql;
pub mod postgres;
mod shared;
pub mod sqlite;
#[cfg(feature = "testing")]
pub mod testing;

/// Errors of the store, normalised across backends.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// No such task/queue/row.
    #[error("{0} not found")]
    NotFound(String),
    /// The lease token is stale: the task was rescued, re-claimed, or never held by this lease.
    #[error("lease lost: the task is no longer held by this lease")]
    LeaseLost,
    /// The task was cancelled while this lease held it.
    #[error("task was cancelled")]
    Cancelled,
    /// The attempt ran past `attempted_at + timeout`: it was failed with `timeout` (retried
    /// per backoff, or discarded when its attempts are spent) and this lease is void.
    #[error("attempt timed out: it ran longer than the task's timeout and was failed")]
    TimedOut,
    /// The operation does not apply to the task's current state.
    #[error("{0}")]
    InvalidState(String),
    /// A unique constraint refused the change.
    #[error("conflict: {0}")]
    Conflict(String),
    /// Bad input detected by the store (for example a value out of range).
    #[error("{0}")]
    Invalid(String),
    /// A conditional change found the row at another version than the caller read
    /// (`If-Match`).
    #[error("{0}")]
    PreconditionFailed(String),
    /// The database failed; `kind` says how (see [`DbErrorKind`]), `message` is the driver's
    /// text, for logs. Every query's error reaches callers through one mapping
    /// (`From<sqlx::Error>`): a unique violation is [`StoreError::Conflict`], a missing row
    /// [`StoreError::NotFound`], anything else this with its kind.
    #[error("database error ({kind:?}): {message}")]
    Database {
        /// What kind of failure.
        kind: DbErrorKind,
        /// The driver's message.
        message: String,
    },
    /// A stored value does not decode (names the row and column): data written by something
    /// else, or a bug; never replaced by a default.
    #[error("stored data does not decode: {0}")]
    Corrupt(String),
    /// Migrations failed.
    #[error("migration error: {0}")]
    Migrate(String),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        match &e {
            sqlx::Error::RowNotFound => return StoreError::NotFound("row".into()),
            sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => {
                return StoreError::Corrupt(e.to_string())
            }
            sqlx::Error::Database(d) if d.is_unique_violation() => {
                return StoreError::Conflict(d.message().to_string())
            }
            _ => {}
        }
        StoreError::Database {
            kind: classify(&e),
            message: e.to_string(),
        }
    }
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        StoreError::Migrate(e.to_string())
    }
}

/// The kind of a driver error: SQLSTATE class on PostgreSQL and MySQL (a deadlock is 40001, an
/// out-of-range value 22003), result code on SQLite.
fn classify(e: &sqlx::Error) -> DbErrorKind {
    let Some(d) = e.as_database_error() else {
        return DbErrorKind::Unavailable;
    };
    if d.is_unique_violation() || d.is_foreign_key_violation() || d.is_check_violation() {
        return DbErrorKind::Conflict;
    }
    let code = d.code().map(|c| c.to_string()).unwrap_or_default();
    match code.as_str() {
        // SQLite: SQLITE_BUSY, SQLITE_LOCKED and their extended codes.
        "5" | "6" | "261" | "262" | "517" => return DbErrorKind::Retryable,
        _ => {}
    }
    match code.get(..2) {
        Some("22") => DbErrorKind::InvalidData,
        Some("23") => DbErrorKind::Conflict,
        Some("40") => DbErrorKind::Retryable,
        _ => DbErrorKind::Unavailable,
    }
}

/// What kind of failure a [`StoreError::Database`] is, from its SQLSTATE class (PostgreSQL) or
/// error kind (SQLite): what the edges need to answer it without reading driver types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DbErrorKind {
    /// The database refused a value (class 22: out of range, bad encoding, …): the request's
    /// fault.
    InvalidData,
    /// A constraint refused the change (class 23).
    Conflict,
    /// Serialization failure or deadlock (class 40): trying again may succeed.
    Retryable,
    /// Anything else: the database cannot serve now (connection lost, pool exhausted, …).
    Unavailable,
}

impl StoreError {
    /// The kind of a database failure; `None` for the store's own errors.
    pub fn db_kind(&self) -> Option<DbErrorKind> {
        match self {
            StoreError::Database { kind, .. } => Some(*kind),
            _ => None,
        }
    }
}

/// Result alias of the store.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Which backend a store is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// PostgreSQL.
    Postgres,
    /// SQLite.
    Sqlite,
    /// MySQL 8.0+ or MariaDB 10.6+.
    MySql,
}

/// Params of [`TaskStore::task_insert_many`].
#[derive(Debug, Clone)]
pub struct TaskInsertManyParams {
    /// Tasks with every default resolved.
    pub tasks: Vec<ResolvedTask>,
    /// created_at of all of them.
    pub now: Timestamp,
}

/// Params of [`TaskStore::task_list`]: filters combine with AND; keyset paging by id.
#[derive(Debug, Clone, Default)]
pub struct TaskListParams {
    /// Only this queue.
    pub queue: Option<String>,
    /// Only these states (empty: any state).
    pub states: Vec<TaskState>,
    /// Only this kind.
    pub kind: Option<String>,
    /// Only this concurrency key (a process's tasks: `<namespace>:<id>`).
    pub concurrency_key: Option<String>,
    /// Only this user's tasks.
    pub user_id: Option<String>,
    /// Only ids greater than this (ascending order) or smaller (descending).
    pub after: Option<i64>,
    /// Newest first.
    pub descending: bool,
    /// At most this many.
    pub limit: i64,
    /// Only tasks whose payload or errors contain this text (case-insensitive).
    pub text: Option<String>,
}

/// One operator action of the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AuditEntry {
    /// Sequence number.
    pub id: i64,
    /// When.
    #[schema(value_type = String, format = DateTime)]
    pub at: Timestamp,
    /// Who (`X-Docket-Actor` header, or `dashboard@IP` / `api@IP`).
    pub actor: String,
    /// What (`task.cancel`, `queue.pause`, …).
    pub action: String,
    /// On what (`task:12`, `queue:emails`, …).
    pub target: String,
    /// Anything else.
    pub detail: Option<Value>,
}

/// Finished tasks in one minute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Throughput {
    /// Start of the minute.
    #[schema(value_type = String, format = DateTime)]
    pub minute: Timestamp,
    /// Tasks completed.
    pub completed: i64,
    /// Tasks discarded (failed for good).
    pub failed: i64,
}

/// Params of [`LeaseStore::task_claim`].
#[derive(Debug, Clone)]
pub struct TaskClaimParams {
    /// Queue to claim from.
    pub queue: String,
    /// Who claims (recorded in `worker` and in error entries).
    pub worker: String,
    /// Name of the claiming node: tasks with another `node` are skipped.
    pub node: String,
    /// At most this many.
    pub limit: i64,
    /// Lease duration; default each task's timeout.
    pub lease: Option<Duration>,
    /// Only tasks of these kinds (asyncflow's hold by task type); None: any kind.
    pub kinds: Option<Vec<String>>,
    /// Only tasks at these stages (asyncflow's task_stage); None: any stage.
    pub stages: Option<Vec<String>>,
    /// Now.
    pub now: Timestamp,
}

/// Params of [`LeaseStore::task_heartbeat`].
#[derive(Debug, Clone)]
pub struct TaskHeartbeatParams {
    /// Task id.
    pub id: i64,
    /// Lease token from the claim.
    pub token: String,
    /// New progress, if any.
    pub progress: Option<Value>,
    /// New lease duration; default the attempt's lease duration.
    pub lease: Option<Duration>,
    /// Now.
    pub now: Timestamp,
    /// How a failed attempt ends (the engine's rule; the store only applies it).
    pub fail_rule: docket_core::task::FailRule,
}

/// One item of [`LeaseStore::task_complete_many`].
#[derive(Debug, Clone)]
pub struct TaskComplete {
    /// Task id.
    pub id: i64,
    /// Lease token.
    pub token: String,
    /// Result to store.
    pub result: Value,
    /// Hand the task on to this stage instead of finishing it.
    pub next: Option<NextStage>,
}

pub use docket_core::task::NextStage;

/// One item of [`LeaseStore::task_fail_many`].
#[derive(Debug, Clone)]
pub struct TaskFail {
    /// Task id.
    pub id: i64,
    /// Lease token.
    pub token: String,
    /// Error message (kept in `errors`).
    pub error: String,
    /// Retry after this delay instead of the backoff.
    pub retry_in: Option<Duration>,
    /// Do not retry.
    pub permanent: bool,
}

pub use docket_core::lease::{Failure, LeaseOutcome, TaskLabels};

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

/// A node of the cluster as recorded in `docket_nodes`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NodeRecord {
    /// Node name.
    pub name: String,
    /// When it started.
    pub started_at: Timestamp,
    /// Its last heartbeat.
    pub heartbeat_at: Timestamp,
    /// When it stopped cleanly, if it did.
    pub stopped_at: Option<Timestamp>,
    /// Since when it is drained (claims nothing), if it is; a heartbeat keeps it.
    #[serde(default)]
    pub draining_at: Option<Timestamp>,
    /// docket version it runs.
    pub version: String,
    /// Free-form info (listen address, pid).
    pub info: Value,
}

/// Params of [`MaintenanceStore::task_prune`].
#[derive(Debug, Clone)]
pub struct TaskPruneParams {
    /// Now.
    pub now: Timestamp,
    /// Retention of completed tasks for queues without their own.
    pub retention_completed: Duration,
    /// Retention of discarded/cancelled tasks for queues without their own.
    pub retention_failed: Duration,
    /// Delete at most this many rows (one small batch).
    pub limit: i64,
}

/// What [`MaintenanceStore::aux_prune`] deletes: rows of the tables beside the tasks that would otherwise
/// grow forever.
#[derive(Debug, Clone, Copy)]
pub struct AuxPruneParams {
    /// Now.
    pub now: Timestamp,
    /// Process notifications older than this that every webhook sink of their namespace
    /// (`webhook:<namespace>`) has delivered.
    pub notifications: Duration,
    /// Audit entries older than this.
    pub audit: Duration,
    /// Nodes stopped, or silent (lost), for longer than this.
    pub nodes: Duration,
    /// At most this many rows per table (one small batch).
    pub limit: i64,
}

/// Rows [`MaintenanceStore::aux_prune`] deleted, per table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AuxPruned {
    /// Notifications.
    pub notifications: u64,
    /// Audit entries.
    pub audit: u64,
    /// Nodes.
    pub nodes: u64,
    /// Worker reports.
    pub workers: u64,
}

/// Result of [`MaintenanceStore::task_promote`].
#[derive(Debug, Clone, Default)]
pub struct Promoted {
    /// How many tasks became available.
    pub count: u64,
    /// Their queues (distinct).
    pub queues: Vec<String>,
}

/// Params of [`ProcessStore::process_commit`]: a processor's successful result for a running task.
#[derive(Debug, Clone)]
pub struct ProcessCommit {
    /// The task.
    pub task_id: i64,
    /// Its lease token.
    pub token: String,
    /// Namespace.
    pub namespace: String,
    /// Process id.
    pub id: String,
    /// Events to append.
    pub events: Vec<docket_core::process::NewEvent>,
    /// New aux state.
    pub aux_state: Option<Value>,
    /// New metadata.
    pub metadata: Option<Value>,
    /// Stored as the task's result (the caller's response).
    pub response: Value,
    /// Kinds of the process's waiting tasks to cancel (the engine's rule: its timers,
    /// `docket_core::process::TIMER_KINDS`, when the result sets or unsets the timer).
    pub cancel_kinds: Vec<String>,
    /// A new timer task (`timeout` or `remove`) to schedule.
    pub timer: Option<Box<ResolvedTask>>,
    /// Tasks to enqueue with it (a repaired timer that runs again).
    pub also: Vec<ResolvedTask>,
    /// Now.
    pub now: Timestamp,
}

/// What a failed processor step does to its process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessBreak {
    /// Leave the process as it is (failed repair, timer that will be retried).
    Keep,
    /// Put the process in `error` with the detail; cancel its waiting tasks. `corrupted`: set
    /// corrupted_by to the task (a timer out of attempts).
    Break {
        /// Set corrupted_by.
        corrupted: bool,
    },
}

/// Params of [`ProcessStore::process_fail`].
#[derive(Debug, Clone)]
pub struct ProcessFail {
    /// The task, its lease, and the error (as for [`LeaseStore::task_fail_many`]).
    pub fail: TaskFail,
    /// Namespace.
    pub namespace: String,
    /// Process id.
    pub id: String,
    /// What happens to the process when the attempt is not retried.
    pub on_give_up: ProcessBreak,
    /// The processor's error as JSON (kept as the task's result).
    pub error_value: Value,
    /// Now.
    pub now: Timestamp,
    /// How a failed attempt ends (the engine's rule; the store only applies it).
    pub fail_rule: docket_core::task::FailRule,
}

/// Params of [`ProcessStore::process_import`]: a whole process (progressor's migration path).
#[derive(Debug, Clone)]
pub struct ProcessImport {
    /// The process (namespace, id, status, detail, aux_state, metadata, created_at are used).
    pub process: docket_core::process::Process,
    /// Its history, event ids 1, 2, 3….
    pub history: Vec<docket_core::process::Event>,
    /// An optional timer task.
    pub timer: Option<ResolvedTask>,
    /// Now.
    pub now: Timestamp,
}

/// One published notification (`GET /v1/events`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Notification {
    /// Position in the stream (resume after it).
    pub seq: i64,
    /// Namespace.
    pub namespace: String,
    /// Process id.
    pub process_id: String,
    /// `event`, `created`, `failed`, `repaired` or `removed`.
    pub kind: String,
    /// The event's id (kind `event`).
    pub event_id: Option<i64>,
    /// The event (kind `event`: `{"event_id", "timestamp", "metadata", "payload"}`), or details
    /// (kind `failed`: `{"detail"}`).
    pub data: Value,
    /// When it was written.
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Timestamp,
}

/// Tasks: insert, read, list, and the operator changes of one task.
#[async_trait]
pub trait TaskStore: Send + Sync {
    /// Inserts tasks in one transaction (PostgreSQL: one statement). Returns one task per input,
    /// in input order, with `inserted: false` where a unique_key matched an unfinished task.
    ///
    /// # Errors
    /// Database failure; nothing is inserted then.
    async fn task_insert_many(&self, p: TaskInsertManyParams) -> Result<Vec<Task>>;

    /// One task by id.
    ///
    /// # Errors
    /// Database failure.
    async fn task_get(&self, id: i64) -> Result<Option<Task>>;

    /// Tasks matching the filters, by id.
    ///
    /// # Errors
    /// Database failure.
    async fn task_list(&self, p: TaskListParams) -> Result<Vec<Task>>;

    /// Cancels a task that is not finished. A running task keeps running until its next
    /// heartbeat/complete/fail, which then cancel it; the answer shows `cancel_requested_at`.
    ///
    /// # Errors
    /// [`StoreError::NotFound`]; [`StoreError::InvalidState`] for completed/discarded tasks.
    async fn task_cancel(&self, p: TaskCancelParams) -> Result<Task>;

    /// Makes a discarded or cancelled task available again now (one more attempt if spent).
    ///
    /// # Errors
    /// [`StoreError::NotFound`]; [`StoreError::InvalidState`] for other states;
    /// [`StoreError::Conflict`] when an unfinished task took its unique_key meanwhile.
    async fn task_retry(&self, p: TaskRetryParams) -> Result<Task>;

    /// The earliest run_at of scheduled/retryable tasks.
    ///
    /// # Errors
    /// Database failure.
    async fn task_next_due(&self) -> Result<Option<Timestamp>>;

    /// The newest task with this unique key, in any state.
    ///
    /// # Errors
    /// Database failure.
    async fn task_find_by_unique_key(&self, key: &str) -> Result<Option<Task>>;

    /// Makes a scheduled or retryable task available now (the dashboard's "run now").
    ///
    /// # Errors
    /// [`StoreError::NotFound`]; [`StoreError::InvalidState`] for other states.
    async fn task_run_now(&self, p: TaskRunNowParams) -> Result<Task>;

    /// Finished tasks per minute since `since` (completed and discarded), oldest first;
    /// minutes without any are left out.
    ///
    /// # Errors
    /// Database failure.
    async fn task_throughput(&self, since: Timestamp) -> Result<Vec<Throughput>>;

    /// Changes a task by `p.rule`, applied to the row as stored while it is locked (so no
    /// claim or finish races the change): writes back its queue, priority, run_at, state,
    /// payload, node, max_attempts, stage and progress, wakes its queue when it is available.
    /// Returns the task as stored after.
    ///
    /// # Errors
    /// [`StoreError::NotFound`]; whatever the rule returns; store failure.
    async fn task_update(&self, p: TaskUpdateParams) -> Result<Task>;
}

/// Claims and the calls made under a lease: heartbeat, complete, fail.
#[async_trait]
pub trait LeaseStore: Send + Sync {
    /// Claims up to `limit` available tasks of a queue in claim order (priority desc, run_at,
    /// id), skipping tasks for other nodes, expired ones, keys at their concurrency limit, and
    /// everything in a paused queue or beyond the queue's concurrency limit. Each returned task
    /// is `running` with a fresh lease in `lease`.
    ///
    /// # Errors
    /// Database failure; nothing is claimed then.
    async fn task_claim(&self, p: TaskClaimParams) -> Result<Vec<Task>>;

    /// Extends a lease and records progress.
    ///
    /// # Errors
    /// [`StoreError::LeaseLost`] for a stale token, [`StoreError::Cancelled`] when a cancel was
    /// requested (the task is then cancelled), [`StoreError::NotFound`].
    async fn task_heartbeat(&self, p: TaskHeartbeatParams) -> Result<Task>;

    /// Completes many tasks in one statement. One outcome per item, in order.
    ///
    /// # Errors
    /// Database failure (then nothing changed).
    async fn task_complete_many(&self, p: TaskCompleteManyParams<'_>) -> Result<Vec<LeaseOutcome>>;

    /// Fails many attempts: each is retried after its backoff (or `retry_in`), or discarded when
    /// permanent, out of attempts or past expiry. One outcome per item, in order.
    ///
    /// # Errors
    /// Database failure (then nothing changed).
    async fn task_fail_many(&self, p: TaskFailManyParams<'_>) -> Result<Vec<LeaseOutcome>>;

    /// The lease token of task `id` while it runs (None otherwise): for protocols without
    /// leases (asyncflow's compat routes, whose workers name a held task by its id alone).
    ///
    /// # Errors
    /// Store failure.
    async fn task_lease_token(&self, id: i64) -> Result<Option<String>>;
}

/// What the maintenance services run: promote, rescue, expire, prune.
#[async_trait]
pub trait MaintenanceStore: Send + Sync {
    /// Makes scheduled/retryable tasks whose run_at has come available (a small batch).
    ///
    /// # Errors
    /// Database failure.
    async fn task_promote(&self, p: TaskPromoteParams) -> Result<Promoted>;

    /// Running tasks whose lease ran out before `now`, oldest lease first (River's
    /// `JobGetStuck`): what the rescuer decides about. Process steps are not listed (their
    /// expired leases are zombies: [`ProcessStore::process_collect_zombies`]). Reads without
    /// locking: the rescue applies each decision only if the task is still as read.
    ///
    /// # Errors
    /// Database failure.
    async fn task_rescue_list(&self, p: TaskRescueListParams) -> Result<Vec<Task>>;

    /// Applies the rescuer's failures (River's `JobRescueMany`), each only while its task is
    /// still running the same attempt with its lease expired at `now` — a task completed,
    /// heartbeated or rescued by another node meanwhile is left alone. Returns the labels of
    /// the tasks it changed.
    ///
    /// # Errors
    /// Database failure.
    async fn task_rescue_many(&self, p: TaskRescueManyParams) -> Result<Vec<TaskLabels>>;

    /// Discards tasks not started before their expires_at. Returns how many.
    ///
    /// # Errors
    /// Database failure.
    async fn task_expire(&self, p: TaskExpireParams) -> Result<u64>;

    /// Deletes one batch of finished tasks past their retention. Returns how many.
    ///
    /// # Errors
    /// Database failure.
    async fn task_prune(&self, p: TaskPruneParams) -> Result<u64>;

    /// Deletes one batch of old notifications (delivered ones only), audit entries and
    /// stopped/lost nodes (node-daemons' manager prunes; these tables are the rest).
    ///
    /// # Errors
    /// Database failure.
    async fn aux_prune(&self, p: AuxPruneParams) -> Result<AuxPruned>;

    /// Turns the ring of slots that unfinished tasks live in (PostgreSQL, migration 0021): the
    /// tasks left in the next slot move to the fixed slot 0, the next slot is truncated (its dead
    /// tuples go with it, whatever snapshots are open) and becomes the one new tasks go into.
    /// Does nothing when the last turn is younger than `every` or another node is turning it.
    /// SQLite and MySQL have no slots: [`Rotation::Unsupported`].
    ///
    /// # Errors
    /// Database failure. A lock not granted within `lock_timeout` is not an error but
    /// [`Rotation::Blocked`].
    async fn task_rotate(&self, p: TaskRotateParams) -> Result<Rotation>;
}

/// Queues: settings, counts, pause.
#[async_trait]
pub trait QueueStore: Send + Sync {
    /// The `run_at` of the oldest available task of each queue that has one.
    ///
    /// # Errors
    /// Database failure.
    async fn queue_oldest_available(&self) -> Result<Vec<QueueOldest>>;

    /// Settings of the named queues that have a row (others use defaults).
    ///
    /// # Errors
    /// Database failure.
    async fn queue_settings_many(&self, names: &[String])
        -> Result<HashMap<String, QueueSettings>>;

    /// Every queue that has tasks or settings, with counts by state.
    ///
    /// # Errors
    /// Database failure.
    async fn queue_list(&self) -> Result<Vec<QueueStats>>;

    /// One queue (a queue with neither tasks nor settings shows defaults and zero counts).
    ///
    /// # Errors
    /// Database failure.
    async fn queue_get(&self, name: &str) -> Result<QueueStats>;

    /// Replaces a queue's settings.
    ///
    /// # Errors
    /// Database failure.
    async fn queue_put(&self, p: QueuePutParams<'_>) -> Result<QueueStats>;

    /// Pauses or resumes a queue, keeping its other settings.
    ///
    /// # Errors
    /// Database failure.
    async fn queue_set_paused(&self, p: QueueSetPausedParams<'_>) -> Result<QueueStats> {
        let mut settings = self.queue_get(p.name).await?.settings;
        settings.paused = p.paused;
        self.queue_put(QueuePutParams {
            name: p.name,
            settings: &settings,
            now: p.now,
        })
        .await
    }
}

/// The node registry.
#[async_trait]
pub trait NodeStore: Send + Sync {
    /// Records a node's heartbeat (creating its row on first call).
    ///
    /// # Errors
    /// Database failure.
    async fn node_heartbeat(&self, node: &NodeRecord) -> Result<()>;

    /// Marks a node as stopped cleanly.
    ///
    /// # Errors
    /// Database failure.
    async fn node_stop(&self, p: NodeStopParams<'_>) -> Result<()>;

    /// Every known node.
    ///
    /// # Errors
    /// Database failure.
    async fn node_list(&self) -> Result<Vec<NodeRecord>>;

    /// Drains a node (`drain`: it claims nothing from now on, and its waiting tasks pinned to it
    /// move to `to`, or to any node) or ends a drain. `None` when no node has that name.
    ///
    /// # Errors
    /// Database failure.
    async fn node_drain(&self, p: NodeDrainParams<'_>) -> Result<Option<u64>>;

    /// Records worker `p.name`'s report (replacing its last one).
    ///
    /// # Errors
    /// Store failure.
    async fn worker_report(&self, p: WorkerReportParams<'_>) -> Result<()>;

    /// Every worker's last report, by name.
    ///
    /// # Errors
    /// Store failure.
    async fn worker_list(&self) -> Result<Vec<WorkerRecord>>;
}

/// Params of [`NodeStore::worker_report`].
#[derive(Debug, Clone)]
pub struct WorkerReportParams<'a> {
    /// The worker's name.
    pub name: &'a str,
    /// What it reported (`docket_core::api::WorkerReport` as JSON).
    pub report: &'a Value,
    /// How often it reports, ms.
    pub interval_ms: i64,
    /// When.
    pub now: Timestamp,
}

/// A worker's last report.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerRecord {
    /// The worker's name.
    pub name: String,
    /// What it reported.
    pub report: Value,
    /// When.
    pub reported_at: Timestamp,
    /// How often it reports, ms.
    pub interval_ms: i64,
}

/// Namespaces and durable processes (progressor).
#[async_trait]
pub trait ProcessStore: Send + Sync {
    /// Creates or replaces a namespace's configuration (JSON of `NamespaceConfig`).
    ///
    /// # Errors
    /// Database failure.
    async fn namespace_put(&self, p: NamespacePutParams<'_>) -> Result<()>;

    /// Every namespace: (name, config).
    ///
    /// # Errors
    /// Database failure.
    async fn namespace_list(&self) -> Result<Vec<NamespaceRecord>>;

    /// Creates a process (status `init`) and its init task in one transaction.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the id is taken.
    async fn process_create(&self, p: ProcessCreateParams<'_>) -> Result<Task>;

    /// Enqueues a call/repair task for a process in status `require`.
    ///
    /// # Errors
    /// [`StoreError::NotFound`]; [`StoreError::InvalidState`] (`process is error`, …).
    async fn process_enqueue(&self, p: ProcessEnqueueParams<'_>) -> Result<Task>;

    /// A process and a range of its history.
    ///
    /// # Errors
    /// Database failure.
    async fn process_get(&self, p: ProcessGetParams<'_>) -> Result<Option<ProcessWithHistory>>;

    /// Applies a processor's result atomically: events, aux state, metadata, status `running`,
    /// timers, and completes the task (result = response) — only while the lease holds.
    ///
    /// # Errors
    /// [`StoreError::LeaseLost`] (nothing changed), [`StoreError::NotFound`].
    async fn process_commit(&self, c: ProcessCommit) -> Result<()>;

    /// Fails a process task: retried per the task's policy when allowed, else discarded and the
    /// process changed per `on_give_up`.
    ///
    /// # Errors
    /// Database failure.
    async fn process_fail(&self, f: ProcessFail) -> Result<LeaseOutcome>;

    /// Runs a `remove` task: deletes the process, its events and its unfinished tasks (the
    /// `remove` task among them); its finished tasks stay, detached from the process
    /// (`concurrency_key` and `unique_key` cleared), until the retention prune, so a caller
    /// still reads the answer of a request that finished just before (any node).
    ///
    /// # Errors
    /// [`StoreError::LeaseLost`].
    async fn process_remove(&self, p: ProcessRemoveParams<'_>) -> Result<()>;

    /// Imports a whole process with its history and optional timer, in one transaction.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the id is taken.
    async fn process_import(&self, p: ProcessImport) -> Result<()>;

    /// simple-repair: puts a process in `error` back to `running` without calling the processor.
    ///
    /// # Errors
    /// [`StoreError::NotFound`]; [`StoreError::InvalidState`] when it is not in error.
    async fn process_simple_repair(&self, p: ProcessSimpleRepairParams<'_>) -> Result<()>;

    /// Processes of a namespace by id (keyset paging), optionally of one status.
    ///
    /// # Errors
    /// Database failure.
    async fn process_list(
        &self,
        p: ProcessListParams<'_>,
    ) -> Result<Vec<docket_core::process::Process>>;

    /// Zombie collection (progressor): process tasks still running past their lease (their node
    /// died) end discarded with "zombie detected", their process goes to `error` with that
    /// detail and corrupted_by, and its waiting tasks are cancelled. Returns how many.
    ///
    /// # Errors
    /// Database failure.
    async fn process_collect_zombies(&self, p: ProcessCollectZombiesParams) -> Result<u64>;
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

/// Schedules (every / cron) and firing their occurrences.
#[async_trait]
pub trait ScheduleStore: Send + Sync {
    /// Creates schedule `spec.name`, or replaces its spec and next occurrence (keeping whether
    /// it is paused and its last run).
    ///
    /// # Errors
    /// Database failure.
    async fn schedule_put(&self, p: SchedulePutParams<'_>) -> Result<Schedule>;

    /// One schedule.
    ///
    /// # Errors
    /// Database failure.
    async fn schedule_get(&self, name: &str) -> Result<Option<Schedule>>;

    /// Every schedule, by name.
    ///
    /// # Errors
    /// Database failure.
    async fn schedule_list(&self) -> Result<Vec<Schedule>>;

    /// Removes a schedule (its tasks stay); false when there was none.
    ///
    /// # Errors
    /// Database failure.
    async fn schedule_delete(&self, name: &str) -> Result<bool>;

    /// Pauses or resumes a schedule; resuming sets `next_run_at` when given.
    ///
    /// # Errors
    /// Database failure.
    async fn schedule_pause(&self, p: SchedulePauseParams<'_>) -> Result<Option<Schedule>>;

    /// Unpaused schedules whose `next_run_at` is at or before `now`, soonest first.
    ///
    /// # Errors
    /// Database failure.
    async fn schedule_due(&self, p: ScheduleDueParams) -> Result<Vec<Schedule>>;

    /// The earliest `next_run_at` of an unpaused schedule.
    ///
    /// # Errors
    /// Database failure.
    async fn schedule_next_due(&self) -> Result<Option<Timestamp>>;

    /// Fires one occurrence: if the schedule is unpaused and its `next_run_at` is still
    /// `p.occurrence`, moves it to `p.next_run_at` and inserts `p.task`, in one transaction.
    /// `None` when another node fired it first (or it changed); `Some(None)` when fired but
    /// the task's unique key was held by an unfinished task.
    ///
    /// # Errors
    /// Database failure.
    async fn schedule_fire(&self, p: ScheduleFireParams) -> Result<ScheduleFired>;

    /// Moves an unpaused schedule's `next_run_at` from `p.occurrence` to `p.next_run_at`
    /// without firing (a schedule that counts from the end of its last run waits for it).
    /// `false` when the schedule changed, was paused or fired meanwhile.
    ///
    /// # Errors
    /// Database failure.
    async fn schedule_defer(&self, p: ScheduleDeferParams<'_>) -> Result<bool>;
}

/// The audit log of operator actions.
#[async_trait]
pub trait AuditStore: Send + Sync {
    /// Records an operator action.
    ///
    /// # Errors
    /// Database failure.
    async fn audit_add(&self, p: AuditAddParams<'_>) -> Result<()>;

    /// The newest `limit` audit entries, newest first.
    ///
    /// # Errors
    /// Database failure.
    async fn audit_list(&self, limit: i64) -> Result<Vec<AuditEntry>>;
}

/// API tokens (only hashes are stored).
#[async_trait]
pub trait TokenStore: Send + Sync {
    /// Stores a new API token (only its hash).
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when a token that is not revoked has the name (or the hash).
    async fn token_create(&self, p: TokenCreate) -> Result<TokenRecord>;

    /// The token with this hash, revoked and expired ones included (the caller decides).
    ///
    /// # Errors
    /// Database failure.
    async fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRecord>>;

    /// Every token, revoked ones included, by id.
    ///
    /// # Errors
    /// Database failure.
    async fn token_list(&self) -> Result<Vec<TokenRecord>>;

    /// Revokes the token named `name` that is not revoked yet; false when there is none.
    ///
    /// # Errors
    /// Database failure.
    async fn token_revoke(&self, p: TokenRevoke) -> Result<bool>;

    /// Sets a token's `last_used_at`.
    ///
    /// # Errors
    /// Database failure.
    async fn token_touch(&self, p: TokenTouch) -> Result<()>;
}

/// The storage interface of docket: a trait per noun, plus the backend's identity, migrations
/// and pool. Every method is atomic. River's driver interface is the model; the conformance suite
/// (`testing::exercise`, feature `testing`) calls every method on every backend.
#[async_trait]
pub trait Store:
    TaskStore
    + LeaseStore
    + MaintenanceStore
    + QueueStore
    + NodeStore
    + ProcessStore
    + NotificationStore
    + ScheduleStore
    + AuditStore
    + TokenStore
    + Send
    + Sync
    + std::fmt::Debug
{
    /// Which backend this is.
    fn backend(&self) -> Backend;

    /// True where other processes' changes can wake us (PostgreSQL LISTEN/NOTIFY); else poll.
    fn supports_listen_notify(&self) -> bool;

    /// Connections of this node's pool(s): (in use, idle).
    fn pool_connections(&self) -> PoolStats;

    /// Applies the embedded migrations (idempotent; safe with several nodes at once).
    ///
    /// # Errors
    /// Database or migration failure.
    async fn migrate(&self) -> Result<()>;

    /// Closes the pool.
    async fn close(&self);
}

/// Params of [`TaskStore::task_cancel`].
#[derive(Debug, Clone)]
pub struct TaskCancelParams {
    /// The task's id.
    pub id: i64,
    /// The current time (the engine's clock).
    pub now: Timestamp,
}

/// Params of [`TaskStore::task_retry`].
#[derive(Debug, Clone)]
pub struct TaskRetryParams {
    /// The task's id.
    pub id: i64,
    /// The current time (the engine's clock).
    pub now: Timestamp,
}

/// The rule of [`TaskStore::task_update`]: the task as stored and its lease token (running
/// tasks) → the task to write, or why not.
pub type TaskUpdateRule =
    Arc<dyn Fn(&Task, Option<&str>) -> std::result::Result<Task, StoreError> + Send + Sync>;

/// Params of [`TaskStore::task_update`].
pub struct TaskUpdateParams {
    /// The task's id.
    pub id: i64,
    /// The change (the engine's rule; the store only applies it).
    pub rule: TaskUpdateRule,
}

impl Clone for TaskUpdateParams {
    fn clone(&self) -> Self {
        TaskUpdateParams {
            id: self.id,
            rule: Arc::clone(&self.rule),
        }
    }
}

impl std::fmt::Debug for TaskUpdateParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskUpdateParams")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Params of [`TaskStore::task_run_now`].
#[derive(Debug, Clone)]
pub struct TaskRunNowParams {
    /// The task's id.
    pub id: i64,
    /// The current time (the engine's clock).
    pub now: Timestamp,
}

/// Params of [`LeaseStore::task_complete_many`].
#[derive(Debug, Clone)]
pub struct TaskCompleteManyParams<'a> {
    /// The leases and what to record, one per task.
    pub items: &'a [TaskComplete],
    /// The current time (the engine's clock).
    pub now: Timestamp,
    /// How a failed attempt ends (the engine's rule; the store only applies it).
    pub fail_rule: docket_core::task::FailRule,
}

/// Params of [`LeaseStore::task_fail_many`].
#[derive(Debug, Clone)]
pub struct TaskFailManyParams<'a> {
    /// The leases and what to record, one per task.
    pub items: &'a [TaskFail],
    /// The worker reporting, when it is not the lease's own.
    pub worker: Option<&'a str>,
    /// The current time (the engine's clock).
    pub now: Timestamp,
    /// How a failed attempt ends (the engine's rule; the store only applies it).
    pub fail_rule: docket_core::task::FailRule,
}

/// Params of [`MaintenanceStore::task_promote`].
#[derive(Debug, Clone)]
pub struct TaskPromoteParams {
    /// The current time (the engine's clock).
    pub now: Timestamp,
    /// Most rows to touch (or return).
    pub limit: i64,
}

/// Params of [`MaintenanceStore::task_rescue_list`].
#[derive(Debug, Clone)]
pub struct TaskRescueListParams {
    /// The current time (the engine's clock).
    pub now: Timestamp,
    /// Most rows to return.
    pub limit: i64,
}

/// Params of [`MaintenanceStore::task_rescue_many`].
#[derive(Debug, Clone)]
pub struct TaskRescueManyParams {
    /// What each rescued attempt writes ([`Failure::rescue`]).
    pub items: Vec<Failure>,
    /// The time the leases were found expired at.
    pub now: Timestamp,
}

/// Params of [`MaintenanceStore::task_rotate`].
#[derive(Debug, Clone)]
pub struct TaskRotateParams {
    /// The current time (the engine's clock).
    pub now: Timestamp,
    /// Turns only when the last turn is at least this old (every node runs the job, one turns).
    pub every: Duration,
    /// Longest wait for the exclusive lock on the slot to truncate. Claims queue behind a
    /// waiting lock, so this bounds the stall a turn can cause.
    pub lock_timeout: Duration,
    /// Tasks moved per statement before the lock is taken (what is left is moved under it).
    pub batch: i64,
    /// Turns only when at most this many tasks are left in the slot to empty; otherwise
    /// answers [`Rotation::Full`] and moves nothing (a backlog drains from its oldest slot
    /// instead of being copied).
    pub most_moved: i64,
}

/// What [`MaintenanceStore::task_rotate`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rotation {
    /// The backend has neither slots nor a finished-tasks table (SQLite: partial indexes keep
    /// finished tasks out of the hot indexes).
    Unsupported,
    /// Not due yet, or another node is turning the ring.
    NotDue,
    /// The ring turned.
    Turned {
        /// The slot new tasks now go into (1..=4).
        slot: i16,
        /// Tasks moved from it to slot 0 (running, waiting or not yet claimed after three turns).
        moved: u64,
        /// Whether it had to be truncated (an unused slot is not).
        truncated: bool,
    },
    /// More than `most_moved` tasks are left in the slot to empty; nothing changed.
    Full,
    /// MySQL/MariaDB (migration 0004): no ring; the finished tasks found in `docket_tasks`
    /// were moved to `docket_tasks_done`, in `batch`-row transactions until none was left
    /// (at most 100 batches a call).
    Archived {
        /// Tasks moved.
        moved: u64,
    },
    /// The slot's lock was not granted within `lock_timeout` (a transaction that read
    /// `docket_tasks` is still open): the slot was not truncated and the ring did not turn (the
    /// tasks left in it may have moved to slot 0 already).
    Blocked,
}

/// Params of [`MaintenanceStore::task_expire`].
#[derive(Debug, Clone)]
pub struct TaskExpireParams {
    /// The current time (the engine's clock).
    pub now: Timestamp,
    /// Most rows to touch (or return).
    pub limit: i64,
}

/// Params of [`QueueStore::queue_put`].
#[derive(Debug, Clone)]
pub struct QueuePutParams<'a> {
    /// The queue.
    pub name: &'a str,
    /// The queue's new settings (replacing all of them).
    pub settings: &'a QueueSettings,
    /// The current time (the engine's clock).
    pub now: Timestamp,
}

/// Params of [`QueueStore::queue_set_paused`].
#[derive(Debug, Clone)]
pub struct QueueSetPausedParams<'a> {
    /// The queue.
    pub name: &'a str,
    /// Paused (true) or running (false).
    pub paused: bool,
    /// The current time (the engine's clock).
    pub now: Timestamp,
}

/// Params of [`NodeStore::node_stop`].
#[derive(Debug, Clone)]
pub struct NodeStopParams<'a> {
    /// The node.
    pub name: &'a str,
    /// The current time (the engine's clock).
    pub now: Timestamp,
}

/// Params of [`NodeStore::node_drain`].
#[derive(Debug, Clone)]
pub struct NodeDrainParams<'a> {
    /// The node.
    pub name: &'a str,
    /// Drain (true) or end the drain (false).
    pub drain: bool,
    /// Where its pinned waiting tasks go (`None`: to any node).
    pub to: Option<&'a str>,
    /// The current time (the engine's clock).
    pub now: Timestamp,
}

/// Params of [`ProcessStore::namespace_put`].
#[derive(Debug, Clone)]
pub struct NamespacePutParams<'a> {
    /// The namespace.
    pub name: &'a str,
    /// The namespace's configuration (JSON of `NamespaceConfig`).
    pub config: &'a Value,
    /// The current time (the engine's clock).
    pub now: Timestamp,
}

/// Params of [`ProcessStore::process_create`].
#[derive(Debug, Clone)]
pub struct ProcessCreateParams<'a> {
    /// The process's namespace.
    pub namespace: &'a str,
    /// The process id (unique within its namespace).
    pub id: &'a str,
    /// The process's `init` task.
    pub init: ResolvedTask,
    /// The current time (the engine's clock).
    pub now: Timestamp,
}

/// Params of [`ProcessStore::process_enqueue`].
#[derive(Debug, Clone)]
pub struct ProcessEnqueueParams<'a> {
    /// The process's namespace.
    pub namespace: &'a str,
    /// The process id (unique within its namespace).
    pub id: &'a str,
    /// The task to enqueue.
    pub task: ResolvedTask,
    /// The status the process must be in.
    pub require: docket_core::process::ProcessStatus,
    /// The current time (the engine's clock).
    pub now: Timestamp,
}

/// Params of [`ProcessStore::process_get`].
#[derive(Debug, Clone)]
pub struct ProcessGetParams<'a> {
    /// The process's namespace.
    pub namespace: &'a str,
    /// The process id (unique within its namespace).
    pub id: &'a str,
    /// Which part of the history to return.
    pub range: docket_core::process::HistoryRange,
}

/// Params of [`ProcessStore::process_remove`].
#[derive(Debug, Clone)]
pub struct ProcessRemoveParams<'a> {
    /// The `remove` task.
    pub task_id: i64,
    /// Its lease token.
    pub token: &'a str,
    /// The process's namespace.
    pub namespace: &'a str,
    /// The process id (unique within its namespace).
    pub id: &'a str,
    /// The current time (the engine's clock).
    pub now: Timestamp,
}

/// Params of [`ProcessStore::process_simple_repair`].
#[derive(Debug, Clone)]
pub struct ProcessSimpleRepairParams<'a> {
    /// The process's namespace.
    pub namespace: &'a str,
    /// The process id (unique within its namespace).
    pub id: &'a str,
    /// The current time (the engine's clock).
    pub now: Timestamp,
}

/// Params of [`ProcessStore::process_list`].
#[derive(Debug, Clone)]
pub struct ProcessListParams<'a> {
    /// The process's namespace.
    pub namespace: &'a str,
    /// Only processes in this status.
    pub status: Option<docket_core::process::ProcessStatus>,
    /// Start after this (keyset paging).
    pub after: Option<&'a str>,
    /// Most rows to touch (or return).
    pub limit: i64,
}

/// Params of [`ProcessStore::process_collect_zombies`].
#[derive(Debug, Clone)]
pub struct ProcessCollectZombiesParams {
    /// The current time (the engine's clock).
    pub now: Timestamp,
    /// Most rows to touch (or return).
    pub limit: i64,
    /// How a zombie's attempt ends (the engine's rule; progressor's: discarded).
    pub fail_rule: docket_core::task::FailRule,
    /// What a zombie whose attempt is not retried does to its process.
    pub on_give_up: ProcessBreak,
    /// The error recorded on the task and the detail of its broken process.
    pub detail: String,
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

/// Params of [`NotificationStore::sink_lease`].
#[derive(Debug, Clone)]
pub struct SinkLeaseParams<'a> {
    /// The sink (e.g. `webhook:NS`).
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
    /// The sink (e.g. `webhook:NS`).
    pub name: &'a str,
    /// Who holds (or asks for) the sink's lease.
    pub owner: &'a str,
    /// The seq delivered up to.
    pub seq: i64,
}

/// Params of [`ScheduleStore::schedule_put`].
#[derive(Debug, Clone)]
pub struct SchedulePutParams<'a> {
    /// The schedule.
    pub spec: &'a ScheduleSpec,
    /// Its next occurrence.
    pub next_run_at: Timestamp,
    /// The current time (the engine's clock).
    pub now: Timestamp,
}

/// Params of [`ScheduleStore::schedule_pause`].
#[derive(Debug, Clone)]
pub struct SchedulePauseParams<'a> {
    /// The schedule.
    pub name: &'a str,
    /// Paused (true) or running (false).
    pub paused: bool,
    /// Its next occurrence.
    pub next_run_at: Option<Timestamp>,
    /// The current time (the engine's clock).
    pub now: Timestamp,
}

/// Params of [`ScheduleStore::schedule_due`].
#[derive(Debug, Clone)]
pub struct ScheduleDueParams {
    /// The current time (the engine's clock).
    pub now: Timestamp,
    /// Most rows to touch (or return).
    pub limit: i64,
}

/// Params of [`AuditStore::audit_add`].
#[derive(Debug, Clone)]
pub struct AuditAddParams<'a> {
    /// Who acted (`token:NAME`, `cli:USER`, `dashboard`, …).
    pub actor: &'a str,
    /// What was done (`task.cancel`, `queue.pause`, …).
    pub action: &'a str,
    /// What it was done to (`task:17`, `queue:emails`, …).
    pub target: &'a str,
    /// Details of the action, if any.
    pub detail: Option<Value>,
    /// The current time (the engine's clock).
    pub now: Timestamp,
}

/// The oldest available task of a queue ([`QueueStore::queue_oldest_available`]).
#[derive(Debug, Clone, PartialEq)]
pub struct QueueOldest {
    /// The queue.
    pub queue: String,
    /// `run_at` of its oldest available task.
    pub run_at: Timestamp,
}

/// A namespace as stored ([`ProcessStore::namespace_list`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NamespaceRecord {
    /// Its name.
    pub name: String,
    /// Its configuration (JSON of `NamespaceConfig`).
    pub config: Value,
}

/// A process and the requested range of its history ([`ProcessStore::process_get`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessWithHistory {
    /// The process.
    pub process: docket_core::process::Process,
    /// Its events in the requested range.
    pub history: Vec<docket_core::process::Event>,
}

/// What firing one occurrence of a schedule did ([`ScheduleStore::schedule_fire`]).
#[derive(Debug, Clone, PartialEq)]
pub enum ScheduleFired {
    /// Fired: the schedule moved on and this task was inserted.
    Enqueued(Box<Task>),
    /// Fired, but the task's unique key was held by an unfinished task: no task this time.
    KeyHeld,
    /// Not fired: another node fired this occurrence first, or the schedule changed or was
    /// paused.
    NotDue,
}

/// Connections of a store's pool(s) ([`Store::pool_connections`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStats {
    /// Checked out.
    pub in_use: usize,
    /// Open and idle.
    pub idle: usize,
}

/// Params of [`TokenStore::token_create`].
#[derive(Debug, Clone)]
pub struct TokenCreate {
    /// Name (unique among tokens not revoked).
    pub name: String,
    /// SHA-256 of the token, hex ([`docket_core::auth::hash_token`]).
    pub hash: String,
    /// Scopes.
    pub scopes: Vec<docket_core::auth::Scope>,
    /// With `work`: only these queues (empty: all).
    pub queues: Vec<String>,
    /// When it stops working (none: never).
    pub expires_at: Option<Timestamp>,
    /// Now.
    pub now: Timestamp,
}

/// Params of [`TokenStore::token_revoke`].
#[derive(Debug, Clone)]
pub struct TokenRevoke {
    /// The token's name.
    pub name: String,
    /// Now.
    pub now: Timestamp,
}

/// Params of [`TokenStore::token_touch`].
#[derive(Debug, Clone)]
pub struct TokenTouch {
    /// Token id.
    pub id: i64,
    /// Now.
    pub now: Timestamp,
}

/// A stored API token (never the token itself).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TokenRecord {
    /// Id.
    pub id: i64,
    /// Name.
    pub name: String,
    /// SHA-256 of the token, hex.
    #[serde(skip)]
    pub hash: String,
    /// Scopes.
    pub scopes: Vec<docket_core::auth::Scope>,
    /// With `work`: only these queues (empty: all).
    pub queues: Vec<String>,
    /// Created.
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Timestamp,
    /// When it stops working (null: never).
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<Timestamp>,
    /// When it was revoked (null: it was not).
    #[schema(value_type = Option<String>, format = DateTime)]
    pub revoked_at: Option<Timestamp>,
    /// Last request made with it (updated at most once a minute).
    #[schema(value_type = Option<String>, format = DateTime)]
    pub last_used_at: Option<Timestamp>,
}

impl From<TokenRecord> for docket_core::api::TokenView {
    fn from(t: TokenRecord) -> Self {
        docket_core::api::TokenView {
            name: t.name,
            scopes: t.scopes,
            queues: t.queues,
            created_at: t.created_at,
            expires_at: t.expires_at,
            revoked_at: t.revoked_at,
            last_used_at: t.last_used_at,
        }
    }
}

/// Parameters of [`ScheduleStore::schedule_fire`].
#[derive(Debug, Clone)]
pub struct ScheduleFireParams {
    /// Schedule name.
    pub name: String,
    /// The occurrence being fired (the `next_run_at` read).
    pub occurrence: Timestamp,
    /// The occurrence after it.
    pub next_run_at: Timestamp,
    /// The task to insert.
    pub task: ResolvedTask,
    /// Now.
    pub now: Timestamp,
}

/// Params of [`ScheduleStore::schedule_defer`].
#[derive(Debug, Clone, Copy)]
pub struct ScheduleDeferParams<'a> {
    /// Schedule name.
    pub name: &'a str,
    /// The `next_run_at` read.
    pub occurrence: Timestamp,
    /// Where it moves.
    pub next_run_at: Timestamp,
    /// Now.
    pub now: Timestamp,
}

/// How to connect.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// `postgres://…` or `sqlite://path` (created if missing).
    pub url: String,
    /// PostgreSQL schema to use (created if missing); default `public`.
    pub schema: Option<String>,
    /// Pool size; default 10 (PostgreSQL) / 4 readers + 1 writer (SQLite).
    pub max_connections: Option<u32>,
    /// PostgreSQL: commit claims and completions without waiting for the WAL flush (see
    /// `PgStore::begin_hot`); default true. Enqueues always wait for durability.
    pub relaxed_commit: bool,
}

impl ConnectOptions {
    /// Options for `url` with defaults.
    pub fn new(url: impl Into<String>) -> Self {
        ConnectOptions {
            url: url.into(),
            schema: None,
            max_connections: None,
            relaxed_commit: true,
        }
    }
}

/// Opens the store for a URL: `postgres://` / `postgresql://` or `sqlite:`.
///
/// # Errors
/// [`StoreError::Invalid`] for another scheme; database errors when it cannot connect.
pub async fn connect(opts: &ConnectOptions) -> Result<Arc<dyn Store>> {
    let url = opts.url.as_str();
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Arc::new(postgres::PgStore::connect(opts).await?))
    } else if url.starts_with("sqlite:") {
        Ok(Arc::new(sqlite::SqliteStore::connect(opts).await?))
    } else if url.starts_with("mysql://") || url.starts_with("mariadb://") {
        Ok(Arc::new(mysql::MySqlStore::connect(opts).await?))
    } else {
        Err(StoreError::Invalid(format!(
            "unsupported database URL {url:?}: use postgres://user@host/db, \
             mysql://user@host/db (MySQL 8.0+, MariaDB 10.6+; also mariadb://) or sqlite://path/to/file.db"
        )))
    }
}

/// Every column of `docket_tasks` a [`Task`] is decoded from (the same on every backend).
pub(crate) const TASK_COLS: &str =
    "id, queue, kind, payload, priority, state, run_at, expires_at, attempt, \
    max_attempts, backoff_initial_ms, backoff_coefficient, backoff_max_ms, backoff_jitter, \
    timeout_ms, unique_key, concurrency_key, concurrency_limit, node, result, errors, progress, \
    created_at, attempted_at, finished_at, worker, lease_token, lease_ms, lease_expires_at, \
    cancel_requested_at, trace_id, namespace, process_id, backoff_kind, user_id, stage, \
    stages_done, runs, run_count, attempt_node, edited_at";

/// A task a claim may take: its id and concurrency key with the key's limit (default 1), and
/// what its lease depends on (its timeout, whether it is a process step).
#[derive(Debug, Clone)]
pub(crate) struct ClaimCandidate {
    pub id: i64,
    pub key: Option<(String, i32)>,
    pub timeout_ms: i64,
    pub process: bool,
}

impl ClaimCandidate {
    /// The lease a claim at `now` asking for `lease` gives it ([`docket_core::lease::claim_lease`]).
    pub(crate) fn lease(
        &self,
        now: Timestamp,
        lease: Option<Duration>,
    ) -> docket_core::lease::ClaimLease {
        let timeout = Duration::from_millis(u64::try_from(self.timeout_ms).unwrap_or(0));
        docket_core::lease::claim_lease(now, lease, timeout, self.process)
    }
}

/// What a claim writes, as columns: ids, lease lengths (ms), lease ends and deadlines of the
/// picked candidates, in order.
pub(crate) struct ClaimColumns {
    pub ids: Vec<i64>,
    pub lease_ms: Vec<i64>,
    pub expires_at: Vec<Timestamp>,
    pub deadline_at: Vec<Option<Timestamp>>,
}

impl ClaimColumns {
    /// The leases of `picked` for a claim at `now` asking for `lease`.
    pub(crate) fn of(picked: &[&ClaimCandidate], now: Timestamp, lease: Option<Duration>) -> Self {
        let mut c = ClaimColumns {
            ids: Vec::with_capacity(picked.len()),
            lease_ms: Vec::with_capacity(picked.len()),
            expires_at: Vec::with_capacity(picked.len()),
            deadline_at: Vec::with_capacity(picked.len()),
        };
        for p in picked {
            let l = p.lease(now, lease);
            c.ids.push(p.id);
            c.lease_ms.push(l.lease_ms);
            c.expires_at.push(l.expires_at);
            c.deadline_at.push(l.deadline_at);
        }
        c
    }
}

/// The distinct concurrency keys among `cands`, sorted (so claimers lock them in one order
/// and never wait on each other in opposite orders), each with its limit.
pub(crate) fn claim_keys(cands: &[ClaimCandidate]) -> Vec<(String, i32)> {
    let mut keys: Vec<(String, i32)> = cands.iter().filter_map(|c| c.key.clone()).collect();
    keys.sort();
    keys.dedup_by(|a, b| a.0 == b.0);
    keys
}

/// Which candidates (in claim order) a claim takes: at most `room` (the queue's free slots),
/// and of each key at most the slots `key_room` counts as free (running tasks of the key
/// subtracted from its limit). The same rule on every backend; each backend counts `room`
/// and `key_room` under its own locks.
pub(crate) fn claim_pick(
    cands: &[ClaimCandidate],
    room: usize,
    mut key_room: HashMap<String, i64>,
) -> Vec<&ClaimCandidate> {
    let mut ids = Vec::with_capacity(cands.len().min(room));
    for c in cands {
        if ids.len() >= room {
            break;
        }
        if let Some((k, _)) = &c.key {
            let left = key_room.entry(k.clone()).or_insert(0);
            if *left <= 0 {
                continue;
            }
            *left -= 1;
        }
        ids.push(c);
    }
    ids
}

/// Orders claimed tasks as the claim did (priority desc, attempt asc, run_at asc, id asc).
pub(crate) fn sort_claim_order(tasks: &mut [Task]) {
    tasks.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then(a.attempt.cmp(&b.attempt))
            .then(a.run_at.cmp(&b.run_at))
            .then(a.id.cmp(&b.id))
    });
}

/// A queue settings row's created_at and updated_at.
pub(crate) type QueueTimes = (Option<Timestamp>, Option<Timestamp>);

/// Every queue that has settings or tasks, by name: settings rows joined with counts by state.
pub(crate) fn merge_queues(
    settings: Vec<(String, QueueSettings, QueueTimes)>,
    mut counts: HashMap<String, std::collections::BTreeMap<TaskState, i64>>,
) -> Vec<QueueStats> {
    let mut out: Vec<QueueStats> = settings
        .into_iter()
        .map(|(name, settings, times)| QueueStats {
            counts: counts.remove(&name).unwrap_or_else(empty_counts),
            name,
            settings,
            created_at: times.0,
            updated_at: times.1,
        })
        .collect();
    out.extend(counts.into_iter().map(|(name, counts)| QueueStats {
        name,
        settings: QueueSettings::default(),
        counts,
        ..QueueStats::default()
    }));
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Zero counts for every state, so answers always list all seven.
pub(crate) fn empty_counts() -> std::collections::BTreeMap<TaskState, i64> {
    TaskState::ALL.into_iter().map(|s| (s, 0)).collect()
}

/// Decodes a token row's `scopes` and `queues` JSON; a value that does not parse is an error
/// naming the row, never an empty grant.
pub(crate) fn decode_grant(
    id: i64,
    scopes: &Value,
    queues: &Value,
) -> Result<(Vec<docket_core::auth::Scope>, Vec<String>)> {
    let bad = |what: &str, e: serde_json::Error| {
        StoreError::Invalid(format!("token {id}: stored {what} do not parse: {e}"))
    };
    Ok((
        serde_json::from_value(scopes.clone()).map_err(|e| bad("scopes", e))?,
        serde_json::from_value(queues.clone()).map_err(|e| bad("queues", e))?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_pick_keeps_queue_and_key_room() {
        let c = |id, key: Option<&str>| ClaimCandidate {
            id,
            key: key.map(|k| (k.to_string(), 2)),
            timeout_ms: 1000,
            process: false,
        };
        let claim_pick = |c, room, kr| -> Vec<i64> {
            claim_pick(c, room, kr).into_iter().map(|c| c.id).collect()
        };
        let cands = vec![
            c(1, Some("a")),
            c(2, Some("a")),
            c(3, Some("a")),
            c(4, None),
            c(5, Some("b")),
            c(6, None),
        ];
        assert_eq!(claim_keys(&cands), vec![("a".into(), 2), ("b".into(), 2)]);
        let room = |a, b| HashMap::from([("a".to_string(), a), ("b".to_string(), b)]);
        assert_eq!(
            claim_pick(&cands, usize::MAX, room(2, 2)),
            vec![1, 2, 4, 5, 6]
        );
        assert_eq!(claim_pick(&cands, 3, room(2, 2)), vec![1, 2, 4]);
        // A key already full (or over: a limit lowered while tasks run) takes nothing.
        assert_eq!(claim_pick(&cands, usize::MAX, room(0, -1)), vec![4, 6]);
        assert_eq!(claim_pick(&cands, 0, room(2, 2)), Vec::<i64>::new());
    }
}
