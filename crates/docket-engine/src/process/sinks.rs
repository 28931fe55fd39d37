//! Event sinks: a namespace's notifications published to a message broker (progressor's
//! notifier, `prg_notifier`), in order per process, at least once.
//!
//! The engine decides here what a broker sink receives and when its cursor moves; a [`Sink`]
//! only publishes and reports what the broker confirmed (`docket-sinks` has NATS JetStream and
//! RabbitMQ). Per (sink, namespace) one node at a time holds the cursor `sink:NAME:NS`
//! (`docket_sinks`, leased like a webhook's): it reads the outbox after the cursor in seq
//! order (seq order is commit order: writers serialise on a lock), publishes a batch in
//! [`docket_core::sink::waves`] — no key twice in one wave, so a process's next message goes
//! out only after the broker confirmed the one before — and advances the cursor over the
//! longest confirmed prefix of the batch. A failure leaves the cursor where it is and retries with backoff (200 ms
//! doubling to 30 s); the engine and the API do not wait for a sink.

use super::*;
use crate::sink::{metric, SinkSpec, SinkStatus};
use docket_core::sink::{self, Message};
use std::time::Instant;

/// Counted up to this many when a sink's backlog is measured.
// (Measured once a second: a long outage's backlog is not scanned whole each time.)
const BACKLOG_COUNT_MAX: i64 = 100_000;
/// Most notifications read per pass.
const BATCH: i64 = 500;
/// Most messages published at once (one wave; see [`docket_core::sink::waves`]).
const WAVE: usize = 256;
/// The cursor's lease, and how much of it may be left before it is renewed.
const LEASE: Duration = Duration::from_secs(30);
const RENEW_BELOW: Duration = Duration::from_secs(20);
/// A node that does not hold the cursor asks for it this often (a holder that stopped hands
/// it over within this; one that died, within [`LEASE`] and this).
const ASK_EVERY: Duration = Duration::from_secs(2);
/// Without a change seen on this node (another node wrote on SQLite or MySQL), look this often.
const POLL: Duration = Duration::from_millis(200);

/// What a delivery loop carries: a namespace's process notifications, or a queue's task
/// events.
#[derive(Debug, Clone)]
pub(super) enum Scope {
    /// Process notifications of this namespace (cursor `sink:NAME:NS` over the outbox).
    Namespace(String),
    /// Task events of this queue (`docket_task_events`; rows are deleted once published, the
    /// lease `tasks:NAME:QUEUE` only says which node publishes).
    Queue(String),
}

impl Scope {
    fn lease(&self, sink: &str) -> String {
        match self {
            Scope::Namespace(ns) => format!("sink:{sink}:{ns}"),
            Scope::Queue(q) => format!("tasks:{sink}:{q}"),
        }
    }

    /// The status map's key, and the metrics' label beside `sink`.
    fn label(&self) -> (&'static str, String) {
        match self {
            Scope::Namespace(ns) => ("namespace", ns.clone()),
            Scope::Queue(q) => ("queue", q.clone()),
        }
    }
}

/// Without a wake-up, a task event loop looks this often (task changes on this node wake it).
const TASK_POLL: Duration = Duration::from_millis(100);
/// A task event loop passes at most this often (every task change ticks the change feed).
const TASK_GAP: Duration = Duration::from_millis(10);

/// Where one delivery loop stands while it holds the cursor.
struct Held {
    seq: i64,
    until: docket_core::Timestamp,
}

/// A delivery loop's state between passes.
#[derive(Default)]
struct Cursor {
    held: Option<Held>,
    /// When this node last asked for the lease without getting it.
    refused: Option<Instant>,
    /// A queue's task events are watched (once per loop is enough: watching is for good).
    watched: bool,
}

impl ProcessService {
    /// Sends namespaces' notifications and queues' task events to these sinks from now on
    /// (call before [`ProcessService::start`]).
    #[must_use]
    pub fn with_sinks(mut self, sinks: Vec<SinkSpec>) -> Self {
        self.sinks = Arc::new(sinks);
        self
    }

    /// What this node knows of every (sink, namespace or queue) it delivers.
    #[must_use]
    pub fn sink_status(&self) -> Vec<SinkStatus> {
        self.sink_status
            .lock()
            .expect("lock")
            .values()
            .cloned()
            .collect()
    }

    /// Starts a delivery loop for every sink that covers namespace `ns`.
    pub(super) fn start_sinks(&self, ns: &str) {
        for spec in self.sinks.iter().filter(|s| s.covers(ns)) {
            self.spawn_sink(spec.clone(), Scope::Namespace(ns.to_string()));
        }
    }

    /// Starts a delivery loop for every queue whose task events a sink publishes.
    pub(super) fn start_task_sinks(&self) {
        for spec in self.sinks.iter() {
            for q in &spec.queues {
                self.spawn_sink(spec.clone(), Scope::Queue(q.clone()));
            }
        }
    }

    fn spawn_sink(&self, spec: SinkSpec, scope: Scope) {
        let h = tokio::spawn(self.clone().deliver_sink(spec, scope));
        self.sink_loops.lock().expect("lock").push(h);
    }

    /// Waits (at most 2 s) for the delivery loops, stopping, to hand their cursors over.
    pub(super) async fn sinks_stopped(&self) {
        let loops = std::mem::take(&mut *self.sink_loops.lock().expect("lock"));
        let _ =
            tokio::time::timeout(Duration::from_secs(2), futures::future::join_all(loops)).await;
    }

    fn status<R>(&self, spec: &SinkSpec, scope: &Scope, f: impl FnOnce(&mut SinkStatus) -> R) -> R {
        let (what, name) = scope.label();
        let mut m = self.sink_status.lock().expect("lock");
        let s = m
            .entry((spec.name.clone(), format!("{what}:{name}")))
            .or_insert_with(|| SinkStatus {
                sink: spec.name.clone(),
                kind: spec.sink.kind().to_string(),
                namespace: if what == "namespace" {
                    name.clone()
                } else {
                    String::new()
                },
                queue: (what == "queue").then(|| name.clone()),
                holder: false,
                delivered_seq: 0,
                backlog: 0,
                oldest_age_s: None,
                published: 0,
                failures: 0,
                last_error: None,
            });
        f(s)
    }

    /// The delivery loop of one (sink, namespace or queue) on this node: idle unless it holds
    /// the lease. A namespace's loop is woken when a process step finished (this node's, or
    /// PostgreSQL's notification of another's), else every 200 ms; a queue's by this node's
    /// task changes (at most every 10 ms), else every 100 ms. Ticks during a pass coalesce.
    async fn deliver_sink(self, spec: SinkSpec, scope: Scope) {
        let cursor = scope.lease(&spec.name);
        let (what, name) = scope.label();
        let labels = [("sink", spec.name.clone()), (what, name.clone())];
        let mut steps = self.engine.waker.steps();
        let mut changes = self.engine.waker.changes();
        let mut cur = Cursor::default();
        let mut backoff = Duration::from_millis(200);
        let mut measured: Option<Instant> = None;
        self.status(&spec, &scope, |_| ());
        loop {
            let started = Instant::now();
            // Ticks before this pass are seen by it.
            steps.borrow_and_update();
            while changes.try_recv().is_ok() {}
            let r = tokio::select! {
                _ = self.cancel.cancelled() => {
                    self.release(&cursor, &cur).await;
                    return;
                }
                r = self.sink_pass(&spec, &scope, &cursor, &mut cur) => r,
            };
            let held = cur.held.as_ref().map(|h| h.seq);
            let pause = match r {
                Ok(more) => {
                    backoff = Duration::from_millis(200);
                    if let (Some(seq), Scope::Namespace(_)) = (held, &scope) {
                        if measured.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                            measured = Some(Instant::now());
                            self.measure(&spec, &scope, seq).await;
                        }
                    }
                    if more {
                        Duration::ZERO
                    } else {
                        POLL
                    }
                }
                Err(e) => {
                    tracing::warn!(sink = %spec.name, scope = ?scope, error = %e, "publishing to the sink failed; retrying in {backoff:?}");
                    ::metrics::counter!(metric::FAILURES, &labels).increment(1);
                    let now = self.engine.clock.now();
                    self.status(&spec, &scope, |s| {
                        s.failures += 1;
                        s.last_error = Some((e, now));
                    });
                    if let (Some(seq), Scope::Namespace(_)) = (held, &scope) {
                        self.measure(&spec, &scope, seq).await;
                    }
                    let b = backoff;
                    backoff = (backoff * 2).min(Duration::from_secs(30));
                    b
                }
            };
            if pause.is_zero() {
                continue;
            }
            let idle = pause == POLL;
            let (pause, tasks) = match scope {
                Scope::Queue(_) if idle => {
                    let gap = TASK_GAP.saturating_sub(started.elapsed());
                    tokio::select! {
                        _ = self.cancel.cancelled() => {
                            self.release(&cursor, &cur).await;
                            return;
                        }
                        _ = tokio::time::sleep(gap) => {}
                    }
                    (TASK_POLL, true)
                }
                _ => (pause, false),
            };
            tokio::select! {
                _ = self.cancel.cancelled() => {
                    self.release(&cursor, &cur).await;
                    return;
                }
                _ = tokio::time::sleep(pause) => {}
                r = steps.changed(), if idle && !tasks => {
                    if r.is_err() {
                        steps = self.engine.waker.steps();
                    }
                }
                r = changes.recv(), if tasks => {
                    if let Err(tokio::sync::broadcast::error::RecvError::Closed) = r {
                        changes = self.engine.waker.changes();
                    }
                }
            }
        }
    }

    /// One pass: renews the lease when due, publishes what waits. Ok(true) when a full batch
    /// went out (more may wait).
    async fn sink_pass(
        &self,
        spec: &SinkSpec,
        scope: &Scope,
        cursor: &str,
        cur: &mut Cursor,
    ) -> Result<bool, String> {
        let store = &self.engine.store;
        let owner = &self.engine.config.node;
        let now = self.engine.clock.now();
        let renew = cur
            .held
            .as_ref()
            .is_none_or(|h| h.until < docket_core::time::add(now, RENEW_BELOW));
        if cur.held.is_none() && cur.refused.is_some_and(|t| t.elapsed() < ASK_EVERY) {
            return Ok(false);
        }
        if renew {
            if let (Scope::Queue(q), false) = (scope, cur.watched) {
                // Idempotent; the first time on a database it arms the triggers.
                store
                    .task_events_watch(std::slice::from_ref(q))
                    .await
                    .map_err(|e| format!("cannot watch the queue's task events: {e}"))?;
                cur.watched = true;
            }
            let until = docket_core::time::add(now, LEASE);
            let seq = store
                .sink_lease(docket_store::SinkLeaseParams {
                    name: cursor,
                    owner,
                    until,
                    now,
                })
                .await
                .map_err(|e| e.to_string())?;
            cur.held = seq.map(|seq| Held { seq, until });
            cur.refused = cur.held.is_none().then(Instant::now);
            let held = cur.held.as_ref().map(|h| h.seq);
            self.status(spec, scope, |s| {
                s.holder = held.is_some();
                if let Some(seq) = held {
                    s.delivered_seq = seq;
                }
            });
        }
        let Some(h) = cur.held.as_mut() else {
            return Ok(false);
        };
        match scope {
            Scope::Namespace(ns) => {
                let batch = store
                    .notification_list(docket_store::NotificationListParams {
                        namespace: Some(ns),
                        after: h.seq,
                        limit: BATCH,
                    })
                    .await
                    .map_err(|e| e.to_string())?;
                let full = batch.len() as i64 == BATCH;
                let msgs: Vec<Message> = batch.iter().map(sink::message).collect();
                let times: Vec<_> = batch.iter().map(|n| n.created_at).collect();
                let (confirmed, failed) = self.publish(spec, scope, &msgs, &times).await;
                let prefix = confirmed.iter().take_while(|c| **c).count();
                if prefix > 0 {
                    let seq = msgs[prefix - 1].seq;
                    let still = store
                        .sink_advance(docket_store::SinkAdvanceParams {
                            name: cursor,
                            owner,
                            seq,
                        })
                        .await
                        .map_err(|e| e.to_string())?;
                    if !still {
                        // Another node took the cursor (our lease ran out): it resends from
                        // its cursor.
                        cur.held = None;
                        self.status(spec, scope, |s| s.holder = false);
                        return Ok(false);
                    }
                    h.seq = seq;
                    self.status(spec, scope, |s| s.delivered_seq = seq);
                }
                failed.map_or(Ok(full), Err)
            }
            Scope::Queue(q) => {
                let rows = store
                    .task_event_list(docket_store::TaskEventListParams {
                        queue: q,
                        limit: BATCH,
                    })
                    .await
                    .map_err(|e| e.to_string())?;
                let full = rows.len() as i64 == BATCH;
                let age = rows.first().map(|r| {
                    ((self.engine.clock.now() - r.at).num_milliseconds().max(0) as f64) / 1000.0
                });
                let waiting = rows.len() as i64;
                ::metrics::gauge!(
                    metric::BACKLOG,
                    &[("sink", spec.name.clone()), ("queue", q.clone())]
                )
                .set(waiting as f64);
                ::metrics::gauge!(
                    metric::OLDEST,
                    &[("sink", spec.name.clone()), ("queue", q.clone())]
                )
                .set(age.unwrap_or(0.0));
                self.status(spec, scope, |s| {
                    s.backlog = waiting;
                    s.oldest_age_s = age;
                });
                // Changes that are no event (a task becoming due) go without a message.
                let (events, quiet): (Vec<_>, Vec<_>) =
                    rows.iter().partition(|r| sink::task_event(r).is_some());
                let mut done: Vec<i64> = quiet.iter().map(|r| r.seq).collect();
                // The tasks of durable functions' runs: their messages name the run.
                let mut ids: Vec<i64> = events.iter().map(|r| r.task_id).collect();
                ids.sort_unstable();
                ids.dedup();
                let runs: HashMap<i64, sink::TaskRun> = store
                    .run_of_tasks(&ids)
                    .await
                    .map_err(|e| e.to_string())?
                    .into_iter()
                    .map(|r| (r.task_id, r))
                    .collect();
                let msgs: Vec<Message> = events
                    .iter()
                    .map(|r| {
                        let event = sink::task_event(r).unwrap_or_default();
                        sink::task_message(r, event, runs.get(&r.task_id))
                    })
                    .collect();
                let times: Vec<_> = events.iter().map(|r| r.at).collect();
                let (confirmed, failed) = self.publish(spec, scope, &msgs, &times).await;
                done.extend(
                    msgs.iter()
                        .zip(&confirmed)
                        .filter(|(_, c)| **c)
                        .map(|(m, _)| m.seq),
                );
                store
                    .task_event_delete(&done)
                    .await
                    .map_err(|e| e.to_string())?;
                if let Some(last) = done.iter().max() {
                    h.seq = h.seq.max(*last);
                    let seq = h.seq;
                    self.status(spec, scope, |s| s.delivered_seq = seq);
                }
                failed.map_or(Ok(full), Err)
            }
        }
    }

    /// Publishes `msgs` in waves ([`sink::waves`]); which the broker confirmed, and the first
    /// failure (after which nothing more is sent: a key's next message waits for the one before).
    /// `times[i]`: when message i's change was committed (the lag histogram).
    async fn publish(
        &self,
        spec: &SinkSpec,
        scope: &Scope,
        msgs: &[Message],
        times: &[docket_core::Timestamp],
    ) -> (Vec<bool>, Option<String>) {
        let (what, name) = scope.label();
        let mut confirmed = vec![false; msgs.len()];
        let mut failed = None;
        let lag = ::metrics::histogram!(metric::LAG, "sink" => spec.name.clone());
        for wave in sink::waves(msgs, WAVE) {
            let out: Vec<Message> = wave.iter().map(|&i| msgs[i].clone()).collect();
            let t0 = Instant::now();
            let outcomes = spec.sink.publish(&out).await;
            if let Scope::Namespace(ns) = scope {
                ::metrics::histogram!(M::NOTIFICATION, "namespace" => ns.clone(), "notification_type" => spec.sink.kind())
                    .record(M::ms_since(t0));
            }
            let at = self.engine.clock.now();
            let mut ok = 0u64;
            for (k, &i) in wave.iter().enumerate() {
                match outcomes.get(k) {
                    Some(Ok(())) => {
                        confirmed[i] = true;
                        ok += 1;
                        let us = (at - times[i]).num_microseconds().unwrap_or(0);
                        lag.record(us.max(0) as f64 / 1e6);
                    }
                    Some(Err(e)) => {
                        failed.get_or_insert_with(|| e.clone());
                    }
                    None => {
                        failed.get_or_insert_with(|| {
                            "the sink answered for fewer messages than sent".into()
                        });
                    }
                }
            }
            ::metrics::counter!(
                metric::PUBLISHED,
                &[("sink", spec.name.clone()), (what, name.clone())]
            )
            .increment(ok);
            self.status(spec, scope, |s| s.published += ok);
            if failed.is_some() {
                break;
            }
        }
        (confirmed, failed)
    }

    /// Hands the cursor over at shutdown (its lease ends now), so another node takes it at
    /// once instead of after the lease; best effort, bounded by 1 s.
    async fn release(&self, cursor: &str, cur: &Cursor) {
        if cur.held.is_none() {
            return;
        }
        let now = self.engine.clock.now();
        let _ = tokio::time::timeout(
            Duration::from_secs(1),
            self.engine.store.sink_lease(docket_store::SinkLeaseParams {
                name: cursor,
                owner: &self.engine.config.node,
                until: now,
                now,
            }),
        )
        .await;
    }

    /// Sets the backlog gauges of a namespace cursor this node holds.
    async fn measure(&self, spec: &SinkSpec, scope: &Scope, after: i64) {
        let Scope::Namespace(ns) = scope else {
            return;
        };
        let r = self
            .engine
            .store
            .notification_backlog(docket_store::NotificationBacklogParams {
                namespace: ns,
                after,
                limit: BACKLOG_COUNT_MAX,
            })
            .await;
        let Ok((n, oldest)) = r else {
            return;
        };
        let now = self.engine.clock.now();
        let age = oldest.map(|t| ((now - t).num_milliseconds().max(0) as f64) / 1000.0);
        ::metrics::gauge!(metric::BACKLOG, "sink" => spec.name.clone(), "namespace" => ns.clone())
            .set(n as f64);
        ::metrics::gauge!(metric::OLDEST, "sink" => spec.name.clone(), "namespace" => ns.clone())
            .set(age.unwrap_or(0.0));
        self.status(spec, scope, |s| {
            s.backlog = n;
            s.oldest_age_s = age;
        });
    }
}
