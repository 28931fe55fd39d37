//! Namespaces and durable processes (progressor, seeds 000/001): create, commit, fail, repair,
//! import, remove, zombies ([`ProcessStore`]).

use crate::{LeaseOutcome, Result, TaskFail};
use async_trait::async_trait;
pub use docket_core::process::NamespaceRecord;
pub use docket_core::process::ProcessWithHistory;
use docket_core::task::ResolvedTask;
use docket_core::{Task, Timestamp};
use serde_json::Value;

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
