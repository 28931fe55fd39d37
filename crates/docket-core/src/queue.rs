//! Per-queue settings (asyncflow's t_schedule_cfg, node-daemons' per-worker config) and counts.

use crate::{Backoff, TaskState};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Default retention of completed tasks: 24 h (node-daemons' maxCompleted was 1 h; River keeps 24 h).
pub const DEFAULT_RETENTION_COMPLETED: Duration = Duration::from_secs(24 * 3600);
/// Default retention of discarded and cancelled tasks: 7 days (node-daemons' maxFailed was 3 days).
pub const DEFAULT_RETENTION_FAILED: Duration = Duration::from_secs(7 * 24 * 3600);

/// Most entries of `partition_weights`.
pub const MAX_PARTITION_WEIGHTS: usize = 1000;
/// Largest partition weight.
pub const MAX_PARTITION_WEIGHT: i32 = 100;

/// Largest `schedule_limit` (the largest claim the API takes).
pub const MAX_SCHEDULE_LIMIT: i32 = 10_000;

/// Settings of one queue. JSON shape of `GET/PUT /v1/queues/{queue}`; absent fields mean "the
/// server default". Durations are humantime strings.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueSettings {
    /// No task of a paused queue is claimed.
    #[serde(default)]
    pub paused: bool,
    /// At most this many tasks of the queue run at once, cluster-wide.
    #[serde(default)]
    #[schema(minimum = 1)]
    pub concurrency_limit: Option<i32>,
    /// Most tasks one claim may take, 1..=10,000 (asyncflow `schedule_limit`): a claim asking
    /// for more gets this many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 10000)]
    pub schedule_limit: Option<i32>,
    /// How often an idle claim of this queue looks at the database again, 10 ms..=1 h
    /// (asyncflow `schedule_interval`; default the server's `--poll-interval`). Wake-ups of
    /// new tasks still come at once.
    #[serde(
        default,
        with = "crate::duration::serde_opt",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, example = "10s")]
    pub schedule_interval: Option<Duration>,
    /// Fair claims (issue 26 item 4): claims take from the queue's partitions (tasks'
    /// `partition_key`, one partition for tasks without one) in turn — the first task of each
    /// partition, then the second of each, … — so one tenant's backlog does not starve the
    /// others. Off: claims follow claim order alone (priority, attempt, run_at, id).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fair: bool,
    /// Weights of partitions in fair claims, 1..=100 (default 1): a partition of weight 3
    /// gets three turns per round. At most 1,000 entries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = partition_weights_schema)]
    pub partition_weights: Option<BTreeMap<String, i32>>,
    /// At most this many tasks of one partition run at once, cluster-wide (River Pro's
    /// partitioned concurrency limits): tasks enqueued with a `partition_key` and no
    /// `concurrency_key` get the key `partition:{queue}:{partition_key}` with this limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub partition_limit: Option<i32>,
    /// The rate limit key of tasks enqueued without one (`name` or `name:partition`; see
    /// `PUT /v1/rate-limits/{name}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<String>,
    /// Dead-letter queue (issue 43, pg-boss's `deadLetter`): a task of this queue discarded
    /// after its last attempt is also enqueued there, with `dead_letter_of` naming it and its
    /// errors, in the same transaction ([`crate::dead_letter`]). Not the queue itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$"
    )]
    pub dead_letter: Option<String>,
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

/// The document's schema of `partition_weights`, built from the constants
/// [`QueueSettings::validate`] checks (1..=[`MAX_PARTITION_WEIGHT`] per partition).
fn partition_weights_schema() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
    let weight = ObjectBuilder::new()
        .schema_type(Type::Integer)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int32)))
        .minimum(Some(1))
        .maximum(Some(MAX_PARTITION_WEIGHT));
    ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::SchemaType::from_iter([
            Type::Object,
            Type::Null,
        ]))
        .additional_properties(Some(weight))
        .description(Some(format!(
            "Weights of partitions in fair claims, 1..={MAX_PARTITION_WEIGHT} (default 1): a \
             partition of weight 3 gets three turns per round. At most {MAX_PARTITION_WEIGHTS} \
             entries."
        )))
        .build()
}

impl QueueSettings {
    /// [`QueueSettings::validate`], and that `dead_letter` is not queue `name` itself.
    ///
    /// # Errors
    /// A message naming the field.
    pub fn validate_for(&self, name: &str) -> Result<(), String> {
        self.validate()?;
        if self.dead_letter.as_deref() == Some(name) {
            return Err(format!(
                "dead_letter: queue {name} cannot be its own dead-letter queue"
            ));
        }
        Ok(())
    }

    /// Checks ranges and names.
    ///
    /// # Errors
    /// A message naming the bad field.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(q) = &self.dead_letter {
            crate::task::check_name("dead_letter", q)?;
            if q == crate::bulk::QUEUE {
                return Err(format!("dead_letter: queue {q} is docket's own"));
            }
        }
        if let Some(l) = self.concurrency_limit {
            if l < 1 {
                return Err(format!("concurrency_limit must be at least 1, got {l}"));
            }
        }
        if let Some(k) = &self.rate_limit {
            crate::rate_limit::check_key(k)?;
        }
        if let Some(l) = self.partition_limit {
            if l < 1 {
                return Err(format!("partition_limit must be at least 1, got {l}"));
            }
        }
        if let Some(w) = &self.partition_weights {
            if w.len() > MAX_PARTITION_WEIGHTS {
                return Err(format!(
                    "partition_weights takes at most {MAX_PARTITION_WEIGHTS} partitions, got {}",
                    w.len()
                ));
            }
            for (k, n) in w {
                crate::task::check_name("partition_weights key", k)?;
                if !(1..=MAX_PARTITION_WEIGHT).contains(n) {
                    return Err(format!(
                        "partition_weights[{k:?}] must be within 1..={MAX_PARTITION_WEIGHT}, got {n}"
                    ));
                }
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
        if let Some(l) = self.schedule_limit {
            if !(1..=MAX_SCHEDULE_LIMIT).contains(&l) {
                return Err(format!(
                    "schedule_limit must be within 1..={MAX_SCHEDULE_LIMIT}, got {l}"
                ));
            }
        }
        if let Some(i) = self.schedule_interval {
            if i < Duration::from_millis(10) || i > Duration::from_secs(3600) {
                return Err(format!(
                    "schedule_interval must be within 10ms..=1h, got {}",
                    crate::duration::format(i)
                ));
            }
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
    /// When its settings were first written (asyncflow `create_time`); `null` for a queue
    /// that exists only by its tasks.
    #[serde(default)]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub created_at: Option<crate::Timestamp>,
    /// When its settings last changed (asyncflow `modify_time`).
    #[serde(default)]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub updated_at: Option<crate::Timestamp>,
}
