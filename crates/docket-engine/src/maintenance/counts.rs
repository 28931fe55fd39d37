//! Counts: moves the kept counts of finished tasks forward, and recounts them from scratch
//! every hour (issue 27; the rule and how exact it is: [`docket_core::counts`]).

use crate::{Engine, EngineError};
use docket_core::Timestamp;
use docket_store::CountsStepParams;

/// One step of the kept counts at `now` (any node; they take turns on the counts' lock).
/// Returns the finished tasks it counted.
///
/// # Errors
/// Store errors.
pub async fn counts(engine: &Engine, now: Timestamp) -> Result<u64, EngineError> {
    let stepped = engine
        .store
        .counts_step(CountsStepParams {
            now,
            recount_every: docket_core::counts::RECOUNT_EVERY,
        })
        .await?;
    Ok(match stepped {
        Some(s) => {
            if s.step.from.is_none() {
                tracing::info!(
                    finished = s.counted,
                    to = %s.step.to,
                    "recounted the finished tasks by queue and state"
                );
            }
            s.counted.max(0) as u64
        }
        None => 0,
    })
}
