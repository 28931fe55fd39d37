//! Per-queue settings (asyncflow's t_schedule_cfg, node-daemons' per-worker config) and counts.

use crate::{Backoff, TaskState};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Default retention of completed tasks: 24 h (node-daemons' maxCompleted was 1 h; River keeps 24 h).
pub const DEFAULT_RETENTION_COMPLETED: Duration = Duration::from_secs(24 * 3600);
/// Default retention of discarded and cancelled tasks: 7 days (node-daemons' maxFailed was 3 days).
pub const DEFAULT_RETENTION_FAILED: Duration = Duration::from_secs(7 * 24 * 3600);

/// Settings of one queue. JSON shape of `GET/PUT /v1/queues/{queue}`; absent fields mean "the
/// server default". Durations are humantime strings.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueSettings {
    /// No task of a paused queue is claimed.
    #[serde(default)]
    pub paused: bool,
    /// At most this many tasks of the queue run at once, cluster-wide (asyncflow schedule_limit).
    #[serde(default)]
    #[schema(minimum = 1)]
    pub concurrency_limit: Option<i32>,
    /// max_attempts for tasks enqueued without one (asyncflow max_retry_num).
    #[serde(default)]
    #[schema(minimum = 1)]
    pub max_attempts: Option<i32>,
    /// Backoff for tasks enqueued without one.
    #[serde(default)]
    pub backoff: Option<Backoff>,
    /// Timeout for tasks enqueued without one (asyncflow max_processing_time).
    #[serde(default, with = "crate::duration::serde_opt")]
    #[schema(value_type = Option<String>, example = "30s")]
    pub timeout: Option<Duration>,
    /// How long completed tasks are kept; default 24 h.
    #[serde(default, with = "crate::duration::serde_opt")]
    #[schema(value_type = Option<String>, example = "30s")]
    pub retention_completed: Option<Duration>,
    /// Hide the payload, result and progress of the queue's tasks from read-only tokens and
    /// the dashboard (they show `"***"`); workers still get them when they claim.
    #[serde(default)]
    pub mask_payload: bool,
    /// How long discarded and cancelled tasks are kept; default 7 days.
    #[serde(default, with = "crate::duration::serde_opt")]
    #[schema(value_type = Option<String>, example = "30s")]
    pub retention_failed: Option<Duration>,
}

impl QueueSettings {
    /// Checks ranges.
    ///
    /// # Errors
    /// A message naming the bad field.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(l) = self.concurrency_limit {
            if l < 1 {
                return Err(format!("concurrency_limit must be at least 1, got {l}"));
            }
        }
        if let Some(m) = self.max_attempts {
            if m < 1 {
                return Err(format!("max_attempts must be at least 1, got {m}"));
            }
        }
        if let Some(b) = &self.backoff {
            b.validate()?;
        }
        if let Some(t) = self.timeout {
            crate::duration::check_timeout("timeout", t)?;
        }
        Ok(())
    }
}

/// A queue's settings and its task counts by state. JSON shape of the queue endpoints.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct QueueStats {
    /// Queue name.
    pub name: String,
    /// Its settings.
    pub settings: QueueSettings,
    /// Number of tasks per state (every state present, zero included).
    pub counts: BTreeMap<TaskState, i64>,
}
