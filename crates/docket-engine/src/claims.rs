//! What a claim asks for ([`Claim`], taken by [`Engine::claim`]), and handing back what a
//! claim took but nobody will run: a claim whose answer its worker gave up on
//! ([`Engine::release_claim`]) and tasks a worker held but did not start
//! ([`Engine::release_tasks`]). Both count no attempt (issue 37: a graceful stop strands
//! nothing and costs no task an attempt).

use crate::{Engine, EngineError};
use docket_core::lease::LeaseToken;
use docket_store::{Release, Released, TaskReleaseParams};
use std::collections::BTreeMap;
use std::time::Duration;

/// One claim: the engine's side of `docket_core::api::ClaimRequest`.
#[derive(Debug, Clone, Default)]
pub struct Claim {
    /// Queue to claim from.
    pub queue: String,
    /// Who claims (recorded on the tasks).
    pub worker: String,
    /// Only these kinds (asyncflow's hold by task type) [any].
    pub kinds: Option<Vec<String>>,
    /// Only these stages (asyncflow's task_stage) [any].
    pub stages: Option<Vec<String>>,
    /// The worker's labels (issue 43, `docket_core::labels`): a task that requires or still
    /// prefers labels is taken only by a claim that has them [none: tasks without affinity,
    /// and those whose preference ran out].
    pub labels: docket_core::labels::Labels,
    /// At most this many tasks.
    pub limit: i64,
    /// Lease per task [each task's timeout].
    pub lease: Option<Duration>,
    /// Long-poll: how long to wait for a task when none is available [none].
    pub wait: Duration,
    /// While waiting, look at the database at least this often [the queue's
    /// `schedule_interval`, else `poll_interval`]; a process namespace's runner passes its
    /// `call_scan_timeout` (progressor scans calls on their own cadence).
    pub poll: Option<Duration>,
    /// The claim's id, its lease tokens' nonce (`api::ClaimRequest::claim_id`, read with
    /// [`LeaseToken::claim_nonce`]) [a random nonce].
    pub claim_id: Option<u128>,
}

impl Claim {
    /// A claim of up to `limit` tasks of `queue` by `worker`: any kind and stage, each task's
    /// timeout as its lease, no wait; the setters below change that.
    pub fn new(queue: impl Into<String>, worker: impl Into<String>, limit: i64) -> Self {
        Claim {
            queue: queue.into(),
            worker: worker.into(),
            limit,
            ..Claim::default()
        }
    }

    /// Only tasks of these kinds.
    #[must_use]
    pub fn kinds<S: Into<String>>(mut self, kinds: impl IntoIterator<Item = S>) -> Self {
        self.kinds = Some(kinds.into_iter().map(Into::into).collect());
        self
    }

    /// Only tasks at these stages.
    #[must_use]
    pub fn stages<S: Into<String>>(mut self, stages: impl IntoIterator<Item = S>) -> Self {
        self.stages = Some(stages.into_iter().map(Into::into).collect());
        self
    }

    /// The worker's labels (`{"gpu": "a100"}`).
    #[must_use]
    pub fn labels<K: Into<String>, V: Into<String>>(
        mut self,
        labels: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        self.labels = labels
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        self
    }

    /// Lease per task (a `Duration`, or `None`: each task's timeout).
    #[must_use]
    pub fn lease(mut self, lease: impl Into<Option<Duration>>) -> Self {
        self.lease = lease.into();
        self
    }

    /// Long-poll up to `wait` for a task when none is available.
    #[must_use]
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }
}

impl Engine {
    /// Hands back what claim `claim_id` took on `queue` (its worker never got the answer: it
    /// stopped, or the connection was cut): each task still held under it is `available`
    /// again at once, its attempt not counted. The release is recorded first, so a claim
    /// still on its way (on this node or another) hands its tasks back itself when it commits.
    /// Returns the ids handed back now.
    ///
    /// # Errors
    /// Store errors.
    pub async fn release_claim(
        &self,
        queue: &str,
        claim_id: u128,
    ) -> Result<Vec<i64>, EngineError> {
        let back = self
            .store
            .task_release(TaskReleaseParams {
                nonce: claim_id,
                release: Release::Claim,
                queue: Some(queue),
                now: self.clock.now(),
            })
            .await?;
        Ok(self.released(&back))
    }

    /// Hands back tasks held but not started — `(id, lease token)` pairs, a worker's
    /// prefetched tasks at its stop: `available` again at once, the attempt not counted. One
    /// answer per item, in order: whether it was handed back (false: not held by that token —
    /// finished, failed, lost or never claimed).
    ///
    /// # Errors
    /// Store errors (tasks handed back by an earlier group stay handed back).
    pub async fn release_tasks(&self, items: &[(i64, String)]) -> Result<Vec<bool>, EngineError> {
        let mut by_claim: BTreeMap<u128, Vec<i64>> = BTreeMap::new();
        for (id, token) in items {
            if let Some(nonce) = LeaseToken::nonce_for(token, *id) {
                by_claim.entry(nonce).or_default().push(*id);
            }
        }
        let mut back = vec![];
        for (nonce, ids) in by_claim {
            back.extend(
                self.store
                    .task_release(TaskReleaseParams {
                        nonce,
                        release: Release::Tasks(&ids),
                        queue: None,
                        now: self.clock.now(),
                    })
                    .await?,
            );
        }
        let back = self.released(&back);
        Ok(items
            .iter()
            .map(|(id, token)| {
                back.contains(id) && LeaseToken::parse(token).is_some_and(|t| t.id == *id)
            })
            .collect())
    }

    /// Wakes the claimers of what was handed back; its ids.
    fn released(&self, back: &[Released]) -> Vec<i64> {
        let mut queues: Vec<&str> = back.iter().map(|r| r.queue.as_str()).collect();
        queues.sort_unstable();
        queues.dedup();
        for q in queues {
            self.waker.wake(q);
        }
        if !back.is_empty() {
            self.waker.changed();
        }
        back.iter().map(|r| r.id).collect()
    }
}
