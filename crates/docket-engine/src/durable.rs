//! Durable functions (issue 41): workflows written as code in a client, their runs kept here
//! (rules: [`docket_core::durable`]; the store's flows: `docket_store::RunStore`).
//!
//! A run is driven by one task on the run's queue whose kind is the workflow's name; the
//! worker that claims it replays the function against the run's journal and reports through
//! the calls below, each under the task's lease. Sleeping and waiting hand the task back
//! (scheduled at the wake time, so the scheduler's promote brings it back; an event sent to a
//! waiting run makes it available at once), so a waiting run holds no worker.

use crate::{metrics, Engine, EngineError};
use docket_core::durable::{
    self, Entry, EntryKind, EventRequest, EventSent, FinishRequest, NewEntry, Resumed,
    RunListParams, StartRequest, Started, StepsRequest, SuspendRequest, Suspended, WorkflowRun,
};
use docket_core::NewTask;
use docket_store::{
    NewRun, RunLease, RunRecordParams, RunReport, RunReported, RunSendParams, RunStartParams,
    RunSuspendParams, Store, StoreError,
};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;

/// How often a result request looks at a run that has not finished.
const RESULT_POLL: Duration = Duration::from_millis(50);

/// Most calls one transaction writes.
const PER_BATCH: usize = 256;
/// Batches of one kind written at once: one, so that what arrives while it commits goes in
/// the next (larger batches: less of the database's CPU per call). Measured with the
/// durable-functions bench (bench/durable, 2026-11-29): 1, 2, 4 and 8 writers gave 420, 396,
/// 370 and 287 workflows/s embedded (TypeScript client: 297, 259, 245, 209); step p50 63, 54,
/// 39 and 25 ms.
const WRITERS: usize = 1;

/// Writes a batch: one answer per call, in order.
type WriteFn<I, O> =
    fn(
        Arc<dyn Store>,
        Vec<I>,
    )
        -> futures::future::BoxFuture<'static, docket_store::Result<Vec<docket_store::Result<O>>>>;

/// Calls of many callers written together (a group commit): each call queues its item and
/// waits; a writer takes what is queued (up to [`PER_BATCH`]) and writes it in one
/// transaction, then the next, until none is left. A call alone is written at once; under
/// load, the calls that arrive while a batch commits go together in the next, as the
/// in-process worker's completions are batched. Writers are spawned, so a caller that stops
/// waiting loses no one else's call. Used for workers' reports (`RunStore::run_report_many`)
/// and starts (`RunStore::run_start_many`).
pub(crate) struct GroupCommit<I, O> {
    state: Mutex<Queue<I, O>>,
    write: WriteFn<I, O>,
}

struct Queue<I, O> {
    waiting: Vec<(I, oneshot::Sender<docket_store::Result<O>>)>,
    writers: usize,
}

impl<I, O> std::fmt::Debug for GroupCommit<I, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let q = self.state.lock().unwrap_or_else(|p| p.into_inner());
        f.debug_struct("GroupCommit")
            .field("waiting", &q.waiting.len())
            .field("writers", &q.writers)
            .finish()
    }
}

/// Gives a writer's place back if it ends other than by finding the queue empty (a panic, or
/// its runtime stopping): that one gives it back under the same lock as it looked, so a call
/// queued meanwhile either is seen or finds a place free and spawns a writer.
struct Place<'a, I, O> {
    of: &'a GroupCommit<I, O>,
    held: bool,
}

impl<I, O> Drop for Place<'_, I, O> {
    fn drop(&mut self) {
        if self.held {
            let mut q = self.of.state.lock().unwrap_or_else(|p| p.into_inner());
            q.writers -= 1;
        }
    }
}

impl<I: Send + 'static, O: Send + 'static> GroupCommit<I, O> {
    pub(crate) fn new(write: WriteFn<I, O>) -> Self {
        GroupCommit {
            state: Mutex::new(Queue {
                waiting: vec![],
                writers: 0,
            }),
            write,
        }
    }

    /// Writes `item` with whatever else is queued; its answer.
    async fn call(self: &Arc<Self>, store: &Arc<dyn Store>, item: I) -> Result<O, EngineError> {
        let (tx, rx) = oneshot::channel();
        let spawn = {
            let mut q = self.state.lock().unwrap_or_else(|p| p.into_inner());
            q.waiting.push((item, tx));
            let spawn = q.writers < WRITERS;
            if spawn {
                q.writers += 1;
            }
            spawn
        };
        if spawn {
            let (me, store) = (self.clone(), store.clone());
            tokio::spawn(async move { me.drain(store).await });
        }
        match rx.await {
            Ok(r) => Ok(r?),
            Err(_) => Err(EngineError::Unavailable(
                "the writer of the call's batch stopped".into(),
            )),
        }
    }

    async fn drain(&self, store: Arc<dyn Store>) {
        let mut place = Place {
            of: self,
            held: true,
        };
        loop {
            let batch: Vec<_> = {
                let mut q = self.state.lock().unwrap_or_else(|p| p.into_inner());
                if q.waiting.is_empty() {
                    q.writers -= 1;
                    place.held = false;
                    return;
                }
                let n = q.waiting.len().min(PER_BATCH);
                q.waiting.drain(..n).collect()
            };
            let (items, answers): (Vec<_>, Vec<_>) = batch.into_iter().unzip();
            match (self.write)(store.clone(), items).await {
                Ok(outs) => {
                    for (a, o) in answers.into_iter().zip(outs) {
                        let _ = a.send(o);
                    }
                }
                Err(e) => {
                    for a in answers {
                        let _ = a.send(Err(StoreError::Database {
                            kind: e
                                .db_kind()
                                .unwrap_or(docket_store::DbErrorKind::Unavailable),
                            message: e.to_string(),
                        }));
                    }
                }
            }
        }
    }
}

/// The engine's group commits of durable runs.
#[derive(Debug)]
pub(crate) struct Batches {
    reports: Arc<GroupCommit<RunReport, RunReported>>,
    starts: Arc<GroupCommit<RunStartParams, (WorkflowRun, bool)>>,
}

impl Default for Batches {
    fn default() -> Self {
        Batches {
            reports: Arc::new(GroupCommit::new(|store, items| {
                Box::pin(async move { store.run_report_many(items).await })
            })),
            starts: Arc::new(GroupCommit::new(|store, items| {
                Box::pin(async move { store.run_start_many(items).await })
            })),
        }
    }
}

impl Engine {
    /// Writes a worker's report with the others queued (see [`GroupCommit`]).
    async fn report(
        &self,
        record: RunRecordParams,
        finish: Option<Result<serde_json::Value, String>>,
    ) -> Result<RunReported, EngineError> {
        let r = RunReport { record, finish };
        self.run_batches.reports.call(&self.store, r).await
    }

    /// Starts a run of `r.workflow` (idempotent by `r.id`: the run of that id is answered,
    /// `created: false`).
    ///
    /// # Errors
    /// [`EngineError::Invalid`] for a bad request; [`EngineError::Conflict`] when the id is a
    /// run of another workflow; store errors.
    pub async fn run_start(&self, r: StartRequest) -> Result<Started, EngineError> {
        r.check().map_err(EngineError::Invalid)?;
        let now = self.clock.now();
        let id =
            r.id.clone()
                .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        let run = self
            .new_run(
                id,
                r.workflow.clone(),
                r.input,
                None,
                r.queue,
                r.priority,
                r.max_attempts,
                r.timeout,
                now,
            )
            .await?;
        let (run, created) = self
            .run_batches
            .starts
            .call(&self.store, RunStartParams { run, now })
            .await?;
        if !created && run.workflow != r.workflow {
            return Err(EngineError::Conflict(format!(
                "workflow run {} is a run of {}, not {}",
                run.id, run.workflow, r.workflow
            )));
        }
        if created {
            metrics::record_run_started(&run.workflow);
            self.waker.wake(&run.queue);
        }
        Ok(Started { run, created })
    }

    /// A run to insert: its row and its task, resolved as any task (queue settings,
    /// defaults, kind hooks).
    #[allow(clippy::too_many_arguments)]
    async fn new_run(
        &self,
        id: String,
        workflow: String,
        input: serde_json::Value,
        parent_id: Option<String>,
        queue: Option<String>,
        priority: Option<i32>,
        max_attempts: Option<i32>,
        timeout: Option<Duration>,
        now: docket_core::Timestamp,
    ) -> Result<NewRun, EngineError> {
        let mut t = NewTask::new(workflow.clone(), durable::task_payload(&id, &input));
        t.queue = Some(queue.unwrap_or_else(|| durable::DEFAULT_QUEUE.to_string()));
        t.priority = priority;
        t.max_attempts = Some(max_attempts.unwrap_or(durable::DEFAULT_MAX_ATTEMPTS));
        t.timeout = Some(timeout.unwrap_or(durable::DEFAULT_TIMEOUT));
        let task = self
            .resolve_all(vec![t], now)
            .await
            .map_err(|e| match e {
                EngineError::InvalidTask { message, .. } => EngineError::Invalid(message),
                other => other,
            })?
            .remove(0);
        Ok(NewRun {
            id,
            workflow,
            input,
            parent_id,
            task,
        })
    }

    /// The children the `child` entries of `entries` start, resolved.
    async fn children(
        &self,
        parent: &str,
        entries: &[NewEntry],
        now: docket_core::Timestamp,
    ) -> Result<Vec<(i64, NewRun)>, EngineError> {
        let mut out = vec![];
        // A child runs in its parent's queue unless its entry names one.
        let mut parent_queue: Option<String> = None;
        for e in entries.iter().filter(|e| e.kind == EntryKind::Child) {
            let mut c = e.child.clone().unwrap_or_default();
            if c.queue.is_none() {
                if parent_queue.is_none() {
                    parent_queue = self.store.run_get(parent).await?.map(|r| r.queue);
                }
                c.queue = parent_queue.clone();
            }
            let id = c.id.unwrap_or_else(|| durable::child_id(parent, e.seq));
            let run = self
                .new_run(
                    id,
                    e.name.clone(),
                    c.input,
                    Some(parent.to_string()),
                    c.queue,
                    None,
                    None,
                    None,
                    now,
                )
                .await?;
            out.push((e.seq, run));
        }
        Ok(out)
    }

    async fn record_params(
        &self,
        id: &str,
        lease: String,
        entries: Vec<NewEntry>,
    ) -> Result<RunRecordParams, EngineError> {
        durable::check_entries(&entries).map_err(EngineError::Invalid)?;
        check_id(id)?;
        let now = self.clock.now();
        let children = self.children(id, &entries, now).await?;
        Ok(RunRecordParams {
            lease: RunLease {
                id: id.to_string(),
                token: lease,
                now,
                fail_rule: self.config.fail_rule,
            },
            entries,
            children,
        })
    }

    /// Records journal entries of run `id` under its task's lease (`POST
    /// /v1/workflow-runs/{id}/steps`); answers how many were written.
    ///
    /// # Errors
    /// [`EngineError::Invalid`]; [`EngineError::NotFound`]; [`EngineError::LeaseLost`],
    /// [`EngineError::Cancelled`], [`EngineError::TimedOut`] when the lease does not hold;
    /// [`EngineError::Nondeterministic`]; [`EngineError::Conflict`] (a child's id taken);
    /// store errors.
    pub async fn run_record(&self, id: &str, r: StepsRequest) -> Result<usize, EngineError> {
        let p = self.record_params(id, r.lease, r.steps).await?;
        let steps = p
            .entries
            .iter()
            .filter(|e| e.kind == EntryKind::Step)
            .count();
        let n = match self.report(p, None).await? {
            RunReported::Recorded(n) => n,
            RunReported::Finished(_) => 0,
        };
        metrics::record_run_steps(steps);
        Ok(n)
    }

    /// Records entries, then sleeps or waits (`POST /v1/workflow-runs/{id}/suspend`): see
    /// `docket_store::RunStore::run_suspend`.
    ///
    /// # Errors
    /// As [`Engine::run_record`].
    pub async fn run_suspend(&self, id: &str, r: SuspendRequest) -> Result<Suspended, EngineError> {
        r.wait.check().map_err(EngineError::Invalid)?;
        let record = self.record_params(id, r.lease, r.steps).await?;
        let out = self
            .store
            .run_suspend(RunSuspendParams {
                record,
                wait: r.wait,
            })
            .await?;
        if out.outcome == durable::SuspendOutcome::Suspended {
            self.waker.changed();
        }
        Ok(out)
    }

    /// Records entries, then ends the run and its task (`POST /v1/workflow-runs/{id}/finish`).
    ///
    /// # Errors
    /// As [`Engine::run_record`].
    pub async fn run_finish(&self, id: &str, r: FinishRequest) -> Result<WorkflowRun, EngineError> {
        r.check().map_err(EngineError::Invalid)?;
        let outcome = match r.error {
            Some(e) => Err(e),
            None => Ok(r.result.unwrap_or(serde_json::Value::Null)),
        };
        let record = self.record_params(id, r.lease, r.steps).await?;
        let run = match self.report(record, Some(outcome)).await? {
            RunReported::Finished(run) => *run,
            RunReported::Recorded(_) => {
                return Err(EngineError::NotFound(format!("workflow run {id}")))
            }
        };
        metrics::record_run_finished(&run.workflow, run.state.as_str());
        self.waker.changed();
        Ok(run)
    }

    /// A worker resumes run `id` (`POST /v1/workflow-runs/{id}/resume`): its journal.
    ///
    /// # Errors
    /// As [`Engine::run_record`].
    pub async fn run_resume(&self, id: &str, lease: String) -> Result<Resumed, EngineError> {
        check_id(id)?;
        Ok(self
            .store
            .run_resume(RunLease {
                id: id.to_string(),
                token: lease,
                now: self.clock.now(),
                fail_rule: self.config.fail_rule,
            })
            .await?)
    }

    /// Sends an event to run `id` (`POST /v1/workflow-runs/{id}/events`).
    ///
    /// # Errors
    /// [`EngineError::Invalid`]; [`EngineError::NotFound`]; [`EngineError::InvalidState`] for a
    /// finished run; store errors.
    pub async fn run_send(&self, id: &str, r: EventRequest) -> Result<EventSent, EngineError> {
        check_id(id)?;
        r.check().map_err(EngineError::Invalid)?;
        let sent = self
            .store
            .run_send(RunSendParams {
                id: id.to_string(),
                name: r.name,
                payload: r.payload,
                now: self.clock.now(),
            })
            .await?;
        Ok(sent)
    }

    /// Cancels run `id`, its task (a running one is asked to stop: its next call under the
    /// lease is refused) and its unfinished children, depth first.
    ///
    /// # Errors
    /// [`EngineError::NotFound`]; store errors.
    pub async fn run_cancel(&self, id: &str) -> Result<WorkflowRun, EngineError> {
        check_id(id)?;
        let mut todo = vec![id.to_string()];
        let mut first = None;
        // Each run once, however its children point (ids are unique; a loop cannot form, but
        // a bound keeps a bad row from spinning).
        let mut seen = std::collections::HashSet::new();
        while let Some(next) = todo.pop() {
            if !seen.insert(next.clone()) || seen.len() > 100_000 {
                continue;
            }
            let now = self.clock.now();
            let c = self.store.run_cancel(&next, now).await?;
            if c.cancelled {
                match self
                    .store
                    .task_cancel(docket_store::TaskCancelParams {
                        id: c.run.task_id,
                        now,
                    })
                    .await
                {
                    // Finished (a finish that raced), pruned: the run's state is what counts.
                    Ok(_)
                    | Err(docket_store::StoreError::InvalidState(_))
                    | Err(docket_store::StoreError::NotFound(_)) => {}
                    Err(e) => return Err(e.into()),
                }
                metrics::record_run_finished(&c.run.workflow, c.run.state.as_str());
            }
            todo.extend(c.children);
            first.get_or_insert(c.run);
        }
        self.waker.changed();
        first.ok_or_else(|| EngineError::NotFound(format!("workflow run {id}")))
    }

    /// Runs a failed or cancelled run again: its task is retried, and the worker that claims
    /// it replays the journal.
    ///
    /// # Errors
    /// [`EngineError::NotFound`]; [`EngineError::InvalidState`] for a run that is not failed
    /// or cancelled; store errors.
    pub async fn run_retry(&self, id: &str) -> Result<WorkflowRun, EngineError> {
        check_id(id)?;
        let now = self.clock.now();
        let run = self.store.run_reopen(id, now).await?;
        match self
            .store
            .task_retry(docket_store::TaskRetryParams {
                id: run.task_id,
                now,
            })
            .await
        {
            Ok(t) => self.waker.wake(&t.queue),
            // Still running (a cancel asked it to stop and it has not yet): the rescue or
            // its worker ends that attempt, and the task's retries replay the run.
            Err(docket_store::StoreError::InvalidState(_)) => {}
            Err(e) => return Err(e.into()),
        }
        Ok(run)
    }

    /// One run.
    ///
    /// # Errors
    /// Store errors.
    pub async fn run_get(&self, id: &str) -> Result<Option<WorkflowRun>, EngineError> {
        check_id(id)?;
        Ok(self.store.run_get(id).await?)
    }

    /// A run's journal.
    ///
    /// # Errors
    /// Store errors.
    pub async fn run_entries(&self, id: &str) -> Result<Vec<Entry>, EngineError> {
        check_id(id)?;
        Ok(self.store.run_entries(id).await?)
    }

    /// Runs, newest first.
    ///
    /// # Errors
    /// [`EngineError::Invalid`] for a bad filter; store errors.
    pub async fn run_list(&self, p: RunListParams) -> Result<Vec<WorkflowRun>, EngineError> {
        p.check().map_err(EngineError::Invalid)?;
        Ok(self.store.run_list(p).await?)
    }

    /// Run `id` once it has finished or `wait` (at most [`durable::MAX_RESULT_WAIT`]) has
    /// passed, whichever comes first; `None` for no such run.
    ///
    /// # Errors
    /// Store errors.
    pub async fn run_result(
        &self,
        id: &str,
        wait: Duration,
    ) -> Result<Option<WorkflowRun>, EngineError> {
        check_id(id)?;
        let end = tokio::time::Instant::now() + wait.min(durable::MAX_RESULT_WAIT);
        loop {
            let run = self.store.run_get(id).await?;
            match &run {
                Some(r) if !r.state.is_finished() && tokio::time::Instant::now() < end => {
                    tokio::time::sleep(RESULT_POLL).await;
                }
                _ => return Ok(run),
            }
        }
    }
}

fn check_id(id: &str) -> Result<(), EngineError> {
    durable::check_id("id", id).map_err(EngineError::Invalid)
}
