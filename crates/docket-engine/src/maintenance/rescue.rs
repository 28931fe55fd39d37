//! Rescue (node-daemons' frozen tasks): a running task whose lease expired is failed with
//! `lease expired` (or `timeout` past its deadline) and retried or discarded by the fail rule.

use crate::{Engine, EngineError};
use docket_core::Timestamp;

/// Rescues expired leases (process tasks excepted: see [`super::zombies`]).
///
/// # Errors
/// Store errors.
pub async fn rescue(engine: &Engine, now: Timestamp) -> Result<u64, EngineError> {
    let mut rescued = 0;
    loop {
        // River's rescuer: read the stuck tasks, decide here (the fail rule, and `timeout`
        // against `lease expired` by the deadline), let the store apply each decision while
        // the task is still as read.
        let stuck = engine
            .store
            .task_rescue_list(docket_store::TaskRescueListParams {
                now,
                limit: engine.config.maintenance_batch,
            })
            .await?;
        let found = stuck.len() as i64;
        let items = stuck
            .iter()
            .map(|t| docket_core::lease::Failure::rescue(t, engine.config.fail_rule, now))
            .collect();
        let labels = engine
            .store
            .task_rescue_many(docket_store::TaskRescueManyParams { items, now })
            .await?;
        for l in &labels {
            ::metrics::counter!(crate::metrics::TASKS_RESCUED, "queue" => l.queue.clone(), "kind" => l.kind.clone())
                .increment(1);
        }
        rescued += labels.len() as u64;
        // A short batch is the last; a full one that another node took first leaves nothing
        // more for this pass either.
        if found < engine.config.maintenance_batch || labels.is_empty() {
            break;
        }
    }
    if rescued > 0 {
        tracing::warn!(rescued, "rescued tasks whose lease expired");
        // Rescued tasks may be retryable right away (zero backoff).
        engine.waker.wake_scheduler();
    }
    Ok(rescued)
}
