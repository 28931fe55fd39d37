//! In-process workers (docket as a library): handlers registered by task kind run claimed tasks;
//! outcomes go to one completer that writes them in batches (one statement per batch), which is
//! what makes high throughput possible.

use crate::Engine;
use async_trait::async_trait;
use docket_core::Task;
use docket_store::{TaskComplete, TaskFail, TaskHeartbeatParams};
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
    /// Most tasks claimed per statement.
    pub fetch_batch: usize,
    /// Most outcomes written per statement.
    pub complete_batch: usize,
    /// Worker name recorded on tasks.
    pub worker: String,
    /// How long running tasks may finish after shutdown starts; unfinished ones are rescued
    /// by their lease expiring (nothing is lost).
    pub grace: Duration,
}

impl WorkerConfig {
    /// Defaults for `queue`: concurrency 10, fetch and complete batches of 500.
    pub fn new(queue: impl Into<String>) -> Self {
        WorkerConfig {
            queue: queue.into(),
            concurrency: 10,
            fetch_batch: 500,
            complete_batch: 500,
            worker: format!("inproc-{}", std::process::id()),
            grace: Duration::from_secs(30),
        }
    }
}

/// Runs handlers for one queue.
pub struct WorkerPool {
    engine: Engine,
    config: WorkerConfig,
    handlers: HashMap<String, Arc<dyn Handler>>,
}

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
        }
    }

    /// Registers `handler` for tasks of `kind`. Tasks of unknown kinds fail permanently.
    pub fn register(mut self, kind: impl Into<String>, handler: Arc<dyn Handler>) -> Self {
        self.handlers.insert(kind.into(), handler);
        self
    }

    /// Works until `cancel`, then stops claiming, lets running tasks finish within the grace
    /// period and writes every outcome before returning.
    pub async fn run(self, cancel: CancellationToken) {
        let cfg = self.config.clone();
        let (tx, rx) = mpsc::channel::<Done>(cfg.complete_batch * 4);
        let completer = tokio::spawn(complete_loop(self.engine.clone(), rx, cfg.complete_batch));
        let sem = Arc::new(Semaphore::new(cfg.concurrency));
        let handlers = Arc::new(self.handlers);
        let mut running = tokio::task::JoinSet::new();
        while !cancel.is_cancelled() {
            // Wait for at least one free slot, then claim as many as there are free slots.
            let first = tokio::select! {
                p = sem.clone().acquire_owned() => p.expect("semaphore open"),
                _ = cancel.cancelled() => break,
            };
            let free = (sem.available_permits() + 1).min(cfg.fetch_batch);
            let tasks = match self
                .engine
                .claim(
                    &cfg.queue,
                    &cfg.worker,
                    free as i64,
                    None,
                    Duration::from_secs(5),
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
            let mut first = Some(first);
            for task in tasks {
                let permit = match first.take() {
                    Some(p) => p,
                    None => sem.clone().acquire_owned().await.expect("semaphore open"),
                };
                let handler = handlers.get(&task.kind).cloned();
                let tx = tx.clone();
                let engine = self.engine.clone();
                running.spawn(async move {
                    let outcome = match handler {
                        Some(h) => run_with_heartbeat(&engine, &*h, &task).await,
                        None => Outcome::Discard(format!("no handler for kind {:?}", task.kind)),
                    };
                    let _ = tx.send(Done { task, outcome }).await;
                    drop(permit);
                });
            }
            // Reap finished tasks so the set does not grow.
            while running.try_join_next().is_some() {}
        }
        let drained = tokio::time::timeout(cfg.grace, async {
            while running.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                left = running.len(),
                "grace period over; unfinished tasks will be rescued when their leases expire"
            );
            running.abort_all();
        }
        drop(tx);
        let _ = completer.await;
    }
}

async fn run_with_heartbeat(engine: &Engine, h: &dyn Handler, task: &Task) -> Outcome {
    let lease = task.lease.clone().expect("claimed task has a lease");
    let ttl = (lease.expires_at - engine.clock.now())
        .to_std()
        .unwrap_or(Duration::from_secs(1));
    let every = (ttl / 2).max(Duration::from_millis(50));
    let work = h.run(task);
    tokio::pin!(work);
    loop {
        tokio::select! {
            out = &mut work => return out,
            _ = tokio::time::sleep(every) => {
                let r = engine.store.task_heartbeat(TaskHeartbeatParams {
                    id: task.id,
                    token: lease.token.clone(),
                    progress: None,
                    lease: None,
                    now: engine.clock.now(),
                }).await;
                if let Err(e) = r {
                    tracing::warn!(task = task.id, error = %e, "heartbeat refused; abandoning the attempt");
                    return Outcome::Retry { error: e.to_string(), retry_in: None };
                }
            }
        }
    }
}

async fn complete_loop(engine: Engine, mut rx: mpsc::Receiver<Done>, batch: usize) {
    let mut buf = Vec::with_capacity(batch);
    while rx.recv_many(&mut buf, batch).await > 0 {
        let now = engine.clock.now();
        let mut completes = vec![];
        let mut fails = vec![];
        for d in buf.drain(..) {
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
            }
        }
        // An error here leaves the tasks running; their leases expire and the rescuer retries
        // them: at-least-once, never lost.
        if let Err(e) = engine.store.task_complete_many(&completes, now).await {
            tracing::error!(error = %e, n = completes.len(), "writing completions failed");
        }
        if let Err(e) = engine.store.task_fail_many(&fails, None, now).await {
            tracing::error!(error = %e, n = fails.len(), "writing failures failed");
        }
        if !fails.is_empty() {
            engine.waker.wake_scheduler();
        }
    }
}
