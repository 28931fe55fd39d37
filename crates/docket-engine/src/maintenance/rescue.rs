//! Rescue (node-daemons' frozen tasks): a running task whose lease expired is failed with
//! `lease expired` (or `timeout` past its deadline) and retried or discarded by the fail rule.

use super::*;

/// Rescues expired leases (process tasks excepted: see [`super::zombies`]).
///
/// # Errors
/// Store errors.
pub async fn rescue(engine: &Engine, now: Timestamp) -> Result<u64, StoreError> {
    let mut rescued = 0;
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
    Ok(rescued)
}
