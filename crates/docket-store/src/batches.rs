//! Batches: create with members, add, seal, read, and settle once ([`BatchStore`]). The rules
//! (which callbacks are due, their payloads) are `docket_core::batch`'s; the engine hands them
//! to [`BatchStore::batch_settle`] as a closure that runs under the batch's row lock.

use crate::{Result, StoreError};
use async_trait::async_trait;
use docket_core::batch::Batch;
use docket_core::task::ResolvedTask;
use docket_core::{Task, Timestamp};
use std::sync::Arc;

/// Batches of tasks with callbacks.
#[async_trait]
pub trait BatchStore: Send + Sync {
    /// Creates a batch and inserts its members (their `batch_id` is set here), in one
    /// transaction. Answers the batch and the members in input order.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when a member was turned away by a unique key (the engine
    /// refuses members with one); database failure. Nothing is written then.
    async fn batch_create(&self, p: BatchCreateParams) -> Result<(Batch, Vec<Task>)>;

    /// Adds members to a batch that has not settled and, with `seal`, seals it; one
    /// transaction under the batch's row lock.
    ///
    /// # Errors
    /// [`StoreError::NotFound`]; [`StoreError::Conflict`] when the batch has settled (its
    /// callbacks were enqueued); database failure. Nothing is written then.
    async fn batch_add(&self, p: BatchAddParams) -> Result<(Batch, Vec<Task>)>;

    /// One batch with its members counted by state.
    ///
    /// # Errors
    /// Database failure.
    async fn batch_get(&self, id: i64) -> Result<Option<Batch>>;

    /// Batches, newest first, with ids below `before` when given; counted like
    /// [`BatchStore::batch_get`].
    ///
    /// # Errors
    /// Database failure.
    async fn batch_list(&self, p: BatchListParams) -> Result<Vec<Batch>>;

    /// Ids of sealed batches that have not settled, above `after`, in id order (the engine's
    /// sweep pages through them).
    ///
    /// # Errors
    /// Database failure.
    async fn batch_unsettled(&self, after: i64, limit: i64) -> Result<Vec<i64>>;

    /// Settles a batch if it is due: under its row lock, when it is sealed, has not settled and
    /// no member is unfinished, calls `rule` with the batch (counted) and the ids of its
    /// discarded and cancelled members (at most 1,001, by id) and the settings of the
    /// callbacks' queues (read before the lock), inserts the tasks the rule
    /// returns, and records them as fired with the settling time. `None` when not due (or
    /// settled before: a second node settling at once gets `None`).
    ///
    /// # Errors
    /// The rule's error, database failure; nothing is written then.
    async fn batch_settle(&self, p: BatchSettleParams) -> Result<Option<Batch>>;

    /// The tasks of batch `batch_id` that wait for their dependencies (`scheduled` at
    /// [`docket_core::workflow::waiting_run_at`]), each with its dependencies' states (`None`:
    /// the dependency was pruned) and edges, by id.
    ///
    /// # Errors
    /// Database failure.
    async fn workflow_waiting(&self, batch_id: i64) -> Result<Vec<WaitingTask>>;

    /// As [`BatchStore::workflow_waiting`], for the waiting tasks (of any batch) that depend on
    /// one of `finished` — the tasks that just finished: what the engine looks at after a
    /// completion, without reading every waiting task.
    ///
    /// # Errors
    /// Database failure.
    async fn workflow_waiting_on(&self, finished: &[i64]) -> Result<Vec<WaitingTask>>;

    /// Releases (makes `available` now) and cancels waiting tasks, in one transaction; a task
    /// that no longer waits (released or cancelled by another node, changed by hand) is left
    /// alone. Answers the tasks released and how many were cancelled.
    ///
    /// # Errors
    /// Database failure; nothing is written then.
    async fn workflow_apply(&self, p: WorkflowApplyParams) -> Result<WorkflowApplied>;

    /// Retries a workflow's failed tasks, in one transaction under its batch's row lock: the
    /// `run` tasks become available now and the `wait` tasks wait for their dependencies again
    /// (each only if still discarded or cancelled, `max_attempts` raised to allow one more
    /// attempt, as a task retry does), and, when any changed, the batch is unsettled so its
    /// callbacks fire again when it next finishes.
    ///
    /// # Errors
    /// [`StoreError::NotFound`] for an unknown batch; database failure (nothing written).
    async fn workflow_retry(&self, p: WorkflowRetryParams) -> Result<WorkflowRetried>;

    /// The graph of a workflow's tasks: each task with its ref, kind, state and edges, by id.
    ///
    /// # Errors
    /// Database failure.
    async fn workflow_graph(
        &self,
        batch_id: i64,
    ) -> Result<Vec<docket_core::workflow::WorkflowNode>>;

    /// The results of the dependencies of each of `task_ids`, in one query (the `deps` of the
    /// workflow tasks a claim took): rows of (task id, dependency's ref, its result), by task
    /// id, then by dependency id. A task without dependencies has no row.
    ///
    /// # Errors
    /// Database failure.
    async fn workflow_dep_results_many(
        &self,
        task_ids: &[i64],
    ) -> Result<Vec<(i64, String, Option<serde_json::Value>)>>;

    /// The results of one task's dependencies by ref ([`BatchStore::workflow_dep_results_many`]
    /// of one task).
    ///
    /// # Errors
    /// Database failure.
    async fn workflow_dep_results(
        &self,
        task_id: i64,
    ) -> Result<Vec<(String, Option<serde_json::Value>)>> {
        let rows = self.workflow_dep_results_many(&[task_id]).await?;
        Ok(rows.into_iter().map(|(_, r, v)| (r, v)).collect())
    }
}

/// A task waiting for its dependencies (see [`BatchStore::workflow_waiting`]).
#[derive(Debug, Clone, PartialEq)]
pub struct WaitingTask {
    /// Its id.
    pub id: i64,
    /// Its queue.
    pub queue: String,
    /// Each dependency's state (`None`: pruned) and whether its edge ignores a failure.
    pub deps: Vec<(Option<docket_core::TaskState>, bool)>,
}

/// Params of [`BatchStore::workflow_apply`].
#[derive(Debug, Clone, Default)]
pub struct WorkflowApplyParams {
    /// Tasks to make available.
    pub release: Vec<i64>,
    /// Tasks to cancel.
    pub cancel: Vec<i64>,
    /// The current time (the engine's clock).
    pub now: Timestamp,
}

/// What [`BatchStore::workflow_apply`] changed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkflowApplied {
    /// Released tasks' ids.
    pub released: Vec<i64>,
    /// How many were cancelled.
    pub cancelled: u64,
}

/// Params of [`BatchStore::batch_create`].
#[derive(Debug, Clone)]
pub struct BatchCreateParams {
    /// The label.
    pub name: Option<String>,
    /// Keep it open (unsealed).
    pub open: bool,
    /// The callback specs as given (`docket_core::batch::Callbacks`).
    pub callbacks: docket_core::batch::Callbacks,
    /// The members, resolved.
    pub tasks: Vec<ResolvedTask>,
    /// A workflow's refs, one per task (empty for a plain batch).
    pub refs: Vec<String>,
    /// A workflow's dependencies: per task, what it waits for (an index in `tasks`; an
    /// existing task is refused here) and whether each edge ignores a failure (empty for a
    /// plain batch).
    pub deps: Vec<Vec<(docket_core::workflow::Target, bool)>>,
    /// The current time (the engine's clock).
    pub now: Timestamp,
}

/// Params of [`BatchStore::batch_add`].
#[derive(Debug, Clone)]
pub struct BatchAddParams {
    /// The batch.
    pub id: i64,
    /// Members to add, resolved (may be none).
    pub tasks: Vec<ResolvedTask>,
    /// Seal it too.
    pub seal: bool,
    /// For a workflow: the new tasks' refs, one per task (empty for a plain batch). A ref the
    /// workflow already has is refused under the batch's lock.
    pub refs: Vec<String>,
    /// For a workflow: per new task, what it waits for (a new task's index or an existing
    /// task's id) and whether each edge ignores a failure.
    pub deps: Vec<Vec<(docket_core::workflow::Target, bool)>>,
    /// The current time (the engine's clock).
    pub now: Timestamp,
}

/// Params of [`BatchStore::workflow_retry`].
#[derive(Debug, Clone, Default)]
pub struct WorkflowRetryParams {
    /// The workflow (its batch).
    pub id: i64,
    /// Failed tasks to make available now (`docket_core::workflow::RetryPlan::run`).
    pub run: Vec<i64>,
    /// Failed tasks to make wait for their dependencies again.
    pub wait: Vec<i64>,
    /// The current time (the engine's clock).
    pub now: Timestamp,
}

/// What [`BatchStore::workflow_retry`] changed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WorkflowRetried {
    /// Tasks made available, with their queues.
    pub run: Vec<(i64, String)>,
    /// How many wait again.
    pub waiting: u64,
}

/// Params of [`BatchStore::batch_list`].
#[derive(Debug, Clone, Copy)]
pub struct BatchListParams {
    /// Only ids below this.
    pub before: Option<i64>,
    /// At most this many.
    pub limit: i64,
}

/// The rule of [`BatchStore::batch_settle`]: the batch, its failed members' ids and the
/// settings of its callbacks' queues → the callback tasks to insert, by callback name.
pub type BatchSettleRule = Arc<
    dyn Fn(
            &Batch,
            &[i64],
            &std::collections::HashMap<String, docket_core::QueueSettings>,
        ) -> std::result::Result<Vec<(String, ResolvedTask)>, StoreError>
        + Send
        + Sync,
>;

/// Params of [`BatchStore::batch_settle`].
#[derive(Clone)]
pub struct BatchSettleParams {
    /// The batch.
    pub id: i64,
    /// The callbacks to enqueue (the engine's rule).
    pub rule: BatchSettleRule,
    /// The current time (the engine's clock).
    pub now: Timestamp,
}

impl std::fmt::Debug for BatchSettleParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchSettleParams")
            .field("id", &self.id)
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}
