//! Zombies (progressor): a process task past its lease broke its process; it is not retried.

use crate::{Engine, EngineError};
use docket_core::Timestamp;

/// Collects zombie process tasks: each is discarded and its process goes to `error`,
/// corrupted by it (the engine's rule, handed to the store).
///
/// # Errors
/// Store errors.
pub async fn zombies(engine: &Engine, now: Timestamp) -> Result<u64, EngineError> {
    let t0 = std::time::Instant::now();
    let n = engine
        .store
        .process_collect_zombies(docket_store::ProcessCollectZombiesParams {
            now,
            limit: engine.config.maintenance_batch,
            fail_rule: |_, _, _, _| docket_core::task::FailDecision::Discard,
            on_give_up: docket_store::ProcessBreak::Break { corrupted: true },
            detail: docket_core::process::ZOMBIE_DETAIL.into(),
        })
        .await?;
    ::metrics::histogram!(crate::metrics::ZOMBIE_COLLECTION, "namespace" => "*")
        .record(crate::metrics::ms_since(t0));
    if n > 0 {
        tracing::warn!(zombies = n, "zombie process tasks collected");
    }
    Ok(n)
}
