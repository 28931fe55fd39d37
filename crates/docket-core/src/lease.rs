//! The rules of a lease and of the end of an attempt, written once for every backend and
//! worker: the attempt's deadline, when a lease runs out, the lease token's format, how a
//! lease-checked call reads a task (held, cancel requested, past its deadline, refused), what a
//! failed attempt writes, and the rescue's choice between `timeout` and `lease expired`.
//!
//! The stores lock and fetch rows, call these functions and write the values they return
//! (River's split: the service decides, the driver applies). The engine's in-process worker and
//! `docket worker` call [`deadline`], [`lease_span`] and [`heartbeat_every`] for their local
//! timers.
//!
//! Sources: node-daemons (seed 003) rescues a task whose heartbeat stopped; asyncflow (seed 002)
//! fails a task held past `max_processing_time`; progressor (seeds 000/001) exempts process
//! steps, whose lease is its zombie window (`process_step_timeout` is enforced by the process
//! engine).

use crate::run::{RunOutcome, StoredRun};
use crate::task::{FailDecision, FailRule, NextStage};
use crate::{Task, TaskError, TaskState, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

/// The message of an attempt failed for running past its deadline (`attempted_at + timeout`).
pub const TIMEOUT_MESSAGE: &str = "timeout";
/// The message of an attempt whose lease ran out before its deadline (rescued).
pub const LOST_MESSAGE: &str = "lease expired";

/// The deadline of an attempt started at `attempted_at`: `attempted_at + timeout`, or none for
/// a process step (`process`), whose step timeout the process engine enforces and whose lease
/// is progressor's zombie window, longer than the step.
pub fn deadline_of(attempted_at: Timestamp, timeout: Duration, process: bool) -> Option<Timestamp> {
    (!process).then(|| crate::time::add(attempted_at, timeout))
}

/// The deadline of `t`'s current (or last) attempt; none before its first attempt and for
/// process steps (see [`deadline_of`]).
pub fn deadline(t: &Task) -> Option<Timestamp> {
    deadline_of(t.attempted_at?, t.timeout, t.process.is_some())
}

/// Whether `t`'s attempt is past its deadline at `now` (the deadline itself is past).
pub fn past_deadline(t: &Task, now: Timestamp) -> bool {
    deadline(t).is_some_and(|d| now >= d)
}

/// How long a lease asked for `lease` lasts when the attempt has `left` before its deadline
/// (none: no deadline): never past the deadline. Works in any clock's units, so a remote worker
/// applies it to its own monotonic clock.
pub fn lease_span(lease: Duration, left: Option<Duration>) -> Duration {
    left.map_or(lease, |l| lease.min(l))
}

/// When a lease of `lease` given at `now` runs out, the attempt's `deadline` being what it is.
pub fn lease_expiry(now: Timestamp, lease: Duration, deadline: Option<Timestamp>) -> Timestamp {
    let left = deadline.map(|d| crate::time::since(d, now));
    crate::time::add(now, lease_span(lease, left))
}

/// How many heartbeats a holder sends per lease: one every third of it. A third, not a half,
/// so that one late or lost heartbeat (a slow request, a retried connection, a GC pause) still
/// leaves a third of the lease for the next one before the task is rescued; more often than a
/// third only adds load per running task. The engine's in-process worker, `docket worker` and
/// the native clients (Python, TypeScript, Go, which restate it as a constant) all follow it.
pub const HEARTBEATS_PER_LEASE: u32 = 3;

/// The shortest interval between heartbeats, whatever the lease: a lease of zero (or of a few
/// ms) is heartbeaten this often instead of in a busy loop.
pub const MIN_HEARTBEAT_EVERY: Duration = Duration::from_millis(100);

/// The interval at which the holder of a lease of `lease` heartbeats it: a third of the lease
/// ([`HEARTBEATS_PER_LEASE`]), never under [`MIN_HEARTBEAT_EVERY`]. Total: no panic for a zero
/// or a huge lease (a huge lease gives a huge interval, still before the lease runs out). Works
/// in any clock's units, like [`lease_span`].
pub fn heartbeat_every(lease: Duration) -> Duration {
    (lease / HEARTBEATS_PER_LEASE).max(MIN_HEARTBEAT_EVERY)
}

/// What a claim writes on each task it takes: the lease's length (ms, kept so heartbeats
/// renew it by as much), when it runs out, and the attempt's deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimLease {
    /// The lease's length, ms: the one asked for, else the task's timeout.
    pub lease_ms: i64,
    /// When it runs out: `now + lease`, never past the deadline.
    pub expires_at: Timestamp,
    /// `now + timeout`; none for a process step.
    pub deadline_at: Option<Timestamp>,
}

/// The lease a claim at `now` gives a task of `timeout` (`process`: a process step) when the
/// claimer asked for `lease` (none: the timeout).
pub fn claim_lease(
    now: Timestamp,
    lease: Option<Duration>,
    timeout: Duration,
    process: bool,
) -> ClaimLease {
    let lease = lease.unwrap_or(timeout);
    let deadline_at = deadline_of(now, timeout, process);
    ClaimLease {
        lease_ms: crate::duration::to_ms(lease),
        expires_at: lease_expiry(now, lease, deadline_at),
        deadline_at,
    }
}

/// What a heartbeat at `now` writes: the lease's length (`asked`, else the one the claim kept,
/// `kept_ms`, else the timeout) and its new end, never past the deadline.
pub fn renew(
    t: &Task,
    kept_ms: Option<i64>,
    asked: Option<Duration>,
    now: Timestamp,
) -> ClaimLease {
    let kept = kept_ms
        .and_then(|m| u64::try_from(m).ok())
        .map(Duration::from_millis);
    let lease = asked.or(kept).unwrap_or(t.timeout);
    let deadline_at = deadline(t);
    ClaimLease {
        lease_ms: crate::duration::to_ms(lease),
        expires_at: lease_expiry(now, lease, deadline_at),
        deadline_at,
    }
}

/// A lease token: `nonce` (128 random bits, one per claim, stored on each task it took) and the
/// task's id. Written as 48 lower-case hex digits: the nonce's 32, then the id's 16. The id in
/// the token lets one stored nonce serve a whole claim without two tasks sharing a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseToken {
    /// The claim's nonce, as stored in the task's `lease_token` column.
    pub nonce: u128,
    /// The task it is for.
    pub id: i64,
}

impl LeaseToken {
    /// A new nonce for one claim.
    pub fn new_nonce() -> u128 {
        rand::random::<u128>()
    }

    /// Reads a token; `None` unless it is exactly 48 hex digits.
    pub fn parse(s: &str) -> Option<LeaseToken> {
        if s.len() != 48 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        Some(LeaseToken {
            nonce: u128::from_str_radix(&s[..32], 16).ok()?,
            id: u64::from_str_radix(&s[32..], 16).ok()? as i64,
        })
    }

    /// The nonce a claim id names (`api::ClaimRequest::claim_id`): 32 hex digits, or a UUID
    /// in its hyphenated form; `None` for anything else.
    pub fn claim_nonce(claim_id: &str) -> Option<u128> {
        let b = claim_id.as_bytes();
        let hex: String = if b.len() == 36 {
            if [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
                return None;
            }
            claim_id.chars().filter(|c| *c != '-').collect()
        } else {
            claim_id.to_string()
        };
        nonce_from_hex(&hex.to_ascii_lowercase())
            .filter(|_| hex.bytes().all(|c| c.is_ascii_hexdigit()))
    }

    /// The nonce `token` carries for task `id`: `None` when it is malformed or names another
    /// task (such a token can never hold `id`).
    pub fn nonce_for(token: &str, id: i64) -> Option<u128> {
        Self::parse(token).filter(|t| t.id == id).map(|t| t.nonce)
    }
}

impl std::fmt::Display for LeaseToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:032x}{:016x}", self.nonce, self.id as u64)
    }
}

/// Whether `token` holds task `id` whose `lease_token` column holds `stored`.
pub fn holds(stored: Option<u128>, token: &str, id: i64) -> bool {
    stored.is_some() && LeaseToken::nonce_for(token, id) == stored
}

/// The token of task `id` whose `lease_token` column holds `stored` (what its holder got).
pub fn token_string(stored: Option<u128>, id: i64) -> Option<String> {
    stored.map(|nonce| LeaseToken { nonce, id }.to_string())
}

/// A nonce as the backends without a uuid type keep it: 32 lower-case hex digits.
pub fn nonce_hex(nonce: u128) -> String {
    format!("{nonce:032x}")
}

/// A nonce read back from [`nonce_hex`]'s form; `None` when it is not that.
pub fn nonce_from_hex(s: &str) -> Option<u128> {
    (s.len() == 32)
        .then(|| u128::from_str_radix(s, 16).ok())
        .flatten()
}

/// How a call made under a lease (heartbeat, complete, fail) finds its task, the row locked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseCheck {
    /// Held, running, not asked to cancel, within its deadline: the call applies.
    Held,
    /// Held and running, but a cancel was requested: the task ends `cancelled` now.
    CancelRequested,
    /// Held and running past its deadline: the attempt fails with [`TIMEOUT_MESSAGE`].
    PastDeadline,
    /// This lease held it and it was cancelled meanwhile: answered `cancelled`.
    Cancelled,
    /// Not (or no longer) held by this lease: nothing changes.
    Lost,
}

/// Reads `t` (its row as locked; `stored` the nonce in its `lease_token` column) for a call
/// made with `token` at `now`.
pub fn check(t: &Task, stored: Option<u128>, token: &str, now: Timestamp) -> LeaseCheck {
    match (holds(stored, token, t.id), t.state) {
        (true, TaskState::Running) if t.cancel_requested_at.is_some() => {
            LeaseCheck::CancelRequested
        }
        (true, TaskState::Running) if past_deadline(t, now) => LeaseCheck::PastDeadline,
        (true, TaskState::Running) => LeaseCheck::Held,
        (true, TaskState::Cancelled) => LeaseCheck::Cancelled,
        _ => LeaseCheck::Lost,
    }
}

/// Which task an outcome is about: enough to label metrics without another read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskLabels {
    /// Queue.
    pub queue: String,
    /// Kind.
    pub kind: String,
    /// When the attempt started.
    pub attempted_at: Option<Timestamp>,
}

impl TaskLabels {
    /// The labels of `t`.
    pub fn of(t: &Task) -> Self {
        TaskLabels {
            queue: t.queue.clone(),
            kind: t.kind.clone(),
            attempted_at: t.attempted_at,
        }
    }
}

/// What happened to one item of a complete/fail call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum LeaseOutcome {
    /// Applied; the task is now in `state`, next start `run_at`.
    Ok {
        /// New state.
        state: TaskState,
        /// Next start (retryable) or the old run_at.
        run_at: Timestamp,
        /// The task's queue, kind and attempt start (for metrics; not part of the API answer).
        #[serde(skip)]
        labels: TaskLabels,
    },
    /// The lease is stale; nothing changed.
    LeaseLost,
    /// A cancel was requested: the task is now cancelled.
    Cancelled,
    /// The attempt ran past its timeout: it was failed with `timeout` instead.
    TimedOut,
    /// No such task.
    NotFound,
}

impl LeaseCheck {
    /// The answer to a call refused for this reading ([`LeaseCheck::Cancelled`] and
    /// [`LeaseCheck::CancelRequested`] answer `Cancelled`, [`LeaseCheck::PastDeadline`]
    /// `TimedOut`, the rest `LeaseLost`).
    pub fn refusal(self) -> LeaseOutcome {
        match self {
            LeaseCheck::Cancelled | LeaseCheck::CancelRequested => LeaseOutcome::Cancelled,
            LeaseCheck::PastDeadline => LeaseOutcome::TimedOut,
            LeaseCheck::Held | LeaseCheck::Lost => LeaseOutcome::LeaseLost,
        }
    }
}

/// What a failed attempt writes on its task, whatever failed it (the worker, its deadline, a
/// rescue, a zombie collection): its new state, next start and end, the `errors` entry and the
/// run log entry. Computed here; every backend writes these values as they are.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The task.
    pub id: i64,
    /// The attempt that failed (a rescue applies only while the task is still at it).
    pub attempt: i32,
    /// `retryable`, `discarded` or `cancelled`.
    pub state: TaskState,
    /// The next start (retryable), else the task's run_at unchanged.
    pub run_at: Timestamp,
    /// When it finished (discarded, cancelled), else none.
    pub finished_at: Option<Timestamp>,
    /// Appended to `errors`.
    pub error: TaskError,
    /// Appended to the run log.
    pub run: StoredRun,
    /// For metrics and wake-ups.
    pub labels: TaskLabels,
}

impl Failure {
    /// The failure of `t`'s attempt (its row as locked) with `message`, ended as the fail rule
    /// decided (`d`). `worker`: who reports it (else the lease's holder). The run log's outcome
    /// is `timeout` or `lost` for [`TIMEOUT_MESSAGE`] and [`LOST_MESSAGE`], `cancelled` when
    /// the decision is to cancel, else `failed`.
    pub fn new(
        t: &Task,
        d: FailDecision,
        message: &str,
        worker: Option<&str>,
        now: Timestamp,
    ) -> Failure {
        let (state, run_at, finished_at) = match d {
            FailDecision::Retry { run_at } => (TaskState::Retryable, run_at, None),
            FailDecision::Discard => (TaskState::Discarded, t.run_at, Some(now)),
            FailDecision::Cancel => (TaskState::Cancelled, t.run_at, Some(now)),
        };
        let worker = worker.map(str::to_string).or_else(|| t.worker.clone());
        let outcome = match (d, message) {
            (FailDecision::Cancel, _) => RunOutcome::Cancelled,
            (_, TIMEOUT_MESSAGE) => RunOutcome::Timeout,
            (_, LOST_MESSAGE) => RunOutcome::Lost,
            _ => RunOutcome::Failed,
        };
        Failure {
            id: t.id,
            attempt: t.attempt,
            state,
            run_at,
            finished_at,
            error: TaskError {
                attempt: t.attempt,
                at: now,
                worker: worker.clone(),
                message: message.to_string(),
                duration_ms: t
                    .attempted_at
                    .map(|a| crate::duration::to_ms(crate::time::since(now, a))),
            },
            run: StoredRun {
                attempt: t.attempt,
                stage: t.stage.clone(),
                started_us: t.attempted_at.map(|a| a.timestamp_micros()),
                finished_us: now.timestamp_micros(),
                worker,
                node: t.attempt_node.clone(),
                outcome,
                message: Some(message.to_string()),
            },
            labels: TaskLabels::of(t),
        }
    }

    /// The failure of a held attempt past its deadline ([`LeaseCheck::PastDeadline`]).
    pub fn timed_out(t: &Task, rule: FailRule, now: Timestamp) -> Failure {
        Failure::new(t, rule(t, now, None, false), TIMEOUT_MESSAGE, None, now)
    }

    /// The rescue of `t`, a running task whose lease ran out: `timeout` when it is also past
    /// its deadline, else `lease expired`; retried or discarded by `rule`.
    pub fn rescue(t: &Task, rule: FailRule, now: Timestamp) -> Failure {
        let why = if past_deadline(t, now) {
            TIMEOUT_MESSAGE
        } else {
            LOST_MESSAGE
        };
        Failure::new(t, rule(t, now, None, false), why, None, now)
    }

    /// The answer to the worker whose call failed the attempt.
    pub fn outcome(&self) -> LeaseOutcome {
        match self.state {
            TaskState::Cancelled => LeaseOutcome::Cancelled,
            state => LeaseOutcome::Ok {
                state,
                run_at: self.run_at,
                labels: self.labels.clone(),
            },
        }
    }

    /// The `errors` entry as JSON.
    pub fn error_json(&self) -> serde_json::Value {
        serde_json::to_value(&self.error).unwrap_or_default()
    }

    /// The run log entry as JSON text.
    pub fn run_json(&self) -> String {
        serde_json::to_string(&self.run).unwrap_or_default()
    }
}

/// One completion reported under a lease (an item of a complete batch).
#[derive(Debug, Clone)]
pub struct TaskComplete {
    /// Task id.
    pub id: i64,
    /// Lease token.
    pub token: String,
    /// Result to store.
    pub result: Value,
    /// Hand the task on to this stage instead of finishing it.
    pub next: Option<NextStage>,
}

/// One failure reported under a lease (an item of a fail batch).
#[derive(Debug, Clone)]
pub struct TaskFail {
    /// Task id.
    pub id: i64,
    /// Lease token.
    pub token: String,
    /// Error message (kept in `errors`).
    pub error: String,
    /// Retry after this delay instead of the backoff.
    pub retry_in: Option<Duration>,
    /// Do not retry.
    pub permanent: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::standard_fail_rule;
    use crate::{NewTask, TaskDefaults};
    use chrono::TimeZone;
    use proptest::prelude::*;

    #[test]
    fn heartbeat_every_is_a_third_of_the_lease_with_a_floor() {
        assert_eq!(
            heartbeat_every(Duration::from_secs(30)),
            Duration::from_secs(10)
        );
        assert_eq!(
            heartbeat_every(Duration::from_secs(1)),
            Duration::from_millis(333) + Duration::from_nanos(333_333)
        );
        assert_eq!(heartbeat_every(Duration::ZERO), MIN_HEARTBEAT_EVERY);
        assert_eq!(
            heartbeat_every(Duration::from_millis(200)),
            MIN_HEARTBEAT_EVERY
        );
        assert_eq!(heartbeat_every(Duration::MAX), Duration::MAX / 3);
    }

    proptest! {
        #[test]
        fn heartbeat_every_comes_before_the_lease_runs_out(ms in 0u64..u64::MAX / 2) {
            let lease = Duration::from_millis(ms);
            let every = heartbeat_every(lease);
            prop_assert!(every >= MIN_HEARTBEAT_EVERY);
            if lease >= MIN_HEARTBEAT_EVERY * HEARTBEATS_PER_LEASE {
                prop_assert!(every * HEARTBEATS_PER_LEASE <= lease);
            }
        }
    }

    fn t0() -> Timestamp {
        chrono::Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
    }

    fn running(timeout_ms: u64, process: bool, attempt: i32, max: i32) -> Task {
        let mut n = NewTask::new("k", serde_json::Value::Null);
        n.timeout = Some(Duration::from_millis(timeout_ms.max(1)));
        n.max_attempts = Some(max);
        let mut t = n
            .resolve(None, &TaskDefaults::default(), t0())
            .unwrap()
            .into_task(7, t0());
        t.state = TaskState::Running;
        t.attempt = attempt;
        t.attempted_at = Some(t0());
        if process {
            t.process = Some(crate::ProcessRef {
                namespace: "ns".into(),
                id: "p".into(),
            });
        }
        t
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn claim_ids_name_a_nonce() {
        let n = 0x67e5_5044_10b1_426f_9247_bb68_0e5f_e0c8_u128;
        assert_eq!(
            LeaseToken::claim_nonce("67e55044-10b1-426f-9247-bb680e5fe0c8"),
            Some(n)
        );
        assert_eq!(
            LeaseToken::claim_nonce("67E5504410B1426F9247BB680E5FE0C8"),
            Some(n)
        );
        for bad in [
            "",
            "67e55044",
            "+7e5504410b1426f9247bb680e5fe0c8",
            "67e55044-10b1-426f-9247_bb680e5fe0c8",
            "67e5504410b1-426f-9247-bb680e5fe0c8-",
            "g7e5504410b1426f9247bb680e5fe0c8",
            "67e5504410b1426f9247bb680e5fe0c\0",
        ] {
            assert_eq!(LeaseToken::claim_nonce(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn token_round_trips_and_names_its_task() {
        let tok = LeaseToken {
            nonce: 0xabc,
            id: 42,
        };
        let s = tok.to_string();
        assert_eq!(s.len(), 48);
        assert_eq!(LeaseToken::parse(&s), Some(tok));
        assert_eq!(LeaseToken::nonce_for(&s, 42), Some(0xabc));
        assert_eq!(LeaseToken::nonce_for(&s, 43), None);
        assert_eq!(LeaseToken::parse(""), None);
        // The formats before issue 22 (a uuid; SQLite's 32 hex digits) hold nothing after an
        // upgrade: their attempts end as lost leases (docs: operations/upgrading.md).
        assert_eq!(
            LeaseToken::parse("67e55044-10b1-426f-9247-bb680e5fe0c8"),
            None
        );
        assert_eq!(LeaseToken::parse("67e5504410b1426f9247bb680e5fe0c8"), None);
        assert_eq!(LeaseToken::parse(&s[..47]), None);
        assert_eq!(LeaseToken::parse(&format!("{}g", &s[..47])), None);
        assert_eq!(nonce_from_hex(&nonce_hex(u128::MAX)), Some(u128::MAX));
        assert_eq!(nonce_from_hex("12"), None);
    }

    #[test]
    fn check_reads_each_case() {
        let t = running(1000, false, 1, 3);
        let tok = LeaseToken { nonce: 5, id: 7 }.to_string();
        assert_eq!(check(&t, Some(5), &tok, t0()), LeaseCheck::Held);
        assert_eq!(check(&t, Some(6), &tok, t0()), LeaseCheck::Lost);
        assert_eq!(check(&t, None, &tok, t0()), LeaseCheck::Lost);
        assert_eq!(check(&t, Some(5), "junk", t0()), LeaseCheck::Lost);
        let late = crate::time::add_ms(t0(), 1000);
        assert_eq!(check(&t, Some(5), &tok, late), LeaseCheck::PastDeadline);
        let mut c = t.clone();
        c.cancel_requested_at = Some(t0());
        assert_eq!(check(&c, Some(5), &tok, late), LeaseCheck::CancelRequested);
        c.state = TaskState::Cancelled;
        assert_eq!(check(&c, Some(5), &tok, late), LeaseCheck::Cancelled);
        c.state = TaskState::Completed;
        assert_eq!(check(&c, Some(5), &tok, late), LeaseCheck::Lost);
        // A process step has no deadline.
        let p = running(1000, true, 1, 3);
        assert_eq!(check(&p, Some(5), &tok, late), LeaseCheck::Held);
    }

    #[test]
    fn failures_map_decisions_to_states() {
        let t = running(1000, false, 1, 3);
        let now = crate::time::add_ms(t0(), 250);
        let at = crate::time::add_ms(now, 9000);
        let f = Failure::new(
            &t,
            FailDecision::Retry { run_at: at },
            "boom",
            Some("w"),
            now,
        );
        assert_eq!(
            (f.state, f.run_at, f.finished_at),
            (TaskState::Retryable, at, None)
        );
        assert_eq!(f.run.outcome, RunOutcome::Failed);
        assert_eq!(f.error.duration_ms, Some(250));
        assert_eq!(f.error.worker.as_deref(), Some("w"));
        let f = Failure::new(&t, FailDecision::Discard, TIMEOUT_MESSAGE, None, now);
        assert_eq!(
            (f.state, f.finished_at, f.run.outcome),
            (TaskState::Discarded, Some(now), RunOutcome::Timeout)
        );
        assert!(matches!(
            f.outcome(),
            LeaseOutcome::Ok {
                state: TaskState::Discarded,
                ..
            }
        ));
        let f = Failure::new(&t, FailDecision::Cancel, LOST_MESSAGE, None, now);
        assert_eq!(
            (f.state, f.run.outcome),
            (TaskState::Cancelled, RunOutcome::Cancelled)
        );
        assert_eq!(f.outcome(), LeaseOutcome::Cancelled);
    }

    #[test]
    fn rescue_names_timeout_past_the_deadline_else_lease_expired() {
        let t = running(10_000, false, 1, 3);
        let early = crate::time::add_ms(t0(), 5000);
        let late = crate::time::add_ms(t0(), 10000);
        assert_eq!(
            Failure::rescue(&t, standard_fail_rule, early).error.message,
            LOST_MESSAGE
        );
        assert_eq!(
            Failure::rescue(&t, standard_fail_rule, late).error.message,
            TIMEOUT_MESSAGE
        );
        let p = running(10_000, true, 1, 3);
        assert_eq!(
            Failure::rescue(&p, standard_fail_rule, late).error.message,
            LOST_MESSAGE
        );
    }

    proptest! {
        /// A lease never ends past the attempt's deadline, never before `now`, and is as
        /// long as asked when the deadline allows.
        #[test]
        fn leases_end_within_the_deadline(
            timeout in 1u64..10_000_000,
            lease in proptest::option::of(0u64..20_000_000),
            elapsed in 0u64..20_000_000,
            process: bool,
        ) {
            let now = crate::time::add_ms(t0(), elapsed as i64);
            let deadline = deadline_of(t0(), ms(timeout), process);
            let asked = lease.map(ms).unwrap_or(ms(timeout));
            let end = lease_expiry(now, asked, deadline);
            prop_assert!(end >= now);
            prop_assert!(end <= crate::time::add(now, asked));
            match deadline {
                Some(d) => {
                    prop_assert!(end <= d.max(now));
                    if crate::time::add(now, asked) <= d {
                        prop_assert_eq!(end, crate::time::add(now, asked));
                    }
                }
                None => prop_assert_eq!(end, crate::time::add(now, asked)),
            }
            let c = claim_lease(t0(), lease.map(ms), ms(timeout), process);
            prop_assert_eq!(c.deadline_at.is_none(), process);
            prop_assert!(c.expires_at <= c.deadline_at.unwrap_or(c.expires_at));
        }

        /// A token reads back as written, and only for its own task.
        #[test]
        fn tokens_round_trip(nonce: u128, id in 1i64..i64::MAX, other in 1i64..i64::MAX) {
            let s = LeaseToken { nonce, id }.to_string();
            prop_assert_eq!(LeaseToken::parse(&s), Some(LeaseToken { nonce, id }));
            prop_assert_eq!(LeaseToken::nonce_for(&s, other).is_some(), other == id);
        }

        /// Past the deadline a held, uncancelled call is always `PastDeadline`, before it
        /// always `Held`; a wrong nonce is always `Lost`; process steps never time out.
        #[test]
        fn check_agrees_with_the_deadline(
            timeout in 1u64..1_000_000,
            elapsed in 0u64..2_000_000,
            nonce: u128,
            wrong: u128,
            process: bool,
        ) {
            let t = running(timeout, process, 1, 3);
            let now = crate::time::add_ms(t0(), elapsed as i64);
            let tok = LeaseToken { nonce, id: t.id }.to_string();
            let want = if !process && elapsed >= timeout { LeaseCheck::PastDeadline } else { LeaseCheck::Held };
            prop_assert_eq!(check(&t, Some(nonce), &tok, now), want);
            if wrong != nonce {
                prop_assert_eq!(check(&t, Some(wrong), &tok, now), LeaseCheck::Lost);
            }
        }

        /// Every decision maps to one state: retryable keeps the attempt's next start and no
        /// end, discarded and cancelled end now; the outcome says the same.
        #[test]
        fn failure_states_follow_the_decision(
            attempt in 1i32..50,
            max in 1i32..50,
            elapsed in 0u64..100_000,
            retry_in in proptest::option::of(0u64..100_000),
            permanent: bool,
            cancel: bool,
        ) {
            let mut t = running(60_000, false, attempt, max);
            if cancel { t.cancel_requested_at = Some(t0()); }
            let now = crate::time::add_ms(t0(), elapsed as i64);
            let d = standard_fail_rule(&t, now, retry_in.map(ms), permanent);
            let f = Failure::new(&t, d, "x", None, now);
            match f.state {
                TaskState::Retryable => {
                    prop_assert!(!cancel && !permanent && attempt < max);
                    prop_assert!(f.finished_at.is_none() && f.run_at >= now);
                }
                TaskState::Discarded => prop_assert!(!cancel && (permanent || attempt >= max)),
                TaskState::Cancelled => prop_assert!(cancel),
                s => prop_assert!(false, "unexpected state {:?}", s),
            }
            prop_assert_eq!(f.finished_at.is_some(), f.state != TaskState::Retryable);
            prop_assert_eq!(f.error.attempt, attempt);
            prop_assert_eq!(matches!(f.outcome(), LeaseOutcome::Cancelled), cancel);
        }
    }
}
