//! The task: what a client enqueues ([`NewTask`]), what is stored and returned ([`Task`]), and
//! the rule for a failed attempt ([`Task::fail_decision`]).

use crate::{Backoff, QueueSettings, TaskState, Timestamp};
use chrono::SubsecRound;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

/// The queue a task goes to when none is named.
pub const DEFAULT_QUEUE: &str = "default";
/// Attempts a task gets when neither it nor its queue says (River and graphile-worker use 25).
pub const DEFAULT_MAX_ATTEMPTS: i32 = 25;
/// How long one attempt may run, and the default lease, when neither task nor queue says: 60 s.
pub const DEFAULT_TIMEOUT_MS: i64 = 60_000;
pub use crate::name::{check_name, MAX_NAME_LEN};
/// Most tags a task carries (issue 43; Oban's tags, Temporal's search attributes as strings).
pub const MAX_TAGS: usize = 20;
/// Longest tag (characters).
pub const MAX_TAG_LEN: usize = 128;

/// Checks a task's tags: at most [`MAX_TAGS`], each 1..=[`MAX_TAG_LEN`] characters without
/// control characters, no tag twice.
///
/// # Errors
/// A message naming the bad tag (`tags[i]`) or the count.
pub fn check_tags(tags: &[String]) -> Result<(), String> {
    if tags.len() > MAX_TAGS {
        return Err(format!("tags: at most {MAX_TAGS}, got {}", tags.len()));
    }
    for (i, t) in tags.iter().enumerate() {
        check_name(&format!("tags[{i}]"), t)?;
        if t.chars().count() > MAX_TAG_LEN {
            return Err(format!("tags[{i}]: at most {MAX_TAG_LEN} characters"));
        }
        if tags[..i].contains(t) {
            return Err(format!("tags[{i}]: {t:?} is given twice"));
        }
    }
    Ok(())
}

/// A task to enqueue. JSON shape of `POST /v1/tasks`; every field but `kind` is optional.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewTask {
    /// Queue name; default `"default"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$"
    )]
    pub queue: Option<String>,
    /// Handler/type name (asyncflow's task_type).
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$"
    )]
    pub kind: String,
    /// Any JSON; default null.
    #[serde(default)]
    pub payload: Value,
    /// Higher runs first; default 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Earliest start (RFC 3339); default now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub run_at: Option<Timestamp>,
    /// Start after this delay instead of at `run_at` (humantime, e.g. "5m").
    #[serde(
        default,
        with = "crate::duration::serde_opt",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, example = "30s")]
    pub run_in: Option<Duration>,
    /// A task not started by then is discarded (node-daemons finish_at, pg_task active).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<Timestamp>,
    /// `expires_at` this long after the enqueue (humantime), instead of `expires_at`.
    #[serde(
        default,
        with = "crate::duration::serde_opt",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, example = "1h")]
    pub expires_in: Option<Duration>,
    /// Attempts before the task is discarded; default: the queue's, else 25.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub max_attempts: Option<i32>,
    /// Retry delay policy; default: the queue's, else [`Backoff::default`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<Backoff>,
    /// How long one attempt may run (and the default lease); default: the queue's, else 60 s.
    #[serde(
        default,
        with = "crate::duration::serde_opt",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, example = "30s")]
    pub timeout: Option<Duration>,
    /// While a task with this key is not finished, enqueueing another returns the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$"
    )]
    pub unique_key: Option<String>,
    /// Tasks sharing this key run at most `concurrency_limit` at once, cluster-wide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$"
    )]
    pub concurrency_key: Option<String>,
    /// Limit for `concurrency_key`; default 1 when a key is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub concurrency_limit: Option<i32>,
    /// The rate limit the task counts against: a limit's name (`PUT /v1/rate-limits/{name}`),
    /// or `name:partition` for one budget per partition (`"stripe:customer-42"`). Default: the
    /// queue's `rate_limit`. Claims pass over it while its key is at the limit; it waits
    /// `available` and spends no attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[A-Za-z0-9_.-]{1,100}(:[^\u0000-\u001F\u007F-\u009F]+)?$"
    )]
    pub rate_limit: Option<String>,
    /// The partition (a tenant, a customer) the task belongs to: in a queue with `fair`
    /// claims, partitions take turns; with `partition_limit`, at most that many of one
    /// partition run at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$"
    )]
    pub partition_key: Option<String>,
    /// Only the node with this name may run the task (node-daemons node_id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$"
    )]
    pub node: Option<String>,
    /// The user the task is for (asyncflow's `user_id`): `GET /v1/tasks?user_id=U` lists a
    /// user's tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$"
    )]
    pub user_id: Option<String>,
    /// Trace id (W3C: 32 hex digits) carried to the worker and its logs; default: the API
    /// request's `traceparent` / `X-Trace-Id`, else a new one (asyncflow's schedule_log).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(pattern = "^[0-9a-fA-F]{32}$")]
    pub trace_id: Option<String>,
    /// The stage the task starts at (asyncflow's task_stage); a worker completing a stage names
    /// the next one (`next_stage`). Default none: a single-stage task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$"
    )]
    pub stage: Option<String>,
    /// The task's progress from the start (any JSON), as a heartbeat with `progress` would set
    /// it; asyncflow's createTask takes a `scheduleLog` this way. Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Value>,
    /// Debounce by key (issue 43): while a task with `debounce.key` waits, this enqueue
    /// replaces it (payload and other fields) and moves its `run_at` to now + `period`, never
    /// past its first enqueue + `max_wait`; else it makes a new task that runs `period` from
    /// now. Excludes `run_at`, `run_in` and `unique_key`. See [`crate::debounce`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debounce: Option<crate::debounce::Debounce>,
    /// Tags (issue 43): up to 20 strings of 1..=128 characters (`"customer:42"`, `"plan:pro"`),
    /// each a filter of `GET /v1/tasks?tag=…` and of bulk actions, through an index.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(schema_with = tags_schema)]
    pub tags: Vec<String>,
    /// Labels a claim must carry to take this task, ever (issue 43; Hatchet's worker
    /// affinity): `{"gpu": "a100"}`. See [`crate::labels`]. A claim without them never takes
    /// it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::labels::labels_schema_opt)]
    pub requires: Option<crate::labels::Labels>,
    /// Labels a claim should carry: for `prefer.for` after the task is due only such a claim
    /// takes it, then any claim may. See [`crate::labels`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefer: Option<crate::labels::Prefer>,
}

/// `tags`' schema: [`check_tags`]'s bounds (utoipa states `uniqueItems` only for set types).
fn tags_schema() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
    let tag = ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(MAX_TAG_LEN))
        .pattern(Some(r"^[^\u0000-\u001F\u007F-\u009F]+$"));
    ArrayBuilder::new()
        .items(tag)
        .max_items(Some(MAX_TAGS))
        .unique_items(true)
        .description(Some(format!(
            "Tags (issue 43): up to {MAX_TAGS} distinct strings of 1..={MAX_TAG_LEN} characters \
             (`\"customer:42\"`, `\"plan:pro\"`), each a filter of `GET /v1/tasks?tag=…` and of \
             bulk actions, through an index."
        )))
        .build()
}

/// Server-wide defaults under the queue settings.
#[derive(Debug, Clone, Copy)]
pub struct TaskDefaults {
    /// Attempts when neither task nor queue says.
    pub max_attempts: i32,
    /// Backoff when neither task nor queue says.
    pub backoff: Backoff,
    /// Timeout in ms when neither task nor queue says.
    pub timeout_ms: i64,
}

impl Default for TaskDefaults {
    fn default() -> Self {
        TaskDefaults {
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            backoff: Backoff::default(),
            timeout_ms: DEFAULT_TIMEOUT_MS,
        }
    }
}

/// A task with every default resolved, ready for the store to insert.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedTask {
    /// Queue name.
    pub queue: String,
    /// Kind.
    pub kind: String,
    /// Payload.
    pub payload: Value,
    /// Priority.
    pub priority: i32,
    /// `scheduled` when run_at is in the future, else `available`.
    pub state: TaskState,
    /// Earliest start.
    pub run_at: Timestamp,
    /// Expiry.
    pub expires_at: Option<Timestamp>,
    /// Attempts allowed.
    pub max_attempts: i32,
    /// Retry policy.
    pub backoff: Backoff,
    /// Attempt timeout, ms.
    pub timeout_ms: i64,
    /// Idempotency key.
    pub unique_key: Option<String>,
    /// Concurrency key.
    pub concurrency_key: Option<String>,
    /// Concurrency limit (set when the key is).
    pub concurrency_limit: Option<i32>,
    /// Rate limit key (the task's, else the queue's).
    pub rate_limit: Option<String>,
    /// Partition (tenant) for fair claims.
    pub partition_key: Option<String>,
    /// Node affinity.
    pub node: Option<String>,
    /// The user the task is for.
    pub user_id: Option<String>,
    /// Trace id.
    pub trace_id: Option<String>,
    /// The durable process this task is a step or timer of (progressor): its namespace and id.
    /// Set by the engine's process service, never from a request.
    pub process: Option<ProcessRef>,
    /// The batch the task belongs to (`POST /v1/batches`). Set by the engine, never from a
    /// task spec.
    pub batch_id: Option<i64>,
    /// The stage it starts at.
    pub stage: Option<String>,
    /// Progress from the start.
    pub progress: Option<Value>,
    /// Debounce (issue 43): the store keeps one waiting task per key and replaces it.
    pub debounce: Option<crate::debounce::Debounce>,
    /// Tags, checked.
    pub tags: Vec<String>,
    /// What the task requires and prefers of a claim's labels, as stored (None: any claim).
    pub affinity: Option<crate::labels::Affinity>,
}

/// Which durable process a task belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ProcessRef {
    /// The namespace.
    pub namespace: String,
    /// The process id.
    pub id: String,
}

/// A new random trace id: 32 lower-case hex digits (W3C trace-context).
pub fn new_trace_id() -> String {
    format!("{:032x}", rand::random::<u128>())
}

fn check_trace_id(v: &str) -> Result<(), String> {
    if v.len() == 32 && v.bytes().all(|b| b.is_ascii_hexdigit()) && v != "0".repeat(32) {
        Ok(())
    } else {
        Err(format!(
            "trace_id must be 32 hex digits (W3C trace-context), got {v:?}"
        ))
    }
}

/// Whether a JSON value holds a NUL character (U+0000) in any string or object key.
/// PostgreSQL's `jsonb` cannot store one, so docket refuses it on every backend alike.
pub fn has_nul(v: &Value) -> bool {
    match v {
        Value::String(s) => s.contains('\0'),
        Value::Array(a) => a.iter().any(has_nul),
        Value::Object(m) => m.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        _ => false,
    }
}

impl NewTask {
    /// A task of `kind` with `payload` and every other field defaulted.
    pub fn new(kind: impl Into<String>, payload: Value) -> Self {
        NewTask {
            kind: kind.into(),
            payload,
            ..NewTask::default()
        }
    }

    /// The queue this task goes to.
    pub fn queue_name(&self) -> &str {
        self.queue.as_deref().unwrap_or(DEFAULT_QUEUE)
    }

    /// Checks the fields and fills in defaults: the task's own value, else the queue's, else the
    /// server's (asyncflow: the task row specialises t_schedule_cfg).
    ///
    /// # Errors
    /// A message naming the bad field (empty kind, max_attempts < 1, negative limit, …).
    pub fn resolve(
        self,
        queue: Option<&QueueSettings>,
        defaults: &TaskDefaults,
        now: Timestamp,
    ) -> Result<ResolvedTask, String> {
        check_name("kind", &self.kind)?;
        check_name("queue", self.queue_name())?;
        for (f, v) in [
            ("unique_key", &self.unique_key),
            ("concurrency_key", &self.concurrency_key),
            ("node", &self.node),
            ("user_id", &self.user_id),
            ("stage", &self.stage),
            ("partition_key", &self.partition_key),
        ] {
            if let Some(v) = v {
                check_name(f, v)?;
            }
        }
        if let Some(t) = &self.trace_id {
            check_trace_id(t)?;
        }
        check_tags(&self.tags)?;
        if let Some(r) = &self.requires {
            crate::labels::check_labels("requires", r)?;
        }
        if let Some(p) = &self.prefer {
            p.validate()?;
        }
        if let Some(k) = &self.rate_limit {
            crate::rate_limit::check_key(k)?;
        }
        if self.expires_at.is_some() && self.expires_in.is_some() {
            return Err("give expires_at or expires_in, not both".into());
        }
        if self.run_at.is_some() && self.run_in.is_some() {
            return Err("give run_at or run_in, not both".into());
        }
        if let Some(m) = self.max_attempts {
            if m < 1 {
                return Err(format!("max_attempts must be at least 1, got {m}"));
            }
        }
        if let Some(l) = self.concurrency_limit {
            if l < 1 {
                return Err(format!("concurrency_limit must be at least 1, got {l}"));
            }
            if self.concurrency_key.is_none() {
                return Err("concurrency_limit needs a concurrency_key".into());
            }
        }
        if let Some(b) = &self.backoff {
            b.validate()?;
        }
        if let Some(t) = self.timeout {
            crate::duration::check_timeout("timeout", t)?;
        }
        if has_nul(&self.payload) {
            return Err("payload must not contain NUL characters (\\u0000)".into());
        }
        if self.progress.as_ref().is_some_and(has_nul) {
            return Err("progress must not contain NUL characters (\\u0000)".into());
        }
        if let Some(t) = self.run_at {
            crate::time::check("run_at", t)?;
        }
        if let Some(t) = self.expires_at {
            crate::time::check("expires_at", t)?;
        }
        if let Some(d) = &self.debounce {
            d.validate()?;
            if self.run_at.is_some() || self.run_in.is_some() {
                return Err(
                    "debounce sets run_at (now + debounce.period): give neither run_at nor run_in"
                        .into(),
                );
            }
            if self.unique_key.is_some() {
                return Err("give debounce or unique_key, not both".into());
            }
        }
        let run_at = match (self.run_at, self.run_in, &self.debounce) {
            (Some(t), _, _) => t,
            (None, Some(d), _) => crate::time::add(now, d),
            (None, None, Some(d)) => d.run_at(now, d.deadline(now)),
            (None, None, None) => now,
        };
        // Databases keep microseconds: answer with what a later read will return.
        let run_at = run_at.trunc_subsecs(6);
        let expires_at = self.expires_at.or_else(|| {
            self.expires_in
                .map(|d| crate::time::add(now, d).trunc_subsecs(6))
        });
        if let (Some(e), Some(_)) = (expires_at, self.expires_in) {
            crate::time::check("expires_in", e)?;
        }
        if let Some(e) = expires_at {
            if e <= run_at {
                return Err(format!(
                    "expires_at ({e}) must be after run_at ({run_at}): the task could never start"
                ));
            }
        }
        let state = if run_at > now {
            TaskState::Scheduled
        } else {
            TaskState::Available
        };
        let q = queue.cloned().unwrap_or_default();
        let mut concurrency_limit = self
            .concurrency_key
            .as_ref()
            .map(|_| self.concurrency_limit.unwrap_or(1));
        let queue_name = self.queue_name().to_string();
        let mut concurrency_key = self.concurrency_key;
        // The queue's per-partition limit rides on the concurrency key (claims already count
        // and lock keys): only for tasks without a key of their own.
        if let (Some(l), Some(p), None) = (q.partition_limit, &self.partition_key, &concurrency_key)
        {
            let key = format!("partition:{queue_name}:{p}");
            if key.chars().count() > 512 {
                return Err(
                    "queue and partition_key are too long together for the queue's partition_limit (512 characters)"
                        .into(),
                );
            }
            concurrency_key = Some(key);
            concurrency_limit = Some(l);
        }
        Ok(ResolvedTask {
            queue: self.queue.unwrap_or_else(|| DEFAULT_QUEUE.to_string()),
            kind: self.kind,
            payload: self.payload,
            priority: self.priority.unwrap_or(0),
            state,
            run_at,
            expires_at: expires_at.map(|t| t.trunc_subsecs(6)),
            max_attempts: self
                .max_attempts
                .or(q.max_attempts)
                .unwrap_or(defaults.max_attempts),
            backoff: self.backoff.or(q.backoff).unwrap_or(defaults.backoff),
            timeout_ms: self
                .timeout
                .or(q.timeout)
                .map(crate::duration::to_ms)
                .unwrap_or(defaults.timeout_ms),
            unique_key: self.unique_key,
            concurrency_key,
            concurrency_limit,
            rate_limit: self.rate_limit.or(q.rate_limit),
            partition_key: self.partition_key,
            node: self.node,
            user_id: self.user_id,
            trace_id: Some(
                self.trace_id
                    .map(|t| t.to_ascii_lowercase())
                    .unwrap_or_else(new_trace_id),
            ),
            process: None,
            batch_id: None,
            stage: self.stage,
            progress: self.progress,
            debounce: self.debounce,
            affinity: crate::labels::Affinity::of(self.requires.as_ref(), self.prefer.as_ref()),
            tags: self.tags,
        })
    }
}

impl ResolvedTask {
    /// The stored task this insert produced (`id` from the database, nothing run yet).
    pub fn into_task(self, id: i64, created_at: Timestamp) -> Task {
        Task {
            id,
            queue: self.queue,
            kind: self.kind,
            payload: self.payload,
            priority: self.priority,
            state: self.state,
            run_at: self.run_at,
            expires_at: self.expires_at,
            attempt: 0,
            max_attempts: self.max_attempts,
            backoff: self.backoff,
            timeout: Duration::from_millis(self.timeout_ms.max(0) as u64),
            unique_key: self.unique_key,
            concurrency_key: self.concurrency_key,
            concurrency_limit: self.concurrency_limit,
            rate_limit: self.rate_limit,
            partition_key: self.partition_key,
            node: self.node,
            user_id: self.user_id,
            trace_id: self.trace_id,
            process: self.process,
            batch_id: self.batch_id,
            deps: None,
            stage: self.stage,
            stages_done: vec![],
            attempt_node: None,
            runs: vec![],
            run_count: 0,
            result: None,
            errors: vec![],
            progress: self.progress,
            created_at: created_at.trunc_subsecs(6),
            attempted_at: None,
            finished_at: None,
            worker: None,
            lease_expires_at: None,
            cancel_requested_at: None,
            updated_at: created_at.trunc_subsecs(6),
            lease: None,
            inserted: Some(true),
            debounce_key: self.debounce.map(|d| d.key),
            tags: self.tags,
            requires: self.affinity.as_ref().and_then(|a| a.requires.clone()),
            prefer: self
                .affinity
                .as_ref()
                .and_then(crate::labels::Affinity::prefer),
            dead_letter_of: None,
            replaced: None,
        }
    }
}

/// The stage a completed stage hands its task on to (asyncflow's multi-stage tasks), with
/// every value resolved by the engine: the task goes back to `state` at `stage` under the
/// same id, its attempt count starts again, its run log and `stages_done` keep the history.
#[derive(Debug, Clone, PartialEq)]
pub struct NextStage {
    /// The next stage.
    pub stage: String,
    /// `available` (run_at reached) or `scheduled`.
    pub state: crate::TaskState,
    /// When it may start.
    pub run_at: crate::Timestamp,
    /// The new payload (the stage's context); None keeps it.
    pub payload: Option<serde_json::Value>,
    /// The new priority; None keeps it.
    pub priority: Option<i32>,
}

/// What a dead letter keeps of the task it stands for: [`Task::dead_letter_of`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct DeadLetterOf {
    /// The discarded task (still kept for its queue's `retention_failed`; retry it with
    /// `POST /v1/tasks/{task_id}/retry`).
    pub task_id: i64,
    /// Its queue.
    pub queue: String,
    /// Its kind.
    pub kind: String,
    /// The attempts it made.
    pub attempts: i32,
    /// Its errors, one per failed attempt, the last one last.
    pub errors: Vec<TaskError>,
    /// When it was discarded.
    #[schema(value_type = String, format = DateTime)]
    pub discarded_at: Timestamp,
}

/// One failed attempt, as kept in [`Task::errors`] (asyncflow's schedule_log entries).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct TaskError {
    /// The attempt that failed (1-based).
    pub attempt: i32,
    /// When it failed.
    #[schema(value_type = String, format = DateTime)]
    pub at: Timestamp,
    /// The worker that held the lease, if any.
    #[serde(default)]
    pub worker: Option<String>,
    /// What went wrong.
    pub message: String,
    /// How long the attempt ran, ms (asyncflow's cost), when its start is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<i64>,
}

/// A lease: proof that a worker holds a running task. Given only to the claimer.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct Lease {
    /// Opaque token to send with heartbeat/complete/fail.
    pub token: String,
    /// When the lease runs out unless a heartbeat extends it.
    #[schema(value_type = String, format = DateTime)]
    pub expires_at: Timestamp,
    /// This attempt's own trace id (32 hex digits), as its run log entry will name it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
}

/// A stored task. JSON shape of every task the API returns.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct Task {
    /// Unique id, increasing with insertion.
    pub id: i64,
    /// Queue name.
    pub queue: String,
    /// Handler/type name.
    pub kind: String,
    /// Any JSON.
    pub payload: Value,
    /// Higher runs first.
    pub priority: i32,
    /// Current state.
    pub state: TaskState,
    /// Earliest (next) start.
    #[schema(value_type = String, format = DateTime)]
    pub run_at: Timestamp,
    /// Not started by then: discarded.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<Timestamp>,
    /// Attempts made so far (a claim starts the next one).
    pub attempt: i32,
    /// Attempts allowed.
    pub max_attempts: i32,
    /// Retry policy.
    pub backoff: Backoff,
    /// Attempt timeout (humantime).
    #[serde(with = "crate::duration::serde_str")]
    #[schema(value_type = String, example = "30s")]
    pub timeout: Duration,
    /// Idempotency key.
    pub unique_key: Option<String>,
    /// Concurrency key.
    pub concurrency_key: Option<String>,
    /// Concurrency limit for the key.
    pub concurrency_limit: Option<i32>,
    /// The rate limit key it counts against (`name` or `name:partition`); absent for others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<String>,
    /// The partition (tenant) it belongs to; absent for others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition_key: Option<String>,
    /// Node affinity.
    pub node: Option<String>,
    /// The user the task is for (asyncflow's `user_id`).
    #[serde(default)]
    pub user_id: Option<String>,
    /// Trace id (32 hex digits), carried to workers and their logs.
    #[serde(default)]
    pub trace_id: Option<String>,
    /// The durable process this task is a step or timer of (`null` for other tasks).
    #[serde(default)]
    pub process: Option<ProcessRef>,
    /// The batch it belongs to (`POST /v1/batches`); absent for other tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_id: Option<i64>,
    /// In a claim of a workflow's task: its dependencies' results by ref (null for one that
    /// failed on an `ignore_failure` edge). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub deps: Option<std::collections::BTreeMap<String, Value>>,
    /// The stage it is at (asyncflow's task_stage; `null` for a single-stage task).
    #[serde(default)]
    pub stage: Option<String>,
    /// The stages completed before this one, oldest first (`null`: the unnamed first stage).
    #[serde(default)]
    pub stages_done: Vec<Option<String>>,
    /// The node that claimed the current (or last) attempt.
    #[serde(default)]
    pub attempt_node: Option<String>,
    /// The run log: the last 10 finished attempts of every stage, oldest first.
    #[serde(default)]
    pub runs: Vec<crate::run::TaskRun>,
    /// Attempts finished in all (the run log keeps only the last 10).
    #[serde(default)]
    pub run_count: i32,
    /// What the last successful attempt returned.
    pub result: Option<Value>,
    /// One entry per failed attempt.
    pub errors: Vec<TaskError>,
    /// What the worker last reported.
    pub progress: Option<Value>,
    /// When it was enqueued.
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Timestamp,
    /// When the last attempt started.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub attempted_at: Option<Timestamp>,
    /// When it reached a final state.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub finished_at: Option<Timestamp>,
    /// Who ran (or runs) the last attempt.
    pub worker: Option<String>,
    /// When the current lease runs out (running tasks).
    #[schema(value_type = Option<String>, format = DateTime)]
    pub lease_expires_at: Option<Timestamp>,
    /// Set when a running task was asked to cancel; it stops at its next heartbeat/complete.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub cancel_requested_at: Option<Timestamp>,
    /// When the task last changed: the latest of its enqueue, the start and end of its
    /// attempts, a cancel request, and an edit (PATCH, retry, run now, progress) — see
    /// [`Task::touch`] (node-daemons' `updated_at`, asyncflow's `modify_time`).
    #[serde(default = "crate::time::min")]
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: Timestamp,
    /// The lease, only in claim answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
    /// In insert answers: false when a unique_key matched an existing task, or a debounced
    /// enqueue replaced the waiting task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inserted: Option<bool>,
    /// Tags (issue 43).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Labels a claim must carry to take it (issue 43, [`crate::labels`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires: Option<crate::labels::Labels>,
    /// Labels a claim should carry, and for how long after the task is due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefer: Option<crate::labels::Prefer>,
    /// When this task is a dead letter (its queue is another's `dead_letter`): the task it
    /// stands for and that task's errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_of: Option<DeadLetterOf>,
    /// The debounce key the task was enqueued with (issue 43), kept after it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debounce_key: Option<String>,
    /// In the answer of a debounced enqueue: true when it replaced the waiting task with the
    /// key (then `inserted` is false), false when it created one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced: Option<bool>,
}

/// What happens to a task whose attempt failed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FailDecision {
    /// Run again at this time (state `retryable`).
    Retry {
        /// Next start.
        run_at: Timestamp,
    },
    /// Give up (state `discarded`).
    Discard,
    /// A cancel was requested while it ran (state `cancelled`).
    Cancel,
}

/// How a failed attempt ends: a pure rule the engine chooses and hands to the store with every
/// call that may fail an attempt, so no backend decides retry against discard itself. Called
/// with the task as stored (attempt, limits, backoff, expiry, cancel request), the time, the
/// delay the worker asked for and whether it said the failure is permanent.
pub type FailRule = fn(&Task, Timestamp, Option<Duration>, bool) -> FailDecision;

/// docket's rule ([`Task::fail_decision`]): cancel when asked to, discard when permanent, out of
/// attempts or past `expires_at`, else retry after `retry_in` or the backoff.
pub fn standard_fail_rule(
    t: &Task,
    now: Timestamp,
    retry_in: Option<Duration>,
    permanent: bool,
) -> FailDecision {
    t.fail_decision(now, retry_in, permanent)
}

impl Task {
    /// Sets `updated_at`: the latest of `created_at`, `attempted_at`, `finished_at`,
    /// `cancel_requested_at`, the last failure and run-log entry, and `edited_at` (the last
    /// PATCH, retry, run-now or progress report, which the stores keep). Called by every
    /// backend's row decoding, so the rule is written once.
    pub fn touch(&mut self, edited_at: Option<Timestamp>) {
        self.updated_at = [
            Some(self.created_at),
            self.attempted_at,
            self.finished_at,
            self.cancel_requested_at,
            self.errors.last().map(|e| e.at),
            self.runs.last().map(|r| r.finished_at),
            edited_at,
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(self.created_at);
    }

    /// Decides the fate of the current attempt's failure: discarded when `permanent`, when the
    /// attempts are spent, or when the retry would start after `expires_at`; else retried after
    /// `retry_in` if the worker asked for it, else after the backoff.
    pub fn fail_decision(
        &self,
        now: Timestamp,
        retry_in: Option<Duration>,
        permanent: bool,
    ) -> FailDecision {
        if self.cancel_requested_at.is_some() {
            return FailDecision::Cancel;
        }
        if permanent || self.attempt >= self.max_attempts {
            return FailDecision::Discard;
        }
        let delay = retry_in.unwrap_or_else(|| self.backoff.delay(self.attempt));
        let run_at = crate::time::add(now, delay);
        match self.expires_at {
            Some(e) if run_at >= e => FailDecision::Discard,
            _ => FailDecision::Retry { run_at },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t0() -> Timestamp {
        chrono::Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
    }

    #[test]
    fn resolve_takes_task_then_queue_then_server_defaults() {
        let q = QueueSettings {
            max_attempts: Some(7),
            timeout: Some(Duration::from_secs(9)),
            ..QueueSettings::default()
        };
        let d = TaskDefaults::default();
        let r = NewTask::new("k", Value::Null)
            .resolve(Some(&q), &d, t0())
            .unwrap();
        assert_eq!((r.max_attempts, r.timeout_ms), (7, 9000));
        assert_eq!(r.queue, "default");
        assert_eq!(r.state, TaskState::Available);
        let mut n = NewTask::new("k", Value::Null);
        n.max_attempts = Some(2);
        n.run_in = Some(Duration::from_secs(5));
        n.concurrency_key = Some("c".into());
        let r = n.resolve(None, &d, t0()).unwrap();
        assert_eq!(r.max_attempts, 2);
        assert_eq!(r.timeout_ms, DEFAULT_TIMEOUT_MS);
        assert_eq!(r.state, TaskState::Scheduled);
        assert_eq!(r.run_at, crate::time::add_ms(t0(), 5000));
        assert_eq!(r.concurrency_limit, Some(1));
    }

    #[test]
    fn partition_limit_rides_on_the_concurrency_key() {
        let q = QueueSettings {
            partition_limit: Some(3),
            ..QueueSettings::default()
        };
        let d = TaskDefaults::default();
        let mut n = NewTask::new("k", Value::Null);
        n.partition_key = Some("acme".into());
        let r = n.clone().resolve(Some(&q), &d, t0()).unwrap();
        assert_eq!(r.concurrency_key.as_deref(), Some("partition:default:acme"));
        assert_eq!(r.concurrency_limit, Some(3));
        assert_eq!(r.partition_key.as_deref(), Some("acme"));
        // A key of its own wins; no partition, no key.
        n.concurrency_key = Some("own".into());
        let r = n.resolve(Some(&q), &d, t0()).unwrap();
        assert_eq!(r.concurrency_key.as_deref(), Some("own"));
        let r = NewTask::new("k", Value::Null)
            .resolve(Some(&q), &d, t0())
            .unwrap();
        assert_eq!(r.concurrency_key, None);
        let mut n = NewTask::new("k", Value::Null);
        n.queue = Some("q".repeat(256));
        n.partition_key = Some("p".repeat(256));
        assert!(n
            .resolve(Some(&q), &d, t0())
            .unwrap_err()
            .contains("partition_limit"));
    }

    #[test]
    fn resolve_rejects_bad_fields() {
        let d = TaskDefaults::default();
        let bad = |f: &dyn Fn(&mut NewTask)| {
            let mut n = NewTask::new("k", Value::Null);
            f(&mut n);
            n.resolve(None, &d, t0()).unwrap_err()
        };
        assert!(bad(&|n| n.kind.clear()).contains("kind"));
        assert!(bad(&|n| n.max_attempts = Some(0)).contains("max_attempts"));
        assert!(bad(&|n| n.concurrency_limit = Some(2)).contains("concurrency_key"));
        assert!(bad(&|n| n.queue = Some("x".repeat(300))).contains("queue"));
        assert!(bad(&|n| {
            n.run_at = Some(t0());
            n.run_in = Some(Duration::from_secs(1));
        })
        .contains("not both"));
    }

    fn task(attempt: i32, max: i32) -> Task {
        let r = NewTask::new("k", Value::Null)
            .resolve(None, &TaskDefaults::default(), t0())
            .unwrap();
        Task {
            id: 1,
            queue: r.queue,
            kind: r.kind,
            payload: r.payload,
            priority: 0,
            state: TaskState::Running,
            run_at: t0(),
            expires_at: None,
            attempt,
            max_attempts: max,
            backoff: Backoff {
                jitter: 0.0,
                ..Backoff::default()
            },
            timeout: Duration::from_secs(60),
            unique_key: None,
            concurrency_key: None,
            concurrency_limit: None,
            rate_limit: None,
            partition_key: None,
            node: None,
            trace_id: None,
            user_id: None,
            process: None,
            batch_id: None,
            deps: None,
            stage: None,
            stages_done: vec![],
            attempt_node: None,
            runs: vec![],
            run_count: 0,
            result: None,
            errors: vec![],
            progress: None,
            created_at: t0(),
            attempted_at: None,
            finished_at: None,
            worker: None,
            lease_expires_at: None,
            cancel_requested_at: None,
            updated_at: t0(),
            lease: None,
            inserted: None,
            debounce_key: None,
            tags: vec![],
            requires: None,
            prefer: None,
            dead_letter_of: None,
            replaced: None,
        }
    }

    #[test]
    fn fail_decision_rules() {
        let now = t0();
        assert_eq!(
            task(3, 5).fail_decision(now, None, false),
            FailDecision::Retry {
                run_at: crate::time::add_ms(now, 4000)
            }
        );
        assert_eq!(
            task(1, 5).fail_decision(now, Some(Duration::from_millis(1500)), false),
            FailDecision::Retry {
                run_at: crate::time::add_ms(now, 1500)
            }
        );
        assert_eq!(
            task(5, 5).fail_decision(now, None, false),
            FailDecision::Discard
        );
        assert_eq!(
            task(1, 5).fail_decision(now, None, true),
            FailDecision::Discard
        );
        let mut t = task(1, 5);
        t.expires_at = Some(crate::time::add_ms(now, 500));
        assert_eq!(t.fail_decision(now, None, false), FailDecision::Discard);
        t.cancel_requested_at = Some(now);
        assert_eq!(t.fail_decision(now, None, false), FailDecision::Cancel);
    }
}
