//! Durable functions' runs, journals and mailboxes ([`RunStore`]). The rules (what a wait
//! becomes, the non-determinism error, a child's id and end event) are
//! `docket_core::durable`'s; the calls a worker makes under its lease check the lease of the
//! run's task as every other call under a lease does (`docket_core::lease::check`).

use crate::Result;
use async_trait::async_trait;
use docket_core::durable::{
    Entry, EventSent, NewEntry, Resumed, RunListParams, Suspended, Wait, WorkflowRun,
};
use docket_core::task::{FailRule, ResolvedTask};
use docket_core::Timestamp;
use serde_json::Value;

/// A run to start: its row and its task.
#[derive(Debug, Clone)]
pub struct NewRun {
    /// Its id.
    pub id: String,
    /// The workflow's name.
    pub workflow: String,
    /// Its input.
    pub input: Value,
    /// The run that starts it, for a child.
    pub parent_id: Option<String>,
    /// Its task, resolved (queue, kind = `workflow`, payload `docket_core::durable::task_payload`).
    pub task: ResolvedTask,
}

/// Params of [`RunStore::run_start`].
#[derive(Debug, Clone)]
pub struct RunStartParams {
    /// The run.
    pub run: NewRun,
    /// Now.
    pub now: Timestamp,
}

/// What every call made under the lease of a run's task carries.
#[derive(Debug, Clone)]
pub struct RunLease {
    /// The run's id.
    pub id: String,
    /// The lease token of its task.
    pub token: String,
    /// Now.
    pub now: Timestamp,
    /// How a failed attempt ends (a call that finds the attempt past its deadline fails it).
    pub fail_rule: FailRule,
}

/// Params of [`RunStore::run_record`] (and the entries of suspend and finish).
#[derive(Debug, Clone)]
pub struct RunRecordParams {
    /// The lease.
    pub lease: RunLease,
    /// Entries to record.
    pub entries: Vec<NewEntry>,
    /// The children the `child` entries start, by their entry's seq.
    pub children: Vec<(i64, NewRun)>,
}

/// Params of [`RunStore::run_suspend`].
#[derive(Debug, Clone)]
pub struct RunSuspendParams {
    /// The lease and the entries to record first.
    pub record: RunRecordParams,
    /// What to wait for.
    pub wait: Wait,
}

/// Params of [`RunStore::run_finish`].
#[derive(Debug, Clone)]
pub struct RunFinishParams {
    /// The lease and the entries to record first.
    pub record: RunRecordParams,
    /// What the function returned, or why it failed.
    pub outcome: std::result::Result<Value, String>,
}

/// One of the reports [`RunStore::run_report_many`] writes together: a worker's entries and,
/// with `finish`, the run's end ([`RunStore::run_record`] without it, [`RunStore::run_finish`]
/// with it).
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The lease and the entries to record.
    pub record: RunRecordParams,
    /// What the function returned, or why it failed, when the run ends.
    pub finish: Option<std::result::Result<Value, String>>,
}

/// What one [`RunReport`] did.
#[derive(Debug, Clone)]
pub enum RunReported {
    /// Its entries were recorded: how many were written (the others were there).
    Recorded(usize),
    /// The run ended (or had ended): the run as it is now.
    Finished(Box<WorkflowRun>),
}

/// Params of [`RunStore::run_send`].
#[derive(Debug, Clone)]
pub struct RunSendParams {
    /// The run.
    pub id: String,
    /// The event's name.
    pub name: String,
    /// Its payload.
    pub payload: Value,
    /// Now.
    pub now: Timestamp,
}

/// What [`RunStore::run_cancel`] did.
#[derive(Debug, Clone)]
pub struct RunCancelled {
    /// The run as it is now.
    pub run: WorkflowRun,
    /// Whether this call cancelled it (false: it had finished).
    pub cancelled: bool,
    /// Its unfinished children (the engine cancels them too).
    pub children: Vec<String>,
}

/// Workflow runs of durable functions.
#[async_trait]
pub trait RunStore: Send + Sync {
    /// Starts a run: inserts it and its task in one transaction. A run of that id already
    /// there is answered instead (`false`), whatever its workflow (the engine compares).
    ///
    /// # Errors
    /// Database failure; nothing is written then.
    async fn run_start(&self, p: RunStartParams) -> Result<(WorkflowRun, bool)>;

    /// [`RunStore::run_start`] of many runs in one transaction (the starts of many callers
    /// written together): one answer per start, in order; a start of an id started before
    /// (or earlier in the same call) answers that run. When the transaction fails (a run of
    /// the same id started elsewhere at the same moment), each start is written alone.
    ///
    /// # Errors
    /// Per start, as [`RunStore::run_start`]; the outer error is kept for stores that cannot
    /// answer per start.
    async fn run_start_many(
        &self,
        starts: Vec<RunStartParams>,
    ) -> Result<Vec<Result<(WorkflowRun, bool)>>>;

    /// One run.
    ///
    /// # Errors
    /// Database failure.
    async fn run_get(&self, id: &str) -> Result<Option<WorkflowRun>>;

    /// Runs, newest first, by the filters (limit default 100).
    ///
    /// # Errors
    /// Database failure.
    async fn run_list(&self, p: RunListParams) -> Result<Vec<WorkflowRun>>;

    /// A run's journal, by seq.
    ///
    /// # Errors
    /// Database failure.
    async fn run_entries(&self, id: &str) -> Result<Vec<Entry>>;

    /// Records entries under the lease of the run's task, in one transaction under the run's
    /// row lock; starts the children of `child` entries. An entry already at its seq with the
    /// same kind and name is left as it is (a request sent again); answers how many were
    /// written.
    ///
    /// # Errors
    /// [`crate::StoreError::NotFound`]; [`crate::StoreError::LeaseLost`],
    /// [`crate::StoreError::Cancelled`], [`crate::StoreError::TimedOut`] when the lease does not
    /// hold (a cancel requested or a deadline passed is applied to the task first);
    /// [`crate::StoreError::Nondeterministic`] when an entry at a seq has another kind or name
    /// (nothing written); [`crate::StoreError::Conflict`] when a child's id is a run of
    /// another workflow; database failure.
    async fn run_record(&self, p: RunRecordParams) -> Result<usize>;

    /// Records entries, then the wait (`docket_core::durable::wait_outcome`): a sleep over, an
    /// event taken from the mailbox (oldest first) or a timeout passed is answered at once;
    /// otherwise the run's task is handed back (`scheduled` until the wait's end, stage
    /// `resume`) and the run sleeps or waits. One transaction under the run's row lock.
    ///
    /// # Errors
    /// As [`RunStore::run_record`].
    async fn run_suspend(&self, p: RunSuspendParams) -> Result<Suspended>;

    /// Records entries, then ends the run (completed with its result, or failed) and its task
    /// (completed, or discarded), and tells its parent; one transaction. A run that has
    /// finished already keeps its end, and its task completes.
    ///
    /// # Errors
    /// As [`RunStore::run_record`].
    async fn run_finish(&self, p: RunFinishParams) -> Result<WorkflowRun>;

    /// [`RunStore::run_record`] and [`RunStore::run_finish`] of many runs in one transaction
    /// (a worker's reports written together, as a completion batch is): one answer per report,
    /// in order. When one of them is refused (a lease that does not hold, non-determinism, a
    /// child's conflict) the transaction is rolled back, that report is written alone (so it
    /// is answered as the single call answers it) and the others go again without it; when
    /// its run has another report in the call, each is written alone, in order. Reports of one
    /// run are written in their order.
    ///
    /// # Errors
    /// Per report, as [`RunStore::run_record`] (a database failure of the batch has each go
    /// alone too); the outer error is kept for stores that cannot answer per report.
    async fn run_report_many(&self, reports: Vec<RunReport>) -> Result<Vec<Result<RunReported>>>;

    /// A worker resumes the run: under the lease, a sleep that is over ends, the run is
    /// `running` again; answers the run, its journal and now.
    ///
    /// # Errors
    /// As [`RunStore::run_record`].
    async fn run_resume(&self, p: RunLease) -> Result<Resumed>;

    /// Puts an event in the run's mailbox and, when the run waits for it, wakes its task.
    ///
    /// # Errors
    /// [`crate::StoreError::NotFound`]; [`crate::StoreError::InvalidState`] for a finished run;
    /// database failure.
    async fn run_send(&self, p: RunSendParams) -> Result<EventSent>;

    /// Cancels an unfinished run (its state; the engine cancels its task) and tells its parent.
    ///
    /// # Errors
    /// [`crate::StoreError::NotFound`]; database failure.
    async fn run_cancel(&self, id: &str, now: Timestamp) -> Result<RunCancelled>;

    /// A failed or cancelled run runs again (`running`; the engine retries its task).
    ///
    /// # Errors
    /// [`crate::StoreError::NotFound`]; [`crate::StoreError::InvalidState`] for a run that
    /// is not failed or cancelled; database failure.
    async fn run_reopen(&self, id: &str, now: Timestamp) -> Result<WorkflowRun>;

    /// Deletes up to `limit` runs finished before `before`, with their journals and
    /// mailboxes; answers how many.
    ///
    /// # Errors
    /// Database failure.
    async fn run_prune(&self, before: Timestamp, limit: i64) -> Result<u64>;

    /// The runs the tasks `task_ids` drive (tasks that drive none are left out), for an event
    /// sink's messages.
    ///
    /// # Errors
    /// Database failure.
    async fn run_of_tasks(&self, task_ids: &[i64]) -> Result<Vec<docket_core::sink::TaskRun>>;
}
