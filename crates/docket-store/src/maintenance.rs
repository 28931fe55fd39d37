//! What the maintenance services run: promote, rescue, expire, prune, rotate
//! ([`MaintenanceStore`]). The engine decides (the rescue's failures, retention); the store applies.

use crate::{Failure, Result, TaskLabels};
use async_trait::async_trait;
use docket_core::{Task, Timestamp};
use std::time::Duration;

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
    /// Task events no sink published within the notifications' retention (a sink removed).
    pub task_events: u64,
}

/// Result of [`MaintenanceStore::task_promote`].
#[derive(Debug, Clone, Default)]
pub struct Promoted {
    /// How many tasks became available.
    pub count: u64,
    /// Their queues (distinct).
    pub queues: Vec<String>,
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
    /// Before `idle_every` has passed since the last turn, turns only when the slot being
    /// filled holds at least this many bytes (PostgreSQL: `pg_relation_size` of its leaf; 0:
    /// at every `every`). A turn's exclusive lock pauses claims for a moment (up to
    /// `lock_timeout`, then the TRUNCATE and its commit): once a second it made the pickup
    /// tail (W2 p99 12 ms against 5.4 with the ring quiet, issue 40), and a slot that filled
    /// slowly holds few dead tuples, which VACUUM clears anyway.
    pub min_fill_bytes: i64,
    /// A ring that fills slowly still turns once this long after the last turn.
    pub idle_every: Duration,
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
