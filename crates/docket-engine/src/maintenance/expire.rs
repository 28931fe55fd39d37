//! Expire (node-daemons' finish_at, pg_task's active): a task not started by its
//! `expires_at` is discarded.

use crate::{Engine, EngineError};
use docket_core::Timestamp;

/// Discards every waiting task past its `expires_at`, in batches.
///
/// # Errors
/// Store errors.
pub async fn expire(engine: &Engine, now: Timestamp) -> Result<u64, EngineError> {
    let mut expired = 0;
    loop {
        let n = engine
            .store
            .task_expire(docket_store::TaskExpireParams {
                now,
                limit: engine.config.maintenance_batch,
            })
            .await?;
        expired += n;
        if (n as i64) < engine.config.maintenance_batch {
            return Ok(expired);
        }
    }
}
