//! The services every node runs (node-daemons' Manager, without a master): promote due tasks,
//! rescue expired leases, discard expired tasks, prune old ones, heartbeat the node registry.
//! Each step works in small `SKIP LOCKED` batches, so any number of nodes can run it at once.

use crate::Engine;
use docket_core::Timestamp;
use docket_store::{NodeRecord, StoreError, TaskPruneParams};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Batch size of promote/rescue/expire steps.
pub const BATCH: i64 = 1000;

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

/// Promotes every due task (in batches), waking local claimers of their queues.
///
/// # Errors
/// Store errors.
pub async fn promote(engine: &Engine, now: Timestamp) -> Result<u64, StoreError> {
    let mut total = 0;
    let t0 = std::time::Instant::now();
    loop {
        let p = engine
            .store
            .task_promote(docket_store::TaskPromoteParams { now, limit: BATCH })
            .await?;
        total += p.count;
        for q in &p.queues {
            engine.waker.wake(q);
        }
        if (p.count as i64) < BATCH {
            if total > 0 {
                ::metrics::histogram!(crate::metrics::TIMERS_SCANNING, "namespace" => "*")
                    .record(crate::metrics::ms_since(t0));
            }
            return Ok(total);
        }
    }
}

/// Rescues expired leases and discards expired tasks.
///
/// # Errors
/// Store errors.
pub async fn rescue(engine: &Engine, now: Timestamp) -> Result<(u64, u64), StoreError> {
    // Process tasks past their lease are zombies (progressor): they break their process
    // instead of being retried.
    let t0 = std::time::Instant::now();
    let zombies = engine
        .store
        .process_collect_zombies(docket_store::ProcessCollectZombiesParams { now, limit: BATCH })
        .await?;
    ::metrics::histogram!(crate::metrics::ZOMBIE_COLLECTION, "namespace" => "*")
        .record(crate::metrics::ms_since(t0));
    if zombies > 0 {
        tracing::warn!(zombies, "zombie process tasks collected");
    }
    let mut rescued = zombies;
    loop {
        let labels = engine
            .store
            .task_rescue(docket_store::TaskRescueParams {
                fail_rule: engine.config.fail_rule,
                now,
                limit: BATCH,
            })
            .await?;
        for l in &labels {
            ::metrics::counter!(crate::metrics::TASKS_RESCUED, "queue" => l.queue.clone(), "kind" => l.kind.clone())
                .increment(1);
        }
        let n = labels.len() as u64;
        rescued += n;
        if (n as i64) < BATCH {
            break;
        }
    }
    if rescued > 0 {
        tracing::warn!(rescued, "rescued tasks whose lease expired");
        // Rescued tasks may be retryable right away (zero backoff).
        engine.waker.wake_scheduler();
    }
    let mut expired = 0;
    loop {
        let n = engine
            .store
            .task_expire(docket_store::TaskExpireParams { now, limit: BATCH })
            .await?;
        expired += n;
        if (n as i64) < BATCH {
            break;
        }
    }
    Ok((rescued, expired))
}

/// Deletes finished tasks past retention, one small batch at a time.
///
/// # Errors
/// Store errors.
pub async fn prune(engine: &Engine, now: Timestamp) -> Result<u64, StoreError> {
    let c = &engine.config;
    let mut total = 0;
    loop {
        let n = engine
            .store
            .task_prune(TaskPruneParams {
                now,
                retention_completed: c.retention_completed,
                retention_failed: c.retention_failed,
                limit: c.prune_batch,
            })
            .await?;
        total += n;
        if (n as i64) < c.prune_batch {
            return Ok(total);
        }
        // Let claimers in between batches.
        tokio::task::yield_now().await;
    }
}

/// Deletes old notifications (delivered), audit entries and stopped/lost nodes, in batches.
///
/// # Errors
/// Store errors.
pub async fn prune_aux(engine: &Engine, now: Timestamp) -> Result<u64, StoreError> {
    let c = &engine.config;
    let mut total = 0;
    loop {
        let p = engine
            .store
            .aux_prune(docket_store::AuxPruneParams {
                now,
                notifications: c.retention_notifications,
                audit: c.retention_audit,
                nodes: c.retention_nodes,
                limit: c.prune_batch,
            })
            .await?;
        total += p.notifications + p.audit + p.nodes;
        if (p.notifications.max(p.audit) as i64) < c.prune_batch {
            return Ok(total);
        }
        tokio::task::yield_now().await;
    }
}

/// Runs every step once at `now` (tests drive this with a manual clock).
///
/// # Errors
/// Store errors.
pub async fn pass(engine: &Engine, now: Timestamp) -> Result<Pass, StoreError> {
    let promoted = promote(engine, now).await?;
    let (rescued, expired) = rescue(engine, now).await?;
    let pruned = prune(engine, now).await?;
    let aux_pruned = prune_aux(engine, now).await?;
    let scheduled = crate::schedule::fire_due(engine, now).await?;
    Ok(Pass {
        aux_pruned,
        scheduled,
        promoted,
        rescued,
        expired,
        pruned,
    })
}

fn node_record(engine: &Engine, started: Timestamp) -> NodeRecord {
    NodeRecord {
        name: engine.config.node.clone(),
        started_at: started,
        heartbeat_at: engine.clock.now(),
        stopped_at: None,
        version: env!("CARGO_PKG_VERSION").to_string(),
        info: serde_json::json!({"pid": std::process::id()}),
    }
}

/// Runs one maintenance step so that neither a store error nor a panic (a bug, or a row no rule
/// foresaw) can end the loop: the failure is logged, counted in
/// [`MAINTENANCE_ERRORS`](crate::metrics::MAINTENANCE_ERRORS) and the step is tried again on the
/// next pass. Returns the step's value when it succeeded.
pub async fn guarded<T, F>(step: &'static str, f: F) -> Option<T>
where
    F: std::future::Future<Output = Result<T, StoreError>>,
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

/// The maintenance loop of one node, until `cancel`. No step's failure ends it (see
/// [`guarded`]); each finished pass is recorded in [`Engine::last_maintenance_pass`], which
/// `/healthz` reads.
pub async fn run(engine: Engine, cancel: CancellationToken) {
    let c = engine.config.clone();
    let started = engine.clock.now();
    let mut next_rescue = tokio::time::Instant::now();
    let mut next_prune = tokio::time::Instant::now() + Duration::from_secs(5);
    let mut next_heartbeat = tokio::time::Instant::now();
    loop {
        let now = tokio::time::Instant::now();
        if now >= next_heartbeat {
            let rec = node_record(&engine, started);
            guarded("heartbeat", engine.store.node_heartbeat(&rec)).await;
            next_heartbeat = now + c.heartbeat_interval;
        }
        guarded(
            "schedule",
            crate::schedule::fire_due(&engine, engine.clock.now()),
        )
        .await;
        guarded("promote", promote(&engine, engine.clock.now())).await;
        if now >= next_rescue {
            guarded("rescue", rescue(&engine, engine.clock.now())).await;
            next_rescue = now + c.rescue_interval;
        }
        if now >= next_prune {
            if let Some(n) = guarded("prune", prune(&engine, engine.clock.now())).await {
                if n > 0 {
                    tracing::info!(pruned = n, "pruned finished tasks");
                }
            }
            if let Some(n) = guarded("prune_aux", prune_aux(&engine, engine.clock.now())).await {
                if n > 0 {
                    tracing::info!(
                        pruned = n,
                        "pruned old notifications, audit entries and nodes"
                    );
                }
            }
            next_prune = now + c.prune_interval;
        }
        // Sleep until the next due task (so scheduled tasks start on time, not on the next
        // poll), the next periodic step, or a wake-up from a local insert.
        let mut until = next_rescue.min(next_heartbeat).min(next_prune);
        until = until.min(tokio::time::Instant::now() + c.poll_interval);
        let dues = guarded("next_due", async {
            Ok([
                engine.store.schedule_next_due().await?,
                engine.store.task_next_due().await?,
            ])
        })
        .await;
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
    if let Err(e) = engine
        .store
        .node_stop(docket_store::NodeStopParams {
            name: &c.node,
            now: engine.clock.now(),
        })
        .await
    {
        tracing::warn!(error = %e, "marking the node stopped failed");
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
            Err(StoreError::Invalid("bad row".into()))
        })
        .await;
        assert_eq!(fails, None);
        assert_eq!(guarded("prune", async { Ok(3u64) }).await, Some(3));
    }
}
