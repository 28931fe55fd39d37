//! docket's runtime on top of a [`docket_store::Store`]:
//! - [`Engine`]: enqueue (defaults resolved from queue settings), claim with a long-poll wait that
//!   wakes on LISTEN/NOTIFY (PostgreSQL) or local inserts, polling as the fallback;
//! - [`maintenance`]: the services every node runs — promote due tasks, rescue expired leases,
//!   discard expired tasks, prune by retention, node heartbeat. Every node runs them; all are
//!   safe to run concurrently (SKIP LOCKED batches), so there is no leader;
//! - [`worker`]: in-process handlers (docket as a library) with batched completion.

pub mod actions;
pub mod auth;
pub mod batches;
pub mod bulk;
mod claims;
mod database;
pub mod durable;
pub mod durable_fn;
mod error;
pub mod kinds;
pub mod maintenance;
pub mod metrics;
pub mod panels;
pub mod peers;
pub mod probe;
pub mod process;
pub mod rate_limits;
mod reads;
pub mod schedule;
pub mod sink;
pub mod waker;
pub mod worker;
pub mod workflows;

use docket_core::{Clock, NewTask, Task, TaskDefaults};
use docket_store::{Release, Store, TaskClaimParams, TaskInsertManyParams, TaskReleaseParams};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub use claims::Claim;
pub use database::{Database, DatabaseOptions};
pub use error::EngineError;
pub use waker::Waker;

/// Engine configuration. Durations in the units their names say.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// This node's name (node affinity, node registry).
    pub node: String,
    /// Defaults under the queue settings.
    pub defaults: TaskDefaults,
    /// Longest wait between looks at the database when nothing wakes us (PostgreSQL: the
    /// fallback behind LISTEN/NOTIFY; SQLite: the only way to see other processes' inserts).
    pub poll_interval: Duration,
    /// How often expired leases and expired tasks are looked for.
    pub rescue_interval: Duration,
    /// How often the pruner runs.
    pub prune_interval: Duration,
    /// Rows per statement of the promote, rescue, expire and zombie jobs: one small batch
    /// holds few locks, and a job goes on batch after batch until it finds less [1000].
    pub maintenance_batch: i64,
    /// The shortest time between turns of the ring of task slots (PostgreSQL, migration 0021;
    /// see `rotate_min_fill_bytes` for when a turn waits longer): each turn empties
    /// the slot filled four turns ago by TRUNCATE, so dead tuples live about 4 × this long even
    /// while a snapshot is held open [1 s]. On MySQL/MariaDB (migration 0004) the same job
    /// moves finished tasks from `docket_tasks` to `docket_tasks_done` this often.
    pub rotate_interval: Duration,
    /// PostgreSQL's ring turns before `rotate_idle_interval` only once the slot being filled
    /// holds this many bytes [8 MiB: under a stream of 50,000 tasks/s about every second, as
    /// `rotate_interval` allows]: a turn pauses claims for a moment (its lock, TRUNCATE and
    /// commit), which turning every second made the pickup tail (issue 40).
    pub rotate_min_fill_bytes: i64,
    /// A ring filling slower than that turns once this long after the last turn [60 s].
    pub rotate_idle_interval: Duration,
    /// Longest wait for the lock a turn needs on the slot it empties; claims queue behind the
    /// waiting lock, so this bounds the pause a turn can cause [100 ms].
    pub rotate_lock_timeout: Duration,
    /// Rows per pruning batch (small, so pruning never stalls claiming).
    pub prune_batch: i64,
    /// Node heartbeat period; a node silent for 3 periods is shown as `lost`.
    pub heartbeat_interval: Duration,
    /// Default retention of completed tasks.
    pub retention_completed: Duration,
    /// Default retention of discarded/cancelled tasks.
    pub retention_failed: Duration,
    /// Delivered process notifications are deleted after this [7 days].
    pub retention_notifications: Duration,
    /// Audit entries are deleted after this [90 days].
    pub retention_audit: Duration,
    /// Stopped or lost nodes leave `GET /v1/nodes` after this [7 days].
    pub retention_nodes: Duration,
    /// How a failed attempt ends — retried after its backoff or discarded — decided here and
    /// handed to the store with every call that can fail an attempt
    /// [`docket_core::task::standard_fail_rule`].
    pub fail_rule: docket_core::task::FailRule,
    /// `/healthz` answers 503 when the maintenance loop has not finished a pass for this long
    /// (it is stuck: a hung database call, or a panic it could not survive) [120 s].
    pub maintenance_stall_after: Duration,
    /// Where this node receives wake-ups from the others (UDP; see [`peers`]); None: it does
    /// not take part. Default: `127.0.0.1:0` (nodes on one machine) on the databases that
    /// cannot notify (SQLite, MySQL/MariaDB), None on PostgreSQL (LISTEN/NOTIFY does it).
    pub peer_wake: Option<std::net::SocketAddr>,
    /// The address the other nodes send to, when it is not the bound one (a wildcard bind, NAT).
    pub peer_wake_advertise: Option<std::net::SocketAddr>,
}

impl EngineConfig {
    /// Defaults for node `node` on `backend` (see [`Database::backend`]).
    pub fn new(node: impl Into<String>, backend: docket_core::api::Backend) -> Self {
        EngineConfig {
            node: node.into(),
            defaults: TaskDefaults::default(),
            poll_interval: if backend.listens() {
                Duration::from_secs(1)
            } else {
                Duration::from_millis(200)
            },
            rescue_interval: Duration::from_secs(1),
            prune_interval: Duration::from_secs(60),
            maintenance_batch: 1000,
            rotate_interval: Duration::from_secs(1),
            rotate_min_fill_bytes: 8 << 20,
            rotate_idle_interval: Duration::from_secs(60),
            rotate_lock_timeout: Duration::from_millis(100),
            prune_batch: 1000,
            heartbeat_interval: Duration::from_secs(5),
            retention_completed: docket_core::queue::DEFAULT_RETENTION_COMPLETED,
            retention_failed: docket_core::queue::DEFAULT_RETENTION_FAILED,
            maintenance_stall_after: Duration::from_secs(120),
            retention_notifications: Duration::from_secs(7 * 86_400),
            retention_audit: Duration::from_secs(90 * 86_400),
            retention_nodes: Duration::from_secs(7 * 86_400),
            fail_rule: docket_core::task::standard_fail_rule,
            peer_wake: (!backend.listens()).then(|| ([127, 0, 0, 1], 0).into()),
            peer_wake_advertise: None,
        }
    }
}

/// The engine: shared by the HTTP API, the maintenance services and in-process workers.
#[derive(Debug, Clone)]
pub struct Engine {
    /// The store: only the engine talks to it (the edges go through `Engine`'s methods).
    pub(crate) store: Arc<dyn Store>,
    /// The clock.
    pub clock: Arc<dyn Clock>,
    /// Configuration.
    pub config: Arc<EngineConfig>,
    /// Wake-ups for claimers and the scheduler.
    pub waker: Arc<Waker>,
    /// When the maintenance loop last finished a pass (None: it never ran on this engine).
    last_pass: Arc<std::sync::Mutex<Option<std::time::Instant>>>,
    /// Rules of particular task kinds (see [`kinds`]).
    kinds: kinds::KindHooks,
    /// This node is drained: it claims nothing (set by a drain through this node at once, by
    /// the heartbeat job from the node registry otherwise).
    draining: Arc<std::sync::atomic::AtomicBool>,
    /// What the last turns of the ring ran into (see [`maintenance::rotate`]).
    ring: Arc<std::sync::Mutex<maintenance::RingState>>,
    /// Pickup breakdown marks, when a bench asked for them.
    pub(crate) probe: Option<Arc<probe::Probe>>,
    /// Whether batches wait to settle, and the settling loop's wake-up (see [`batches`]).
    pub(crate) batches: Arc<batches::BatchWatch>,
    /// The store's wake-up feed is being read (set by [`Engine::start`]).
    feed_running: Arc<std::sync::atomic::AtomicBool>,
    /// Starts and workers' reports of workflow runs, written together (see
    /// [`durable::GroupCommit`]).
    pub(crate) run_batches: Arc<durable::Batches>,
}

impl Engine {
    /// An engine over `db` (a [`Database`], or a store: `Arc<dyn docket_store::Store>`).
    pub fn new(db: impl Into<Database>, clock: Arc<dyn Clock>, config: EngineConfig) -> Self {
        Engine {
            store: db.into().store,
            clock,
            config: Arc::new(config),
            waker: Arc::new(Waker::default()),
            last_pass: Arc::default(),
            kinds: kinds::KindHooks::default(),
            draining: Arc::default(),
            ring: Arc::default(),
            probe: None,
            batches: Arc::default(),
            feed_running: Arc::default(),
            run_batches: Arc::default(),
        }
    }

    /// This engine recording the steps of each pickup in `probe` (see [`probe`]).
    pub fn with_probe(mut self, probe: Arc<probe::Probe>) -> Self {
        self.probe = Some(probe);
        self
    }

    pub(crate) fn mark(&self, step: probe::Step, id: i64) {
        if let Some(p) = &self.probe {
            p.mark(step, id);
        }
    }

    /// Whether this node is drained (claims nothing).
    pub fn is_draining(&self) -> bool {
        self.draining.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub(crate) fn set_draining(&self, on: bool) {
        self.draining
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// This engine with `hook` checking the tasks of its kind at enqueue and schedule time.
    pub fn with_kind_hook(mut self, hook: Arc<dyn kinds::KindHook>) -> Self {
        self.kinds = self.kinds.with(hook);
        self
    }

    /// The scope a token needs to enqueue tasks of `kind` besides `enqueue` (a kind hook's).
    pub fn kind_scope(&self, kind: &str) -> Option<docket_core::auth::Scope> {
        self.kinds.scope(kind)
    }

    /// Records that the maintenance loop finished a pass now.
    pub fn maintenance_passed(&self) {
        if let Ok(mut t) = self.last_pass.lock() {
            *t = Some(std::time::Instant::now());
        }
        let unix = self.clock.now().timestamp_millis() as f64 / 1000.0;
        ::metrics::gauge!(metrics::MAINTENANCE_LAST_PASS).set(unix);
    }

    /// How long ago the maintenance loop last finished a pass; None when it never ran here.
    pub fn last_maintenance_pass(&self) -> Option<Duration> {
        self.last_pass.lock().ok()?.map(|t| t.elapsed())
    }

    /// Whether maintenance is stalled: it ran on this engine, and its last pass finished longer
    /// ago than [`EngineConfig::maintenance_stall_after`].
    pub fn maintenance_stalled(&self) -> bool {
        self.last_maintenance_pass()
            .is_some_and(|d| d > self.config.maintenance_stall_after)
    }

    /// Validates and inserts tasks in one transaction; answers in input order.
    ///
    /// # Errors
    /// [`EngineError::InvalidTask`] for the first bad spec (nothing is inserted), store errors.
    pub async fn enqueue_many(&self, tasks: Vec<NewTask>) -> Result<Vec<Task>, EngineError> {
        let now = self.clock.now();
        if tasks.len() == 1 && tasks[0].debounce.is_some() {
            let task = self.resolve_checked(tasks, now, true).await?.remove(0);
            let out = self
                .store
                .task_debounce(docket_store::TaskDebounceParams { task, now })
                .await?;
            metrics::record_debounced(&out);
            let out = vec![out];
            self.inserted(&out);
            return Ok(out);
        }
        let resolved = self.resolve_all(tasks, now).await?;
        let out = self
            .store
            .task_insert_many(TaskInsertManyParams {
                tasks: resolved,
                now,
            })
            .await?;
        self.inserted(&out);
        Ok(out)
    }

    /// Checks tasks with the kind hooks and resolves their defaults (queue settings, then the
    /// server's) at `now`.
    ///
    /// # Errors
    /// [`EngineError::Refused`] / [`EngineError::InvalidTask`] for the first bad spec; store
    /// errors.
    pub(crate) async fn resolve_all(
        &self,
        tasks: Vec<NewTask>,
        now: docket_core::Timestamp,
    ) -> Result<Vec<docket_core::task::ResolvedTask>, EngineError> {
        self.resolve_checked(tasks, now, false).await
    }

    /// [`Engine::resolve_all`]; `debounce` says whether a task may carry `debounce` (only the
    /// enqueue of one task: a batch's, a workflow's or a bulk action's tasks are inserted as
    /// given, all or none).
    async fn resolve_checked(
        &self,
        mut tasks: Vec<NewTask>,
        now: docket_core::Timestamp,
        debounce: bool,
    ) -> Result<Vec<docket_core::task::ResolvedTask>, EngineError> {
        for (index, t) in tasks.iter_mut().enumerate() {
            if t.debounce.is_some() && !debounce {
                return Err(EngineError::InvalidTask {
                    index,
                    message: "debounce: only an enqueue of one task debounces (not several \
                        tasks, a batch or a workflow)"
                        .into(),
                });
            }
            // Bulk actions run with an admin's confirmation (`POST /v1/tasks/bulk`); a task
            // put in their queue by hand would run one without it.
            if t.queue_name() == docket_core::bulk::QUEUE {
                return Err(EngineError::InvalidTask {
                    index,
                    message: format!(
                        "queue {} is docket's own: ask POST /v1/tasks/bulk",
                        docket_core::bulk::QUEUE
                    ),
                });
            }
            self.kinds
                .check(t)
                .map_err(|refusal| EngineError::Refused {
                    index: Some(index),
                    refusal,
                })?;
        }
        let mut names: Vec<String> = tasks.iter().map(|t| t.queue_name().to_string()).collect();
        names.sort();
        names.dedup();
        let settings: HashMap<_, _> = self.store.queue_settings_many(&names).await?;
        let mut resolved = Vec::with_capacity(tasks.len());
        for (index, t) in tasks.into_iter().enumerate() {
            let q = settings.get(t.queue_name());
            let r = t
                .resolve(q, &self.config.defaults, now)
                .map_err(|message| EngineError::InvalidTask { index, message })?;
            resolved.push(r);
        }
        self.check_rate_limits(&resolved).await?;
        Ok(resolved)
    }

    /// Counts inserted tasks and wakes their queues' claimers (or the scheduler).
    pub(crate) fn inserted(&self, out: &[Task]) {
        metrics::record_enqueued(out);
        // Once the engine runs the store's feed, the feed wakes the queue: SQLite's and MySQL's
        // commit feed (and the peers through it), PostgreSQL's NOTIFY (which this node hears
        // too). A second wake-up let two claimers look for one task: on SQLite and MySQL two
        // claimers filtered by kind, and MySQL's SKIP LOCKED could then hide the new row from
        // the one that takes it (it was locked by the other's scan), so both waited for the poll
        // (CI, issue 24's test one_wake_finds_every_task); on PostgreSQL every insert woke two
        // idle claimers, this wake-up's and the NOTIFY's (the same test, once it counted).
        let fed = self.feed_running.load(std::sync::atomic::Ordering::Relaxed);
        let mut woke = std::collections::HashSet::new();
        for t in out {
            if t.inserted == Some(true) {
                match t.state {
                    docket_core::TaskState::Available => {
                        if woke.insert(t.queue.clone()) {
                            self.mark(probe::Step::Wake, 0);
                            if !fed {
                                self.waker.wake(&t.queue);
                            }
                        }
                    }
                    _ => self.waker.wake_scheduler(),
                }
            }
        }
    }

    /// Records the task events of these queues from now on (see
    /// [`docket_store::NotificationStore::task_events_watch`]); event sinks naming queues do it
    /// themselves.
    ///
    /// # Errors
    /// Store errors.
    pub async fn task_events_watch(&self, queues: &[String]) -> Result<(), EngineError> {
        Ok(self.store.task_events_watch(queues).await?)
    }

    /// Completes attempts (see [`LeaseStore::task_complete_many`]) and records their metrics.
    ///
    /// # Errors
    /// Store errors (then nothing changed).
    pub async fn complete_many(
        &self,
        items: &[docket_store::TaskComplete],
    ) -> Result<Vec<docket_store::LeaseOutcome>, EngineError> {
        let now = self.clock.now();
        let out = self
            .store
            .task_complete_many(docket_store::TaskCompleteManyParams {
                fail_rule: self.config.fail_rule,
                items,
                now,
            })
            .await?;
        metrics::record_outcomes(&out, now);
        if !items.is_empty() {
            self.waker.changed();
            self.tasks_finished(items.iter().map(|i| i.id));
            self.batches_poke();
        }
        Ok(out)
    }

    /// Fails attempts (see [`LeaseStore::task_fail_many`]), records their metrics and wakes the
    /// scheduler for the retries.
    ///
    /// # Errors
    /// Store errors (then nothing changed).
    pub async fn fail_many(
        &self,
        items: &[docket_store::TaskFail],
        worker: Option<&str>,
    ) -> Result<Vec<docket_store::LeaseOutcome>, EngineError> {
        let now = self.clock.now();
        let out = self
            .store
            .task_fail_many(docket_store::TaskFailManyParams {
                fail_rule: self.config.fail_rule,
                items,
                worker,
                now,
            })
            .await?;
        metrics::record_outcomes(&out, now);
        if !items.is_empty() {
            self.waker.wake_scheduler();
            self.tasks_finished(items.iter().map(|i| i.id));
            self.batches_poke();
        }
        Ok(out)
    }

    /// Claims as `c` says (see [`Claim`]): up to `c.limit` tasks, waiting up to `c.wait` for
    /// one when none is available, waking as soon as one is (or `cancel` fires). Only tasks of
    /// `c.kinds` and `c.stages` when set: a worker takes only what it can run, and a task
    /// nobody handles waits (asyncflow holds tasks by task type and stage). Each claimed
    /// task's lease carries its attempt's own trace id
    /// ([`docket_core::run::attempt_trace_id`]). A claim with a `claim_id` checks, once
    /// committed, whether its worker released it meanwhile ([`Engine::release_claim`]), and
    /// then hands its tasks back and answers none.
    ///
    /// # Errors
    /// Store errors.
    pub async fn claim(
        &self,
        c: &Claim,
        cancel: &CancellationToken,
    ) -> Result<Vec<Task>, EngineError> {
        let Claim {
            queue,
            worker,
            kinds,
            stages,
            labels,
            limit,
            lease,
            wait,
            poll,
            claim_id,
        } = c;
        let (queue, worker, limit, lease, wait, poll) = (
            queue.as_str(),
            worker.as_str(),
            *limit,
            *lease,
            *wait,
            *poll,
        );

        let deadline = tokio::time::Instant::now() + wait;
        if self.is_draining() {
            // A drained node claims nothing; its claimers wait as they would on an empty queue.
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => {}
                _ = cancel.cancelled() => {}
            }
            return Ok(vec![]);
        }
        let wake = self.waker.queue(queue);
        // The queue's own schedule_interval, read once the claim has to wait.
        let mut every: Option<Duration> = None;
        let mut waited = 0;
        // Woken as the one claimer of a wake-up (see waker::QueueWake for what that obliges).
        let mut chosen = false;
        // A claim with labels takes what others may not (a task requiring them), and passes on
        // what it cannot take, as a claim of some kinds does.
        let filtered = kinds.is_some() || stages.is_some() || !labels.is_empty();
        loop {
            let one = wake.one.notified();
            let all = wake.all.notified();
            tokio::pin!(one, all);
            // Register before looking, so a wake-up between the look and the wait is not lost.
            one.as_mut().enable();
            all.as_mut().enable();
            self.mark(probe::Step::ClaimStart, waited);
            let got = self
                .store
                .task_claim(TaskClaimParams {
                    labels: labels.clone(),
                    kinds: kinds.clone(),
                    stages: stages.clone(),
                    queue: queue.to_string(),
                    worker: worker.to_string(),
                    node: self.config.node.clone(),
                    limit,
                    lease,
                    now: self.clock.now(),
                    nonce: *claim_id,
                })
                .await?;
            let mut got = got;
            if let (Some(nonce), false) = (claim_id, got.is_empty()) {
                // A release that arrived before this claim committed (the worker stopped and
                // gave up on the answer): hand back what it took; nobody will run it.
                let ids: Vec<i64> = got.iter().map(|t| t.id).collect();
                let back = self
                    .store
                    .task_release(TaskReleaseParams {
                        nonce: *nonce,
                        release: Release::IfClaimReleased(&ids),
                        queue: None,
                        now: self.clock.now(),
                    })
                    .await
                    // The tasks are claimed already: answering them beats stranding them
                    // under a lease nobody got.
                    .unwrap_or_else(|e| {
                        tracing::warn!(error = %e, "could not check whether a claim was released");
                        vec![]
                    });
                if !back.is_empty() {
                    got.retain(|t| !back.iter().any(|r| r.id == t.id));
                    self.waker.wake(queue);
                }
            }
            if got.iter().any(|t| t.batch_id.is_some()) {
                // The tasks are claimed already: a failed read leaves `deps` out rather than
                // stranding them under a lease nobody got.
                if let Err(e) = self.attach_deps(&mut got).await {
                    tracing::warn!(error = %e, "could not read the dependencies' results of claimed workflow tasks");
                }
            }
            for t in &mut got {
                self.mark(probe::Step::Claimed, t.id);
                if let (Some(l), Some(trace)) = (t.lease.as_mut(), t.trace_id.as_deref()) {
                    l.trace_id = Some(docket_core::run::attempt_trace_id(
                        trace,
                        t.stage.as_deref(),
                        t.attempt,
                    ));
                }
            }
            let now = tokio::time::Instant::now();
            if !got.is_empty() || now >= deadline || cancel.is_cancelled() {
                metrics::record_claimed(queue, &got, labels, self.clock.now());
                if !got.is_empty() {
                    self.waker.changed();
                }
                if chosen && got.len() as i64 >= limit {
                    // A full claim: more may be waiting.
                    wake.one.notify_one();
                } else if chosen && filtered {
                    wake.all.notify_waiters();
                }
                return Ok(got);
            }
            // Woken for a task this claimer does not take (another kind or stage): let every
            // claimer look, once, not this one. Without a filter it saw every task there is.
            if std::mem::take(&mut chosen) && filtered {
                // Another claimer passed on while this one looked: everyone waiting then was
                // woken already, and this claim may have missed the task because the other
                // claim held its row for a moment (MySQL's SKIP LOCKED skips a row another
                // claim is only examining). Look again, alone, rather than pass on too: two
                // claimers passing at once used to ignore each other's pass and both wait for
                // the poll.
                if futures::FutureExt::now_or_never(all.as_mut()).is_some() {
                    continue;
                }
                wake.all.notify_waiters();
                // A fresh registration: this claimer's own pass must not wake it, a later one
                // must.
                all.set(wake.all.notified());
                all.as_mut().enable();
            }
            let every = match every {
                Some(e) => e,
                None => {
                    let queue_poll = self.poll_interval_of(queue).await;
                    *every.insert(poll.map_or(queue_poll, |p| p.min(queue_poll)))
                }
            };
            let nap = (deadline - now).min(every);
            tokio::select! {
                _ = &mut one => chosen = true,
                _ = &mut all => {}
                _ = tokio::time::sleep(nap) => {}
                _ = cancel.cancelled() => return Ok(vec![]),
            }
            waited = 1;
        }
    }

    /// How often an idle claim of `queue` polls the database: the queue's `schedule_interval`
    /// (asyncflow t_schedule_cfg), else `poll_interval`. A failed read falls back to the
    /// latter (the claim itself reports database errors).
    async fn poll_interval_of(&self, queue: &str) -> Duration {
        match self.store.queue_settings_many(&[queue.to_string()]).await {
            Ok(mut m) => m
                .remove(queue)
                .and_then(|s| s.schedule_interval)
                .unwrap_or(self.config.poll_interval),
            Err(_) => self.config.poll_interval,
        }
    }

    /// Starts the background services of this node: the LISTEN/NOTIFY relay (PostgreSQL) and
    /// maintenance. They stop when `cancel` fires; the node is then marked stopped.
    ///
    /// # Errors
    /// Store errors while subscribing.
    pub async fn start(
        &self,
        cancel: CancellationToken,
    ) -> Result<Vec<tokio::task::JoinHandle<()>>, EngineError> {
        let mut handles = vec![];
        if let Some(mut rx) = self.store.listen().await? {
            self.feed_running
                .store(true, std::sync::atomic::Ordering::Relaxed);
            let waker = self.waker.clone();
            let c = cancel.clone();
            let engine = self.clone();
            let listens = self.store.backend().listens();
            handles.push(tokio::spawn(async move {
                loop {
                    tokio::select! {
                        _ = c.cancelled() => return,
                        w = rx.recv() => match w {
                            Some(docket_store::Wake::All) => waker.wake_all(),
                            // PostgreSQL: a NOTIFY, which every node hears. Elsewhere: a
                            // commit in this process, which the peers hear from us.
                            Some(docket_store::Wake::Queue(q)) if listens => {
                                engine.mark(probe::Step::Wake, 1);
                                waker.wake_local(&q)
                            }
                            Some(docket_store::Wake::Queue(q)) => waker.wake(&q),
                            Some(docket_store::Wake::Task(id)) => waker.task_done(id),
                            None => return,
                        }
                    }
                }
            }));
        }
        if let Some(bind) = self.config.peer_wake {
            let waker = self.waker.clone();
            let (peers, h) = peers::PeerWake::start(
                bind,
                self.config.peer_wake_advertise,
                move |queue| waker.wake_local(queue),
                cancel.clone(),
            )
            .await
            .map_err(|e| {
                EngineError::Invalid(format!("cannot bind the peer wake socket {bind}: {e}"))
            })?;
            self.waker.set_peers(peers);
            handles.push(h);
        }
        handles.push(tokio::spawn(batches::run(self.clone(), cancel.clone())));
        handles.push(tokio::spawn(bulk::run(self.clone(), cancel.clone())));
        handles.push(tokio::spawn(maintenance::run(self.clone(), cancel)));
        Ok(handles)
    }
}
