//! Promote: scheduled and retryable tasks whose `run_at` has come become available.

use crate::{Engine, EngineError};
use docket_core::Timestamp;

/// Promotes every due task (in batches), waking local claimers of their queues.
///
/// # Errors
/// Store errors.
pub async fn promote(engine: &Engine, now: Timestamp) -> Result<u64, EngineError> {
    let mut total = 0;
    let t0 = std::time::Instant::now();
    loop {
        let p = engine
            .store
            .task_promote(docket_store::TaskPromoteParams {
                now,
                limit: engine.config.maintenance_batch,
            })
            .await?;
        total += p.count;
        for q in &p.queues {
            engine.waker.wake(q);
        }
        if (p.count as i64) < engine.config.maintenance_batch {
            if total > 0 {
                ::metrics::histogram!(crate::metrics::TIMERS_SCANNING, "namespace" => "*")
                    .record(crate::metrics::ms_since(t0));
            }
            return Ok(total);
        }
    }
}
