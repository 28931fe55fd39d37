//! Tasks: insert, read, list, and the operator changes of one task ([`TaskStore`]), with the
//! column list every backend decodes a task from.

use crate::{Result, StoreError};
use async_trait::async_trait;
pub use docket_core::api::TaskListParams;
pub use docket_core::api::Throughput;
use docket_core::task::ResolvedTask;
use docket_core::{Task, Timestamp};
use std::sync::Arc;

/// Params of [`TaskStore::task_insert_many`].
#[derive(Debug, Clone)]
pub struct TaskInsertManyParams {
    /// Tasks with every default resolved.
    pub tasks: Vec<ResolvedTask>,
    /// created_at of all of them.
    pub now: Timestamp,
}

/// Params of [`TaskStore::task_debounce`].
#[derive(Debug, Clone)]
pub struct TaskDebounceParams {
    /// The task, with `debounce` set ([`docket_core::debounce`]).
    pub task: ResolvedTask,
    /// When the enqueue happens: created_at of a new task, edited_at of a replaced one.
    pub now: Timestamp,
}

/// Tasks: insert, read, list, and the operator changes of one task.
#[async_trait]
pub trait TaskStore: Send + Sync {
    /// A debounced enqueue (issue 43): in one transaction, the waiting task with the key
    /// (scheduled or available, never claimed) is locked and takes the new task's fields and
    /// `run_at` = [`docket_core::debounce::Debounce::run_at`] (`replaced: Some(true)`,
    /// `inserted: Some(false)`), or, when none waits, the task is inserted with the key and its
    /// deadline (`replaced: Some(false)`, `inserted: Some(true)`). One waiting task per key
    /// holds across nodes: a unique index refuses a second, and the flow goes again and
    /// replaces the one that won.
    ///
    /// # Errors
    /// [`StoreError::Invalid`] when the task has no `debounce`; store failure (nothing changed).
    async fn task_debounce(&self, p: TaskDebounceParams) -> Result<Task>;

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

    /// How many tasks match `p`'s filters, counted up to `p.limit` (a bulk action's
    /// confirmation, [`docket_core::bulk::COUNT_CAP`]); `after` and `descending` are ignored.
    ///
    /// # Errors
    /// Database failure.
    async fn task_count(&self, p: TaskListParams) -> Result<i64>;

    /// Deletes the tasks among `ids` that are finished (completed, discarded, cancelled) and
    /// not a live process's (its history needs them; the prune's rule), subtracting them from
    /// the kept counts under their lock ([`docket_core::counts`]). Returns how many it deleted.
    ///
    /// # Errors
    /// Database failure; nothing is deleted then.
    async fn task_delete(&self, ids: &[i64]) -> Result<u64>;
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
