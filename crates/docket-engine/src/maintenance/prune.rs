//! Prune (node-daemons' manager): finished tasks past retention, and old notifications,
//! audit entries and nodes.

use crate::{Engine, EngineError};
use docket_core::Timestamp;
use docket_store::TaskPruneParams;

/// Deletes finished tasks past retention, one small batch at a time.
///
/// # Errors
/// Store errors.
pub async fn prune(engine: &Engine, now: Timestamp) -> Result<u64, EngineError> {
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
pub async fn prune_aux(engine: &Engine, now: Timestamp) -> Result<u64, EngineError> {
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
            let keys = crate::rate_limits::prune_keys(engine, now).await?;
            return Ok(total + keys + prune_runs(engine, now).await?);
        }
        tokio::task::yield_now().await;
    }
}

/// Deletes durable functions' runs finished longer ago than the retention of completed tasks,
/// with their journals and mailboxes, in batches.
///
/// # Errors
/// Store errors.
pub async fn prune_runs(engine: &Engine, now: Timestamp) -> Result<u64, EngineError> {
    let c = &engine.config;
    let before = docket_core::time::sub(now, c.retention_completed);
    let mut total = 0;
    loop {
        let n = engine.store.run_prune(before, c.prune_batch).await?;
        total += n;
        if (n as i64) < c.prune_batch {
            return Ok(total);
        }
        tokio::task::yield_now().await;
    }
}
