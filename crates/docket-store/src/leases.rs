//! Claims and the calls made under a lease: heartbeat, complete, fail ([`LeaseStore`]), and the
//! claim's room counting, written once for every backend. What a lease-checked call does is
//! `docket_core::lease`'s.

use crate::Result;
use async_trait::async_trait;
pub use docket_core::lease::TaskComplete;
pub use docket_core::lease::TaskFail;
use docket_core::{Task, Timestamp};
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;

/// Params of [`LeaseStore::task_claim`].
#[derive(Debug, Clone)]
pub struct TaskClaimParams {
    /// Queue to claim from.
    pub queue: String,
    /// Who claims (recorded in `worker` and in error entries).
    pub worker: String,
    /// Name of the claiming node: tasks with another `node` are skipped.
    pub node: String,
    /// At most this many.
    pub limit: i64,
    /// Lease duration; default each task's timeout.
    pub lease: Option<Duration>,
    /// Only tasks of these kinds (asyncflow's hold by task type); None: any kind.
    pub kinds: Option<Vec<String>>,
    /// Only tasks at these stages (asyncflow's task_stage); None: any stage.
    pub stages: Option<Vec<String>>,
    /// The claiming worker's labels (issue 43, `docket_core::labels`): tasks that require or
    /// (still) prefer labels it lacks are skipped. Empty: only tasks without affinity.
    pub labels: docket_core::labels::Labels,
    /// Now.
    pub now: Timestamp,
    /// The claim's nonce (its lease tokens' first half; `api::ClaimRequest::claim_id`), so
    /// that what it took can be released by it ([`LeaseStore::task_release`]); None: a
    /// random one.
    pub nonce: Option<u128>,
}

/// What [`LeaseStore::task_release`] hands back.
#[derive(Debug, Clone, Copy)]
pub enum Release<'a> {
    /// A claim whose answer its worker never got: marks the claim released (so a claim that
    /// commits later is released by its own check, [`Release::IfClaimReleased`]), then
    /// releases every task it holds.
    Claim,
    /// These tasks, held under the nonce and not started (a worker's stop, a claim whose
    /// connection closed before its answer went out).
    Tasks(&'a [i64]),
    /// The check right after a claim: these tasks, only if the claim was marked released
    /// meanwhile — a release that arrived before the claim committed.
    IfClaimReleased(&'a [i64]),
}

/// Params of [`LeaseStore::task_release`].
#[derive(Debug, Clone, Copy)]
pub struct TaskReleaseParams<'a> {
    /// The claim's nonce.
    pub nonce: u128,
    /// What to release.
    pub release: Release<'a>,
    /// Only tasks of this queue (the caller's token may reach no other) [any].
    pub queue: Option<&'a str>,
    /// Now (a release mark is kept an hour: longer than any claim takes).
    pub now: Timestamp,
}

/// A task a release handed back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Released {
    /// Task id.
    pub id: i64,
    /// Its queue (to wake its claimers).
    pub queue: String,
}

/// Params of [`LeaseStore::task_heartbeat`].
#[derive(Debug, Clone)]
pub struct TaskHeartbeatParams {
    /// Task id.
    pub id: i64,
    /// Lease token from the claim.
    pub token: String,
    /// New progress, if any.
    pub progress: Option<Value>,
    /// New lease duration; default the attempt's lease duration.
    pub lease: Option<Duration>,
    /// Now.
    pub now: Timestamp,
    /// How a failed attempt ends (the engine's rule; the store only applies it).
    pub fail_rule: docket_core::task::FailRule,
}

pub use docket_core::task::NextStage;

pub use docket_core::lease::{Failure, LeaseOutcome, TaskLabels};

/// Claims and the calls made under a lease: heartbeat, complete, fail.
#[async_trait]
pub trait LeaseStore: Send + Sync {
    /// Claims up to `limit` available tasks of a queue in claim order (priority desc, run_at,
    /// id), skipping tasks for other nodes, expired ones, keys at their concurrency limit, and
    /// everything in a paused queue or beyond the queue's concurrency limit. Each returned task
    /// is `running` with a fresh lease in `lease`.
    ///
    /// # Errors
    /// Database failure; nothing is claimed then.
    async fn task_claim(&self, p: TaskClaimParams) -> Result<Vec<Task>>;

    /// Extends a lease and records progress.
    ///
    /// # Errors
    /// [`StoreError::LeaseLost`] for a stale token, [`StoreError::Cancelled`] when a cancel was
    /// requested (the task is then cancelled), [`StoreError::NotFound`].
    async fn task_heartbeat(&self, p: TaskHeartbeatParams) -> Result<Task>;

    /// Completes many tasks in one statement. One outcome per item, in order.
    ///
    /// # Errors
    /// Database failure (then nothing changed).
    async fn task_complete_many(&self, p: TaskCompleteManyParams<'_>) -> Result<Vec<LeaseOutcome>>;

    /// Fails many attempts: each is retried after its backoff (or `retry_in`), or discarded when
    /// permanent, out of attempts or past expiry. One outcome per item, in order.
    ///
    /// # Errors
    /// Database failure (then nothing changed).
    async fn task_fail_many(&self, p: TaskFailManyParams<'_>) -> Result<Vec<LeaseOutcome>>;

    /// Hands back running tasks held under a claim's nonce that were never started: each is
    /// `available` again at once, its attempt not counted (`attempt` one less, no run-log or
    /// `errors` entry, the lease cleared). Tasks finished, failed or claimed anew meanwhile
    /// are left alone. Rate-limit room the claim used is not given back.
    ///
    /// # Errors
    /// Database failure; nothing is released then (a [`Release::Claim`]'s mark may stay).
    async fn task_release(&self, p: TaskReleaseParams<'_>) -> Result<Vec<Released>>;

    /// The lease token of task `id` while it runs (None otherwise): for protocols without
    /// leases (asyncflow's compat routes, whose workers name a held task by its id alone).
    ///
    /// # Errors
    /// Store failure.
    async fn task_lease_token(&self, id: i64) -> Result<Option<String>>;
}

/// Params of [`LeaseStore::task_complete_many`].
#[derive(Debug, Clone)]
pub struct TaskCompleteManyParams<'a> {
    /// The leases and what to record, one per task.
    pub items: &'a [TaskComplete],
    /// The current time (the engine's clock).
    pub now: Timestamp,
    /// How a failed attempt ends (the engine's rule; the store only applies it).
    pub fail_rule: docket_core::task::FailRule,
}

/// Params of [`LeaseStore::task_fail_many`].
#[derive(Debug, Clone)]
pub struct TaskFailManyParams<'a> {
    /// The leases and what to record, one per task.
    pub items: &'a [TaskFail],
    /// The worker reporting, when it is not the lease's own.
    pub worker: Option<&'a str>,
    /// The current time (the engine's clock).
    pub now: Timestamp,
    /// How a failed attempt ends (the engine's rule; the store only applies it).
    pub fail_rule: docket_core::task::FailRule,
}

/// A task a claim may take: its id and concurrency key with the key's limit (default 1), and
/// what its lease depends on (its timeout, whether it is a process step).
#[derive(Debug, Clone)]
pub(crate) struct ClaimCandidate {
    pub id: i64,
    pub key: Option<(String, i32)>,
    /// Its rate limit key (`docket_core::rate_limit`).
    pub rate: Option<String>,
    pub timeout_ms: i64,
    pub process: bool,
}

impl ClaimCandidate {
    /// The lease a claim at `now` asking for `lease` gives it ([`docket_core::lease::claim_lease`]).
    pub(crate) fn lease(
        &self,
        now: Timestamp,
        lease: Option<Duration>,
    ) -> docket_core::lease::ClaimLease {
        let timeout = Duration::from_millis(u64::try_from(self.timeout_ms).unwrap_or(0));
        docket_core::lease::claim_lease(now, lease, timeout, self.process)
    }
}

/// What a claim writes, as columns: ids, lease lengths (ms), lease ends and deadlines of the
/// picked candidates, in order.
pub(crate) struct ClaimColumns {
    pub ids: Vec<i64>,
    pub lease_ms: Vec<i64>,
    pub expires_at: Vec<Timestamp>,
    pub deadline_at: Vec<Option<Timestamp>>,
}

impl ClaimColumns {
    /// The leases of `picked` for a claim at `now` asking for `lease`.
    pub(crate) fn of(picked: &[&ClaimCandidate], now: Timestamp, lease: Option<Duration>) -> Self {
        let mut c = ClaimColumns {
            ids: Vec::with_capacity(picked.len()),
            lease_ms: Vec::with_capacity(picked.len()),
            expires_at: Vec::with_capacity(picked.len()),
            deadline_at: Vec::with_capacity(picked.len()),
        };
        for p in picked {
            let l = p.lease(now, lease);
            c.ids.push(p.id);
            c.lease_ms.push(l.lease_ms);
            c.expires_at.push(l.expires_at);
            c.deadline_at.push(l.deadline_at);
        }
        c
    }
}

/// The distinct concurrency keys among `cands`, sorted (so claimers lock them in one order
/// and never wait on each other in opposite orders), each with its limit.
pub(crate) fn claim_keys(cands: &[ClaimCandidate]) -> Vec<(String, i32)> {
    let mut keys: Vec<(String, i32)> = cands.iter().filter_map(|c| c.key.clone()).collect();
    keys.sort();
    keys.dedup_by(|a, b| a.0 == b.0);
    keys
}

/// Which candidates (in claim order) a claim takes: at most `room` (the queue's free slots),
/// of each key at most the slots `key_room` counts as free (running tasks of the key
/// subtracted from its limit), and of each rate limit key at most what `rate_room` admits
/// (keys absent from it are unlimited). The same rule on every backend; each backend counts
/// `room`, `key_room` and `rate_room` under its own locks.
pub(crate) fn claim_pick<'c>(
    cands: &'c [ClaimCandidate],
    room: usize,
    mut key_room: HashMap<String, i64>,
    rate_room: &HashMap<String, i64>,
) -> Vec<&'c ClaimCandidate> {
    let mut rate_left = rate_room.clone();
    let mut ids = Vec::with_capacity(cands.len().min(room));
    for c in cands {
        if ids.len() >= room {
            break;
        }
        if let Some(k) = &c.rate {
            if rate_left.get(k).is_some_and(|n| *n <= 0) {
                continue;
            }
        }
        if let Some((k, _)) = &c.key {
            let left = key_room.entry(k.clone()).or_insert(0);
            if *left <= 0 {
                continue;
            }
            *left -= 1;
        }
        if let Some(n) = c.rate.as_ref().and_then(|k| rate_left.get_mut(k)) {
            *n -= 1;
        }
        ids.push(c);
    }
    ids
}

/// A fair queue's settings as a claim needs them (issue 26 item 4).
#[derive(Debug, Clone, Default)]
pub(crate) struct Fairness {
    /// Partitions' weights (default 1).
    pub weights: std::collections::BTreeMap<String, i32>,
}

impl Fairness {
    fn weight(&self, partition: Option<&str>) -> i64 {
        partition
            .and_then(|p| self.weights.get(p))
            .map_or(1, |w| i64::from(*w).max(1))
    }

    /// How many candidates of one partition, and in all, the fair statement should return
    /// for a claim of `limit`: enough rounds for the heaviest partition, twice over (another
    /// claim may lock some first), at most 20,000 rows.
    pub(crate) fn fetch(&self, limit: i64) -> (i64, i64) {
        let heaviest = self.weights.values().copied().max().unwrap_or(1).max(1);
        let per = limit.saturating_mul(i64::from(heaviest)).clamp(1, 20_000);
        (per, per.saturating_mul(2).min(20_000))
    }

    /// The order a fair claim takes candidates in: round by round, a partition of weight w
    /// giving w tasks per round. `ranks` are each candidate's partition and rank within it
    /// (1 = its first task in claim order), as the statement returned them (by rank, then
    /// claim order, which the stable sort keeps within a round). Indices into `ranks`.
    pub(crate) fn order(&self, ranks: &[(Option<String>, i64)]) -> Vec<usize> {
        let mut idx: Vec<usize> = (0..ranks.len()).collect();
        idx.sort_by_key(|&i| (ranks[i].1 - 1).max(0) / self.weight(ranks[i].0.as_deref()));
        idx
    }
}

/// The answer of a claim on every backend: each task the claim's update returned gets its
/// lease (the claim's `nonce` and the task's id; it ends at `lease_expires_at`), in claim order.
pub(crate) fn claimed(mut tasks: Vec<Task>, nonce: u128, now: Timestamp) -> Vec<Task> {
    for t in &mut tasks {
        t.lease = Some(docket_core::Lease {
            token: docket_core::lease::LeaseToken { nonce, id: t.id }.to_string(),
            expires_at: t.lease_expires_at.unwrap_or(now),
            trace_id: None,
        });
    }
    sort_claim_order(&mut tasks);
    tasks
}

/// Orders claimed tasks as the claim did (priority desc, attempt asc, run_at asc, id asc).
pub(crate) fn sort_claim_order(tasks: &mut [Task]) {
    tasks.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then(a.attempt.cmp(&b.attempt))
            .then(a.run_at.cmp(&b.run_at))
            .then(a.id.cmp(&b.id))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_pick_keeps_queue_and_key_room() {
        let c = |id, key: Option<&str>| ClaimCandidate {
            id,
            key: key.map(|k| (k.to_string(), 2)),
            rate: None,
            timeout_ms: 1000,
            process: false,
        };
        let claim_pick = |c, room, kr| -> Vec<i64> {
            claim_pick(c, room, kr, &HashMap::new())
                .into_iter()
                .map(|c| c.id)
                .collect()
        };
        let cands = vec![
            c(1, Some("a")),
            c(2, Some("a")),
            c(3, Some("a")),
            c(4, None),
            c(5, Some("b")),
            c(6, None),
        ];
        assert_eq!(claim_keys(&cands), vec![("a".into(), 2), ("b".into(), 2)]);
        let room = |a, b| HashMap::from([("a".to_string(), a), ("b".to_string(), b)]);
        assert_eq!(
            claim_pick(&cands, usize::MAX, room(2, 2)),
            vec![1, 2, 4, 5, 6]
        );
        assert_eq!(claim_pick(&cands, 3, room(2, 2)), vec![1, 2, 4]);
        // A key already full (or over: a limit lowered while tasks run) takes nothing.
        assert_eq!(claim_pick(&cands, usize::MAX, room(0, -1)), vec![4, 6]);
        assert_eq!(claim_pick(&cands, 0, room(2, 2)), Vec::<i64>::new());
    }

    #[test]
    fn fair_order_takes_partitions_in_turn_by_weight() {
        let r = |p: &str, rn| (Some(p.to_string()), rn);
        // As the statement returns them: by rank, then claim order.
        let ranks = vec![
            r("a", 1),
            r("b", 1),
            r("c", 1),
            r("a", 2),
            r("b", 2),
            r("a", 3),
            r("a", 4),
        ];
        let plain = Fairness::default();
        assert_eq!(plain.order(&ranks), vec![0, 1, 2, 3, 4, 5, 6]);
        let weighted = Fairness {
            weights: [("a".to_string(), 3)].into(),
        };
        // a takes three per round: a1 b1 c1 a2 a3 | b2 a4.
        assert_eq!(weighted.order(&ranks), vec![0, 1, 2, 3, 5, 4, 6]);
        assert_eq!(weighted.fetch(10), (30, 60));
        assert_eq!(weighted.fetch(10_000), (20_000, 20_000));
        assert_eq!(plain.fetch(0), (1, 2));
    }

    #[test]
    fn claim_pick_keeps_rate_room() {
        let c = |id, key: Option<&str>, rate: Option<&str>| ClaimCandidate {
            id,
            key: key.map(|k| (k.to_string(), 1)),
            rate: rate.map(str::to_string),
            timeout_ms: 1000,
            process: false,
        };
        let cands = vec![
            c(1, None, Some("s:a")),
            c(2, None, Some("s:a")),
            c(3, Some("k"), Some("s:b")),
            c(4, Some("k"), Some("s:b")),
            c(5, None, Some("s:b")),
            c(6, None, Some("unknown")),
            c(7, None, None),
        ];
        let rate = HashMap::from([("s:a".to_string(), 1), ("s:b".to_string(), 2)]);
        let keys = HashMap::from([("k".to_string(), 1)]);
        let ids: Vec<i64> = claim_pick(&cands, usize::MAX, keys, &rate)
            .into_iter()
            .map(|c| c.id)
            .collect();
        // s:a admits one; task 4 is held by its concurrency key, so it does not use up s:b's
        // room and task 5 gets it; keys without a limit are unlimited.
        assert_eq!(ids, vec![1, 3, 5, 6, 7]);
    }
}
