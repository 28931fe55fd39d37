//! The services every node runs (node-daemons' Manager, without a master), one small job per
//! file: [`heartbeat`] the node registry, fire due [`schedule`](crate::schedule)s, [`promote`]
//! due tasks, collect [`zombies`], [`rescue`] expired leases, [`expire`] tasks past
//! `expires_at`, [`prune`] old ones, keep the finished tasks' [`counts`], [`rotate`] the ring of task slots. Each works in small `SKIP LOCKED` batches, so any number of
//! nodes can run it at once; [`run`] drives them, each on its own period.

mod counts;
mod expire;
mod heartbeat;
mod promote;
mod prune;
mod rescue;
mod rotate;
mod zombies;

pub use counts::counts;
pub use expire::expire;
pub use heartbeat::heartbeat;
pub use promote::promote;
pub use prune::{prune, prune_aux, prune_runs};
pub use rescue::rescue;
pub use rotate::rotate;
pub(crate) use rotate::RingState;
pub use zombies::zombies;

use crate::Engine;
use crate::EngineError;
use docket_core::Timestamp;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// What one pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pass {
    /// Tasks made available.
    pub promoted: u64,
    /// Expired leases rescued.
    pub rescued: u64,
    /// Tasks discarded for passing expires_at.
    pub expired: u64,
    /// Finished tasks deleted.
    pub pruned: u64,
    /// Notifications, audit entries and nodes deleted by their retention.
    pub aux_pruned: u64,
    /// Tasks enqueued by schedules.
    pub scheduled: u64,
}

/// Runs every job once at `now` (tests drive this with a manual clock).
///
/// # Errors
/// Store errors.
pub async fn pass(engine: &Engine, now: Timestamp) -> Result<Pass, EngineError> {
    let promoted = promote(engine, now).await?;
    let rescued = zombies(engine, now).await? + rescue(engine, now).await?;
    let expired = expire(engine, now).await?;
    let pruned = prune(engine, now).await?;
    let aux_pruned = prune_aux(engine, now).await?;
    let scheduled = crate::schedule::fire_due(engine, now).await?;
    rotate(engine, now).await?;
    counts(engine, now).await?;
    Ok(Pass {
        aux_pruned,
        scheduled,
        promoted,
        rescued,
        expired,
        pruned,
    })
}

/// The jobs, in the order a pass runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Job {
    Heartbeat,
    Schedule,
    Promote,
    Zombies,
    Rescue,
    Expire,
    Prune,
    PruneAux,
    Rotate,
    Counts,
}

impl Job {
    const ALL: [Job; 10] = [
        Job::Heartbeat,
        Job::Schedule,
        Job::Promote,
        Job::Zombies,
        Job::Rescue,
        Job::Expire,
        Job::Prune,
        Job::PruneAux,
        Job::Rotate,
        Job::Counts,
    ];

    fn name(self) -> &'static str {
        match self {
            Job::Heartbeat => "heartbeat",
            Job::Schedule => "schedule",
            Job::Promote => "promote",
            Job::Zombies => "zombies",
            Job::Rescue => "rescue",
            Job::Expire => "expire",
            Job::Prune => "prune",
            Job::PruneAux => "prune_aux",
            Job::Rotate => "rotate",
            Job::Counts => "counts",
        }
    }

    /// (first run after start, period); `None`: every pass (cheap, and a due task or
    /// schedule must start on time).
    fn timing(self, c: &crate::EngineConfig) -> Option<(Duration, Duration)> {
        match self {
            Job::Schedule | Job::Promote => None,
            Job::Heartbeat => Some((Duration::ZERO, c.heartbeat_interval)),
            Job::Zombies | Job::Rescue | Job::Expire => Some((Duration::ZERO, c.rescue_interval)),
            // Pruning waits a little after start: a starting node has more urgent work.
            Job::Prune | Job::PruneAux => Some((Duration::from_secs(5), c.prune_interval)),
            Job::Rotate => Some((Duration::ZERO, c.rotate_interval)),
            Job::Counts => Some((Duration::ZERO, docket_core::counts::ADVANCE_EVERY)),
        }
    }

    async fn run(self, engine: &Engine, started: Timestamp) -> Result<u64, EngineError> {
        let now = engine.clock.now();
        let n = match self {
            Job::Heartbeat => heartbeat(engine, started).await?,
            Job::Schedule => crate::schedule::fire_due(engine, now).await?,
            Job::Promote => promote(engine, now).await?,
            Job::Zombies => zombies(engine, now).await?,
            Job::Rescue => rescue(engine, now).await?,
            Job::Expire => expire(engine, now).await?,
            Job::Prune => {
                let n = prune(engine, now).await?;
                if n > 0 {
                    tracing::info!(pruned = n, "pruned finished tasks");
                }
                n
            }
            Job::Rotate => rotate(engine, now).await?,
            Job::Counts => counts(engine, now).await?,
            Job::PruneAux => {
                let n = prune_aux(engine, now).await?;
                if n > 0 {
                    tracing::info!(
                        pruned = n,
                        "pruned old notifications, audit entries and nodes"
                    );
                }
                n
            }
        };
        Ok(n)
    }
}

/// Runs one maintenance step so that neither a store error nor a panic (a bug, or a row no rule
/// foresaw) can end the loop: the failure is logged, counted in
/// [`MAINTENANCE_ERRORS`](crate::metrics::MAINTENANCE_ERRORS) and the step is tried again on the
/// next pass. Returns the step's value when it succeeded.
pub async fn guarded<T, F>(step: &'static str, f: F) -> Option<T>
where
    F: std::future::Future<Output = Result<T, EngineError>>,
{
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(f).catch_unwind().await {
        Ok(Ok(v)) => Some(v),
        Ok(Err(e)) => {
            tracing::warn!(step, error = %e, "maintenance step failed; retrying next pass");
            ::metrics::counter!(crate::metrics::MAINTENANCE_ERRORS, "step" => step, "error" => "store")
                .increment(1);
            None
        }
        Err(panic) => {
            let msg = crate::worker::panic_message(&*panic);
            tracing::error!(step, panic = %msg, "maintenance step panicked; retrying next pass");
            ::metrics::counter!(crate::metrics::MAINTENANCE_ERRORS, "step" => step, "error" => "panic")
                .increment(1);
            None
        }
    }
}

/// Longest wait, at shutdown, for the node registry to record the node as stopped.
const NODE_STOP_WAIT: Duration = Duration::from_secs(5);

/// The maintenance loop of one node, until `cancel`: each pass runs the jobs that are due. No
/// job's failure ends it (see [`guarded`]); each finished pass is recorded in
/// [`Engine::last_maintenance_pass`], which `/healthz` reads. A shutdown stops it at once, in
/// the middle of a pass if need be.
pub async fn run(engine: Engine, cancel: CancellationToken) {
    let c = engine.config.clone();
    let started = engine.clock.now();
    let start = tokio::time::Instant::now();
    let mut next: Vec<(Job, Option<tokio::time::Instant>)> = Job::ALL
        .iter()
        .map(|j| (*j, j.timing(&c).map(|(first, _)| start + first)))
        .collect();
    'pass: loop {
        for (job, due) in next.iter_mut() {
            let now = tokio::time::Instant::now();
            if due.is_some_and(|d| now < d) {
                continue;
            }
            // A shutdown does not wait for the pass: with the database unreachable each step
            // waits for a connection (30 s), and a pass of them held `docket serve` for minutes
            // after SIGTERM. A step dropped here is its own transaction, rolled back.
            tokio::select! {
                _ = guarded(job.name(), job.run(&engine, started)) => {}
                _ = cancel.cancelled() => break 'pass,
            }
            if let Some((_, every)) = job.timing(&c) {
                *due = Some(now + every);
            }
        }
        // Sleep until the next due task (so scheduled tasks start on time, not on the next
        // poll), the next periodic job, or a wake-up from a local insert.
        let mut until = tokio::time::Instant::now() + c.poll_interval;
        for d in next.iter().filter_map(|(_, d)| *d) {
            until = until.min(d);
        }
        let dues = tokio::select! {
            d = guarded("next_due", async {
                Ok([
                    engine.store.schedule_next_due().await?,
                    engine.store.task_next_due().await?,
                ])
            }) => d,
            _ = cancel.cancelled() => break 'pass,
        };
        for due in dues.into_iter().flatten().flatten() {
            let wait = docket_core::time::since(due, engine.clock.now()).min(c.poll_interval);
            until = until.min(tokio::time::Instant::now() + wait);
        }
        engine.maintenance_passed();
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep_until(until) => {}
            _ = engine.waker.scheduler_woken() => {}
        }
    }
    // Bounded: an unreachable database must not hold the shutdown (the node then shows as
    // lost after three heartbeat periods instead of stopped).
    let stop = engine.store.node_stop(docket_store::NodeStopParams {
        name: &c.node,
        now: engine.clock.now(),
    });
    match tokio::time::timeout(NODE_STOP_WAIT, stop).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "marking the node stopped failed"),
        Err(_) => tracing::warn!("marking the node stopped timed out"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_step_that_panics_or_fails_does_not_end_the_loop() {
        let panics = guarded::<u64, _>("promote", async { panic!("overflow in a bad row") }).await;
        assert_eq!(panics, None);
        let fails = guarded::<u64, _>("rescue", async {
            Err(EngineError::Invalid("bad row".into()))
        })
        .await;
        assert_eq!(fails, None);
        assert_eq!(guarded("prune", async { Ok(3u64) }).await, Some(3));
    }
}
