//! Schedules: put, fire each occurrence once, pause, defer ([`ScheduleStore`]).

use crate::Result;
use async_trait::async_trait;
use docket_core::task::ResolvedTask;
use docket_core::{Schedule, ScheduleSpec, Task, Timestamp};

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
