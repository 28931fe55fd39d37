//! In-process workers (docket as a library): handlers registered by task kind run claimed tasks;
//! outcomes go to one completer that writes them in batches (one statement per batch), which is
//! what makes high throughput possible.

use crate::{Claim, Engine};
use async_trait::async_trait;
use docket_core::Task;
use docket_store::{TaskComplete, TaskFail};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, Semaphore};
use tokio_util::sync::CancellationToken;

/// What a handler decides about its task (apart from infrastructure errors).
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Done; store this result.
    Complete(Value),
    /// Failed; retry after the backoff, or after `retry_in` when given.
    Retry {
        /// Error message kept in the task's errors.
        error: String,
        /// Explicit retry delay.
        retry_in: Option<Duration>,
    },
    /// Failed for good: discard without further attempts.
    Discard(String),
    /// The handler already ended its attempt through the engine (a durable function's run
    /// finishes, suspends or stops under its lease): nothing more is written.
    Reported,
}

/// A task handler.
#[async_trait]
pub trait Handler: Send + Sync {
    /// Runs one attempt of `task`.
    async fn run(&self, task: &Task) -> Outcome;
}

/// Configuration of a [`WorkerPool`].
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Queue to work.
    pub queue: String,
    /// Tasks run at once.
    pub concurrency: usize,
    /// Tasks claimed ahead into a local buffer (graphile-worker's localQueue): a claim fetches
    /// up to this many at once, so one statement feeds many executions. Buffered tasks hold
    /// their lease; one whose lease ran low while waiting is heartbeated before it starts.
    /// Default: the concurrency (at most 2 × concurrency tasks held).
    pub prefetch: usize,
    /// Claims in flight at once (more than one overlaps one claim's commit with the next).
    pub fetchers: usize,
    /// Most outcomes written per statement.
    pub complete_batch: usize,
    /// Completion batches written at once (overlaps commits the same way).
    pub completers: usize,
    /// Worker name recorded on tasks.
    pub worker: String,
    /// How long claimed tasks may finish after shutdown starts; unfinished ones are rescued
    /// by their lease expiring (nothing is lost).
    pub grace: Duration,
    /// Durable functions ([`WorkerPool::workflow`]): record each step before `ctx.step`
    /// returns, instead of with the run's next call to the engine (one write more per step;
    /// the clients' `eager_steps`). Default false.
    pub eager_steps: bool,
    /// The lease of claimed tasks, kept by heartbeats while they run: how soon the task of a
    /// worker that died is rescued. `None`: the task's timeout — or 30 s in a pool with
    /// workflows registered ([`WorkerPool::workflow`]: a run's task has a 1 h timeout, and a
    /// dead worker's run should not wait that long; the clients' workers do the same).
    pub lease: Option<Duration>,
    /// The pool's labels on every claim (issue 43, `docket_core::labels`): tasks that require
    /// or prefer them come here [none].
    pub labels: docket_core::labels::Labels,
}

impl WorkerConfig {
    /// Defaults for `queue`: concurrency 10, prefetch 10, completion batches of 1000.
    pub fn new(queue: impl Into<String>) -> Self {
        WorkerConfig {
            queue: queue.into(),
            concurrency: 10,
            prefetch: 10,
            fetchers: 1,
            complete_batch: 1000,
            completers: 2,
            worker: format!("inproc-{}", std::process::id()),
            grace: Duration::from_secs(30),
            eager_steps: false,
            lease: None,
            labels: docket_core::labels::Labels::new(),
        }
    }
}

/// Runs handlers for one queue.
pub struct WorkerPool {
    pub(crate) engine: Engine,
    pub(crate) config: WorkerConfig,
    handlers: HashMap<String, Arc<dyn Handler>>,
    /// Durable functions are registered ([`WorkerPool::workflow`]): the default lease is
    /// [`WORKFLOW_LEASE`].
    pub(crate) workflows: bool,
}

/// The lease a pool with workflows claims with when [`WorkerConfig::lease`] is `None`.
pub const WORKFLOW_LEASE: Duration = Duration::from_secs(30);

struct Done {
    task: Task,
    outcome: Outcome,
}

impl WorkerPool {
    /// A pool with no handlers yet.
    pub fn new(engine: Engine, config: WorkerConfig) -> Self {
        WorkerPool {
            engine,
            config,
            handlers: HashMap::new(),
            workflows: false,
        }
    }

    /// Registers `handler` for tasks of `kind`. The pool claims only the kinds it has handlers
    /// for; a task of another kind waits for a worker that handles it.
    pub fn register(mut self, kind: impl Into<String>, handler: Arc<dyn Handler>) -> Self {
        self.handlers.insert(kind.into(), handler);
        self
    }

    /// Works until `cancel`, then stops claiming, runs what it already claimed within the
    /// grace period and writes every outcome before returning.
    pub async fn run(self, cancel: CancellationToken) {
        let mut cfg = self.config.clone();
        if self.workflows && cfg.lease.is_none() {
            cfg.lease = Some(WORKFLOW_LEASE);
        }
        let (done_tx, done_rx) = mpsc::channel::<Done>(cfg.complete_batch * 4);
        let completer = tokio::spawn(complete_loop(
            self.engine.clone(),
            done_rx,
            cfg.complete_batch,
            cfg.completers.max(1),
        ));
        let (buf_tx, mut buf_rx) = mpsc::channel::<Task>(cfg.prefetch.max(1));
        let mut kinds: Vec<String> = self.handlers.keys().cloned().collect();
        kinds.sort();
        let kinds = Arc::new(kinds);
        let fetchers: Vec<_> = (0..cfg.fetchers.max(1))
            .map(|_| {
                tokio::spawn(fetch_loop(
                    self.engine.clone(),
                    cfg.clone(),
                    kinds.clone(),
                    buf_tx.clone(),
                    cancel.clone(),
                ))
            })
            .collect();
        drop(buf_tx);
        let sem = Arc::new(Semaphore::new(cfg.concurrency.max(1)));
        let handlers = Arc::new(self.handlers);
        let mut running = tokio::task::JoinSet::new();
        let work = async {
            // Ends when the fetcher stops (cancel) and the buffer is drained.
            while let Some(task) = buf_rx.recv().await {
                let permit = sem.clone().acquire_owned().await.expect("semaphore open");
                self.engine.mark(crate::probe::Step::Dispatched, task.id);
                let handler = handlers.get(&task.kind).cloned();
                let tx = done_tx.clone();
                let engine = self.engine.clone();
                let span = docket_core::trace::task_span(&task);
                running.spawn(tracing::Instrument::instrument(
                    async move {
                        if let Some(task) = freshen_lease(&engine, task).await {
                            let outcome = match handler {
                                Some(h) => run_with_heartbeat(&engine, &*h, &task).await,
                                // Not claimed any more (claims name the handled kinds); if
                                // it happens, the task is tried again, never thrown away.
                                None => Outcome::Retry {
                                    error: format!("no handler for kind {:?}", task.kind),
                                    retry_in: None,
                                },
                            };
                            if let Outcome::Retry { error, .. } | Outcome::Discard(error) = &outcome
                            {
                                tracing::info!(%error, "attempt failed");
                            }
                            let _ = tx.send(Done { task, outcome }).await;
                        }
                        drop(permit);
                    },
                    span,
                ));
                while running.try_join_next().is_some() {}
            }
            while running.join_next().await.is_some() {}
        };
        tokio::select! {
            _ = work => {}
            _ = async { cancel.cancelled().await; tokio::time::sleep(cfg.grace).await } => {
                tracing::warn!(
                    left = running.len(),
                    "grace period over; unfinished tasks will be rescued when their leases expire"
                );
                running.abort_all();
            }
        }
        for f in fetchers {
            let _ = f.await;
        }
        drop(done_tx);
        let _ = completer.await;
    }
}

/// Claims into the local buffer whenever it has room, as many as fit in one statement.
async fn fetch_loop(
    engine: Engine,
    cfg: WorkerConfig,
    kinds: Arc<Vec<String>>,
    buf: mpsc::Sender<Task>,
    cancel: CancellationToken,
) {
    while !cancel.is_cancelled() {
        // Wait for room for at least one task, then fill all the room there is.
        let permit = tokio::select! {
            p = buf.reserve() => match p { Ok(p) => p, Err(_) => return },
            _ = cancel.cancelled() => return,
        };
        drop(permit);
        let room = buf.capacity().max(1);
        let tasks = match engine
            .claim(
                &Claim::new(&cfg.queue, &cfg.worker, room as i64)
                    .kinds(kinds.iter().cloned())
                    .labels(cfg.labels.clone())
                    .lease(cfg.lease)
                    .wait(Duration::from_secs(5)),
                &cancel,
            )
            .await
        {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(error = %e, "claim failed; retrying in 1s");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        for t in tasks {
            if buf.send(t).await.is_err() {
                return;
            }
        }
    }
}

/// A task that waited in the buffer may have used up much of its lease: extend it before
/// starting, or drop the task when the lease is already gone (it was or will be rescued).
async fn freshen_lease(engine: &Engine, task: Task) -> Option<Task> {
    let lease = task.lease.clone()?;
    let left = lease.expires_at - engine.clock.now();
    let total = task
        .lease_expires_at
        .zip(task.attempted_at)
        .map(|(e, a)| e - a)
        .unwrap_or(left);
    if left * 2 >= total {
        return Some(task);
    }
    match engine
        .heartbeat(task.id, lease.token.clone(), None, None)
        .await
    {
        Ok(fresh) => Some(Task {
            lease: Some(docket_core::Lease {
                token: lease.token,
                expires_at: fresh.lease_expires_at.unwrap_or(lease.expires_at),
                trace_id: lease.trace_id,
            }),
            ..task
        }),
        Err(e) => {
            tracing::warn!(task = task.id, error = %e, "lease lost while buffered; not starting it");
            None
        }
    }
}

/// How long past its deadline an in-process handler runs before it is cancelled.
pub const HANDLER_TIMEOUT_GRACE: Duration = Duration::from_secs(1);

/// The text of a panic's payload (`panic!("…")` gives a `&str` or a `String`).
pub fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

/// Runs the handler under its attempt timeout (`attempted_at + timeout`), heartbeating the
/// lease meanwhile. A handler that panics fails the attempt at once with `panic: <message>`
/// instead of leaving the task running until its lease expires; one that outlives the
/// timeout is dropped (its future cancelled) and the attempt fails with `timeout`.
async fn run_with_heartbeat(engine: &Engine, h: &dyn Handler, task: &Task) -> Outcome {
    use futures::FutureExt;
    let lease = task.lease.clone().expect("claimed task has a lease");
    let now = engine.clock.now();
    let ttl = docket_core::time::since(lease.expires_at, now).max(Duration::from_secs(1));
    let every = docket_core::lease::heartbeat_every(ttl);
    // A handler that enforces the timeout itself (a `sql` task's statement timeout) gets a
    // moment to report its own error first; its failure is still accepted past the deadline.
    let deadline = docket_core::lease::deadline(task);
    let timeout = async {
        match deadline {
            Some(d) => {
                tokio::time::sleep(docket_core::time::since(d, now) + HANDLER_TIMEOUT_GRACE).await
            }
            // A process step: its step timeout is the process engine's.
            None => std::future::pending().await,
        }
    };
    tokio::pin!(timeout);
    let work = std::panic::AssertUnwindSafe(h.run(task)).catch_unwind();
    tokio::pin!(work);
    loop {
        tokio::select! {
            out = &mut work => return match out {
                Ok(o) => o,
                Err(p) => {
                    let error = format!("panic: {}", panic_message(&*p));
                    tracing::error!(%error, "handler panicked");
                    Outcome::Retry { error, retry_in: None }
                }
            },
            _ = &mut timeout => {
                tracing::warn!(timeout = ?task.timeout, "attempt timed out; handler cancelled");
                return Outcome::Retry { error: "timeout".into(), retry_in: None };
            },
            _ = tokio::time::sleep(every) => {
                let r = engine.heartbeat(task.id, lease.token.clone(), None, None).await;
                if let Err(e) = r {
                    tracing::warn!(task = task.id, error = %e, "heartbeat refused; abandoning the attempt");
                    return Outcome::Retry { error: e.to_string(), retry_in: None };
                }
            }
        }
    }
}

async fn complete_loop(
    engine: Engine,
    mut rx: mpsc::Receiver<Done>,
    batch: usize,
    parallel: usize,
) {
    let slots = Arc::new(Semaphore::new(parallel));
    let mut flushes = tokio::task::JoinSet::new();
    loop {
        let mut buf = Vec::with_capacity(batch);
        if rx.recv_many(&mut buf, batch).await == 0 {
            break;
        }
        let slot = slots.clone().acquire_owned().await.expect("semaphore open");
        // Whatever arrived while we waited for a slot goes into the same batch.
        while buf.len() < batch {
            match rx.try_recv() {
                Ok(d) => buf.push(d),
                Err(_) => break,
            }
        }
        let engine = engine.clone();
        flushes.spawn(async move {
            flush(&engine, buf).await;
            drop(slot);
        });
        while flushes.try_join_next().is_some() {}
    }
    while flushes.join_next().await.is_some() {}
}

async fn flush(engine: &Engine, buf: Vec<Done>) {
    let mut completes = vec![];
    let mut fails = vec![];
    for d in buf {
        let token = d
            .task
            .lease
            .as_ref()
            .map(|l| l.token.clone())
            .unwrap_or_default();
        match d.outcome {
            Outcome::Complete(result) => completes.push(TaskComplete {
                id: d.task.id,
                token,
                result,
                next: None,
            }),
            Outcome::Retry { error, retry_in } => fails.push(TaskFail {
                id: d.task.id,
                token,
                error,
                retry_in,
                permanent: false,
            }),
            Outcome::Discard(error) => fails.push(TaskFail {
                id: d.task.id,
                token,
                error,
                retry_in: None,
                permanent: true,
            }),
            Outcome::Reported => {}
        }
    }
    // An error here leaves the tasks running; their leases expire and the rescuer retries
    // them: at-least-once, never lost.
    if let Err(e) = engine.complete_many(&completes).await {
        tracing::error!(error = %e, n = completes.len(), "writing completions failed");
    }
    if let Err(e) = engine.fail_many(&fails, None).await {
        tracing::error!(error = %e, n = fails.len(), "writing failures failed");
    }
}
