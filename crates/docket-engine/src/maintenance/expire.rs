//! Expire (node-daemons' finish_at, pg_task's active): a task not started by its
//! `expires_at` is discarded.

use super::*;

/// Discards every waiting task past its `expires_at`, in batches.
///
/// # Errors
/// Store errors.
pub async fn expire(engine: &Engine, now: Timestamp) -> Result<u64, StoreError> {
    let mut expired = 0;
    loop {
        let n = engine
            .store
            .task_expire(docket_store::TaskExpireParams { now, limit: BATCH })
            .await?;
        expired += n;
        if (n as i64) < BATCH {
            return Ok(expired);
        }
    }
}
