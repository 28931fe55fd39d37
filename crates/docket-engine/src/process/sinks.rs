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
}

impl ProcessService {
    /// Sends namespaces' notifications to these sinks from now on (call before
    /// [`ProcessService::start`]).
    #[must_use]
    pub fn with_sinks(mut self, sinks: Vec<SinkSpec>) -> Self {
        self.sinks = Arc::new(sinks);
        self
    }

    /// What this node knows of every (sink, namespace) it delivers, by sink then namespace.
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
            let h = tokio::spawn(self.clone().deliver_sink(spec.clone(), ns.to_string()));
            self.sink_loops.lock().expect("lock").push(h);
        }
    }

    /// Waits (at most 2 s) for the delivery loops, stopping, to hand their cursors over.
    pub(super) async fn sinks_stopped(&self) {
        let loops = std::mem::take(&mut *self.sink_loops.lock().expect("lock"));
        let _ =
            tokio::time::timeout(Duration::from_secs(2), futures::future::join_all(loops)).await;
    }

    fn status<R>(&self, spec: &SinkSpec, ns: &str, f: impl FnOnce(&mut SinkStatus) -> R) -> R {
        let mut m = self.sink_status.lock().expect("lock");
        let s = m
            .entry((spec.name.clone(), ns.to_string()))
            .or_insert_with(|| SinkStatus {
                sink: spec.name.clone(),
                kind: spec.sink.kind().to_string(),
                namespace: ns.to_string(),
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

    /// The delivery loop of one (sink, namespace) on this node: idle unless it holds the
    /// cursor's lease; woken when a process step finished (this node's, or PostgreSQL's
    /// notification of another's), else every 200 ms. Ticks during a pass coalesce into one.
    async fn deliver_sink(self, spec: SinkSpec, ns: String) {
        let cursor = format!("sink:{}:{ns}", spec.name);
        let mut steps = self.engine.waker.steps();
        let mut cur = Cursor::default();
        let mut backoff = Duration::from_millis(200);
        let mut measured: Option<Instant> = None;
        self.status(&spec, &ns, |_| ());
        loop {
            // Ticks before this pass are seen by it.
            steps.borrow_and_update();
            let r = tokio::select! {
                _ = self.cancel.cancelled() => {
                    self.release(&cursor, &cur).await;
                    return;
                }
                r = self.sink_pass(&spec, &ns, &cursor, &mut cur) => r,
            };
            let held = &cur.held;
            let pause = match r {
                Ok(more) => {
                    backoff = Duration::from_millis(200);
                    if held.is_some()
                        && measured.is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
                    {
                        measured = Some(Instant::now());
                        self.measure(&spec, &ns, held.as_ref().map_or(0, |h| h.seq))
                            .await;
                    }
                    if more {
                        Duration::ZERO
                    } else {
                        POLL
                    }
                }
                Err(e) => {
                    tracing::warn!(sink = %spec.name, namespace = %ns, error = %e, "publishing to the sink failed; retrying in {backoff:?}");
                    ::metrics::counter!(metric::FAILURES, "sink" => spec.name.clone(), "namespace" => ns.clone())
                        .increment(1);
                    let now = self.engine.clock.now();
                    self.status(&spec, &ns, |s| {
                        s.failures += 1;
                        s.last_error = Some((e, now));
                    });
                    if held.is_some() {
                        self.measure(&spec, &ns, held.as_ref().map_or(0, |h| h.seq))
                            .await;
                    }
                    let b = backoff;
                    backoff = (backoff * 2).min(Duration::from_secs(30));
                    b
                }
            };
            if pause.is_zero() {
                continue;
            }
            tokio::select! {
                _ = self.cancel.cancelled() => {
                    self.release(&cursor, &cur).await;
                    return;
                }
                _ = tokio::time::sleep(pause) => {}
                r = steps.changed(), if pause == POLL => {
                    if r.is_err() {
                        steps = self.engine.waker.steps();
                    }
                }
            }
        }
    }

    /// One pass: renews the lease when due, publishes what follows the cursor. Ok(true) when a
    /// full batch went out (more may wait).
    async fn sink_pass(
        &self,
        spec: &SinkSpec,
        ns: &str,
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
        let held = &mut cur.held;
        if renew {
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
            *held = seq.map(|seq| Held { seq, until });
            cur.refused = held.is_none().then(Instant::now);
            self.status(spec, ns, |s| {
                s.holder = held.is_some();
                if let Some(h) = held.as_ref() {
                    s.delivered_seq = h.seq;
                }
            });
        }
        let Some(h) = held.as_mut() else {
            return Ok(false);
        };
        let batch = store
            .notification_list(docket_store::NotificationListParams {
                namespace: Some(ns),
                after: h.seq,
                limit: BATCH,
            })
            .await
            .map_err(|e| e.to_string())?;
        if batch.is_empty() {
            return Ok(false);
        }
        let full = batch.len() as i64 == BATCH;
        let msgs: Vec<Message> = batch.iter().map(sink::message).collect();
        let mut confirmed = vec![false; msgs.len()];
        let mut failed = None;
        let lag = ::metrics::histogram!(metric::LAG, "sink" => spec.name.clone());
        for wave in sink::waves(&msgs, WAVE) {
            let out: Vec<Message> = wave.iter().map(|&i| msgs[i].clone()).collect();
            let t0 = Instant::now();
            let outcomes = spec.sink.publish(&out).await;
            ::metrics::histogram!(M::NOTIFICATION, "namespace" => ns.to_string(), "notification_type" => spec.sink.kind())
                .record(M::ms_since(t0));
            let at = self.engine.clock.now();
            let mut ok = 0u64;
            for (k, &i) in wave.iter().enumerate() {
                match outcomes.get(k) {
                    Some(Ok(())) => {
                        confirmed[i] = true;
                        ok += 1;
                        let secs = (at - batch[i].created_at).num_microseconds().unwrap_or(0);
                        lag.record(secs.max(0) as f64 / 1e6);
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
            ::metrics::counter!(metric::PUBLISHED, "sink" => spec.name.clone(), "namespace" => ns.to_string())
                .increment(ok);
            self.status(spec, ns, |s| s.published += ok);
            // A key's next message waits for this one: after a failure nothing more is sent.
            if failed.is_some() {
                break;
            }
        }
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
            if still {
                h.seq = seq;
                self.status(spec, ns, |s| s.delivered_seq = seq);
            } else {
                // Another node took the cursor (our lease ran out): it resends from its cursor.
                *held = None;
                self.status(spec, ns, |s| s.holder = false);
                return Ok(false);
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(full),
        }
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

    /// Sets the backlog gauges of a cursor this node holds.
    async fn measure(&self, spec: &SinkSpec, ns: &str, after: i64) {
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
        ::metrics::gauge!(metric::BACKLOG, "sink" => spec.name.clone(), "namespace" => ns.to_string())
            .set(n as f64);
        ::metrics::gauge!(metric::OLDEST, "sink" => spec.name.clone(), "namespace" => ns.to_string())
            .set(age.unwrap_or(0.0));
        self.status(spec, ns, |s| {
            s.backlog = n;
            s.oldest_age_s = age;
        });
    }
}
