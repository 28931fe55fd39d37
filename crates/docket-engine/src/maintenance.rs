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
        let p = engine.store.task_promote(now, BATCH).await?;
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
    let zombies = engine.store.process_collect_zombies(now, BATCH).await?;
    ::metrics::histogram!(crate::metrics::ZOMBIE_COLLECTION, "namespace" => "*")
        .record(crate::metrics::ms_since(t0));
    if zombies > 0 {
        tracing::warn!(zombies, "zombie process tasks collected");
    }
    let mut rescued = zombies;
    loop {
        let labels = engine.store.task_rescue(now, BATCH).await?;
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
        let n = engine.store.task_expire(now, BATCH).await?;
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

/// Runs every step once at `now` (tests drive this with a manual clock).
///
/// # Errors
/// Store errors.
pub async fn pass(engine: &Engine, now: Timestamp) -> Result<Pass, StoreError> {
    let promoted = promote(engine, now).await?;
    let (rescued, expired) = rescue(engine, now).await?;
    let pruned = prune(engine, now).await?;
    let scheduled = crate::schedule::fire_due(engine, now).await?;
    Ok(Pass {
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

/// The maintenance loop of one node, until `cancel`.
pub async fn run(engine: Engine, cancel: CancellationToken) {
    let c = engine.config.clone();
    let started = engine.clock.now();
    let mut next_rescue = tokio::time::Instant::now();
    let mut next_prune = tokio::time::Instant::now() + Duration::from_secs(5);
    let mut next_heartbeat = tokio::time::Instant::now();
    loop {
        let now = tokio::time::Instant::now();
        if now >= next_heartbeat {
            if let Err(e) = engine
                .store
                .node_heartbeat(&node_record(&engine, started))
                .await
            {
                tracing::warn!(error = %e, "node heartbeat failed");
            }
            next_heartbeat = now + c.heartbeat_interval;
        }
        if let Err(e) = crate::schedule::fire_due(&engine, engine.clock.now()).await {
            tracing::warn!(error = %e, "firing schedules failed");
        }
        if let Err(e) = promote(&engine, engine.clock.now()).await {
            tracing::warn!(error = %e, "promoting due tasks failed");
        }
        if now >= next_rescue {
            if let Err(e) = rescue(&engine, engine.clock.now()).await {
                tracing::warn!(error = %e, "rescue failed");
            }
            next_rescue = now + c.rescue_interval;
        }
        if now >= next_prune {
            match prune(&engine, engine.clock.now()).await {
                Ok(n) if n > 0 => tracing::info!(pruned = n, "pruned finished tasks"),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "pruning failed"),
            }
            next_prune = now + c.prune_interval;
        }
        // Sleep until the next due task (so scheduled tasks start on time, not on the next
        // poll), the next periodic step, or a wake-up from a local insert.
        let mut until = next_rescue.min(next_heartbeat).min(next_prune);
        until = until.min(tokio::time::Instant::now() + c.poll_interval);
        if let Ok(Some(due)) = engine.store.schedule_next_due().await {
            let wait = (due - engine.clock.now())
                .to_std()
                .unwrap_or(Duration::ZERO);
            until = until.min(tokio::time::Instant::now() + wait);
        }
        if let Ok(Some(due)) = engine.store.task_next_due().await {
            let wait = (due - engine.clock.now())
                .to_std()
                .unwrap_or(Duration::ZERO);
            until = until.min(tokio::time::Instant::now() + wait);
        }
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = tokio::time::sleep_until(until) => {}
            _ = engine.waker.scheduler_woken() => {}
        }
    }
    if let Err(e) = engine.store.node_stop(&c.node, engine.clock.now()).await {
        tracing::warn!(error = %e, "marking the node stopped failed");
    }
}
