//! Durable processes (progressor, seed 001): namespaces, processes, events, the processor
//! contract, and how a process's tasks map onto docket tasks.
//!
//! A process's tasks are ordinary docket tasks in queue `process:<namespace>` with
//! `concurrency_key = "<namespace>:<id>"` and limit 1 — so at most one task of a process runs at
//! a time, on any number of nodes — and `kind` = the task type. Calls (`init`, `call`, `repair`)
//! have priority [`CALL_PRIORITY`], timers (`timeout`, `remove`) priority 0: a pending call runs
//! before a due timer, and a timer never runs while a call of its process runs (progressor's
//! "blocked" timers) without any extra bookkeeping.
//!
//! Progressor's task statuses map to docket's: waiting → scheduled/available, blocked → a due
//! timer behind a call (available, not claimable), running → running, finished → completed,
//! error → discarded, cancelled → cancelled.

use crate::{Backoff, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

/// Priority of init/call/repair tasks (timers have 0).
pub const CALL_PRIORITY: i32 = 10;
/// Longest process id (characters), as progressor.
pub const MAX_PROCESS_ID_LEN: usize = 256;

/// The queue of a namespace's tasks.
pub fn queue_of(namespace: &str) -> String {
    format!("process:{namespace}")
}

/// The concurrency key of a process: one running task per process.
pub fn key_of(namespace: &str, id: &str) -> String {
    format!("{namespace}:{id}")
}

/// The task kinds that are a process's timers (progressor's timeout and remove actions): a
/// committed result that sets or unsets the timer cancels the process's waiting tasks of these
/// kinds.
pub const TIMER_KINDS: [&str; 2] = ["timeout", "remove"];

/// Why a zombie's process broke (progressor: a step whose lease ran out).
pub const ZOMBIE_DETAIL: &str = "zombie detected";

/// One process notification as the event stream and webhooks deliver it (`GET /v1/events`):
/// its `kind` and `data`, defined here once for every backend.
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// The process was created (`init`), or imported (`PUT`): `{}` / `{"imported": true}`.
    Created {
        /// Imported with its history.
        imported: bool,
    },
    /// An event was appended: `{"event_id", "timestamp", "metadata", "payload"}` (metadata
    /// `{}` when none was given).
    Event {
        /// Its id.
        event_id: i64,
        /// When it was written.
        timestamp: Timestamp,
        /// Its metadata.
        metadata: Value,
        /// Its payload.
        payload: Value,
    },
    /// The process went to `error`: `{"detail", "task_id"}`.
    Failed {
        /// Why.
        detail: String,
        /// The task that broke it.
        task_id: i64,
    },
    /// The process left `error`: `{}` by a repair call, `{"simple": true}` by a simple repair.
    Repaired {
        /// Simple repair (no processor call).
        simple: bool,
    },
    /// The process was removed: `{}`.
    Removed,
}

impl Notice {
    /// The notification's kind: `created`, `event`, `failed`, `repaired` or `removed`.
    pub fn kind(&self) -> &'static str {
        match self {
            Notice::Created { .. } => "created",
            Notice::Event { .. } => "event",
            Notice::Failed { .. } => "failed",
            Notice::Repaired { .. } => "repaired",
            Notice::Removed => "removed",
        }
    }

    /// The event id (kind `event`).
    pub fn event_id(&self) -> Option<i64> {
        match self {
            Notice::Event { event_id, .. } => Some(*event_id),
            _ => None,
        }
    }

    /// The notification's data.
    pub fn data(&self) -> Value {
        match self {
            Notice::Created { imported: false }
            | Notice::Repaired { simple: false }
            | Notice::Removed => serde_json::json!({}),
            Notice::Created { imported: true } => serde_json::json!({"imported": true}),
            Notice::Repaired { simple: true } => serde_json::json!({"simple": true}),
            Notice::Failed { detail, task_id } => {
                serde_json::json!({"detail": detail, "task_id": task_id})
            }
            Notice::Event {
                event_id,
                timestamp,
                metadata,
                payload,
            } => serde_json::json!({
                "event_id": event_id,
                "timestamp": timestamp,
                "metadata": event_metadata(metadata),
                "payload": payload,
            }),
        }
    }
}

impl Notice {
    /// What a committed step publishes: an `event` for each new event (ids from
    /// `first_event_id` on), then `repaired` when the process was in `error`.
    pub fn committed(
        events: &[NewEvent],
        first_event_id: i64,
        at: Timestamp,
        was_error: bool,
    ) -> Vec<Notice> {
        let mut out: Vec<Notice> = events
            .iter()
            .enumerate()
            .map(|(i, e)| Notice::Event {
                event_id: first_event_id + i as i64,
                timestamp: at,
                metadata: e.metadata.clone(),
                payload: e.payload.clone(),
            })
            .collect();
        if was_error {
            out.push(Notice::Repaired { simple: false });
        }
        out
    }
}

/// An event's stored metadata: `{}` when none (null) was given.
pub fn event_metadata(m: &Value) -> Value {
    if m.is_null() {
        serde_json::json!({})
    } else {
        m.clone()
    }
}

/// The unique key that makes an idempotency key unique per process: `idem:<ns>:<id>:<key>`,
/// or, past [`crate::task::MAX_NAME_LEN`] characters (up to 583 with a 64-character namespace,
/// a 256-character id and key), `idem#` and that text's SHA-256 (hex), so it fits the stored
/// column; a key that fitted keeps its old form.
pub fn idempotency_unique_key(namespace: &str, id: &str, key: &str) -> String {
    let plain = format!("idem:{namespace}:{id}:{key}");
    if plain.chars().count() <= crate::task::MAX_NAME_LEN {
        return plain;
    }
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(plain.as_bytes());
    let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
    format!("idem#{hex}")
}

/// Makes `t` a task of process `id` in `namespace`: one at a time per process (concurrency key
/// [`key_of`], limit 1), unique per idempotency key ([`idempotency_unique_key`]). These keys
/// are the engine's, set after [`crate::NewTask::resolve`] checked the caller's fields: `ns:id`
/// is up to 321 characters, past the 256 a caller's own keys may have (the stored columns hold
/// 512).
pub fn own_task(
    t: &mut crate::task::ResolvedTask,
    namespace: &str,
    id: &str,
    idempotency_key: Option<&str>,
) {
    t.concurrency_key = Some(key_of(namespace, id));
    t.concurrency_limit = Some(1);
    t.unique_key = idempotency_key.map(|k| idempotency_unique_key(namespace, id, k));
    t.process = Some(crate::ProcessRef {
        namespace: namespace.to_string(),
        id: id.to_string(),
    });
}

/// Checks a namespace name: 1–64 of `[A-Za-z0-9_.-]`.
///
/// # Errors
/// A message saying what is allowed.
pub fn check_namespace(ns: &str) -> Result<(), String> {
    check_plain_name("namespace", ns)
}

/// Checks a name that goes into other names, subjects and keys (a namespace, a sink): 1–64
/// characters of `A-Z a-z 0-9 _ . -`.
///
/// # Errors
/// `<what> "<name>" must be 1 to 64 characters of A-Z a-z 0-9 _ . -`.
pub fn check_plain_name(what: &str, name: &str) -> Result<(), String> {
    if name.is_empty()
        || name.len() > 64
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
    {
        return Err(format!(
            "{what} {name:?} must be 1 to 64 characters of A-Z a-z 0-9 _ . -"
        ));
    }
    Ok(())
}

/// Checks a process id: 1–256 characters, no control characters.
///
/// # Errors
/// A message.
pub fn check_process_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.chars().count() > MAX_PROCESS_ID_LEN {
        return Err(format!(
            "process id must be 1 to {MAX_PROCESS_ID_LEN} characters"
        ));
    }
    // As in a path (`check_name`), and as the document's pattern says.
    if id.chars().any(char::is_control) {
        return Err("process id must not contain control characters".into());
    }
    Ok(())
}

/// Retry policy of a namespace's timers (progressor's defaults in brackets): interval
/// `initial_timeout` [5 s], then × `backoff_coefficient` [1.0], capped by `max_timeout` [none];
/// at most `max_attempts` [3]; errors whose text contains one of `non_retryable_errors` [none]
/// are not retried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct RetryPolicy {
    /// First retry interval.
    #[serde(with = "crate::duration::serde_str")]
    #[schema(value_type = String, example = "30s")]
    pub initial_timeout: Duration,
    /// Factor per further attempt.
    #[schema(minimum = 1.0)]
    pub backoff_coefficient: f64,
    /// Cap of the interval.
    #[serde(with = "crate::duration::serde_opt")]
    #[schema(value_type = Option<String>, example = "30s")]
    pub max_timeout: Option<Duration>,
    /// Attempts of a timer, first included.
    #[schema(minimum = 1)]
    pub max_attempts: i32,
    /// Error texts that stop retrying.
    pub non_retryable_errors: Vec<String>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            initial_timeout: Duration::from_secs(5),
            backoff_coefficient: 1.0,
            max_timeout: None,
            max_attempts: 3,
            non_retryable_errors: vec![],
        }
    }
}

impl RetryPolicy {
    /// The task backoff that implements this policy (no jitter).
    pub fn backoff(&self) -> Backoff {
        Backoff {
            kind: crate::BackoffKind::Exponential,
            initial: self.initial_timeout,
            coefficient: self.backoff_coefficient,
            max: self
                .max_timeout
                .unwrap_or(Duration::from_secs(365 * 24 * 3600)),
            jitter: 0.0,
        }
    }

    /// Whether `error` is one of the non-retryable errors.
    pub fn is_non_retryable(&self, error: &str) -> bool {
        self.non_retryable_errors
            .iter()
            .any(|e| error.contains(e.as_str()))
    }
}

/// Where a namespace's processor lives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessorRef {
    /// URL docket POSTs [`ProcessorRequest`]s to (`http://`, `https://` or `inproc:NAME`; a
    /// webhook's: `http://` or `https://`).
    #[schema(min_length = 1, pattern = "^(https?://|inproc:)")]
    pub url: String,
}

/// A namespace's configuration. JSON shape of `PUT /v1/namespaces/{ns}`; omitted fields take
/// progressor's defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NamespaceConfig {
    /// The processor.
    pub processor: ProcessorRef,
    /// Timer retry policy.
    #[serde(default)]
    pub retry_policy: RetryPolicy,
    /// Tasks of the namespace run at once per node [10].
    #[serde(default = "default_pool")]
    #[schema(minimum = 1, maximum = 1000)]
    pub worker_pool_size: usize,
    /// How long one processor call may take [60 s]; also how long a synchronous caller waits.
    #[serde(default = "default_step", with = "crate::duration::serde_str")]
    #[schema(value_type = String, example = "30s")]
    pub process_step_timeout: Duration,
    /// Zombie detection adds this to the step timeout [31 s].
    #[serde(default = "default_scan", with = "crate::duration::serde_str")]
    #[schema(value_type = String, example = "30s")]
    pub task_scan_timeout: Duration,
    /// How often, at most, a runner with nothing to do looks for calls and timers that no
    /// wake-up announced [3 s] (progressor's call scan). Enqueues on the same node and
    /// PostgreSQL's notifications wake runners at once; this bounds the wait for a call
    /// enqueued through another node where the database cannot notify (MySQL, SQLite); the
    /// node's `poll_interval` applies when shorter.
    #[serde(default = "default_call_scan", with = "crate::duration::serde_str")]
    #[schema(value_type = String, example = "30s")]
    pub call_scan_timeout: Duration,
    /// Optional webhook: every notification of the namespace is POSTed to it in order, in
    /// batches `{"notifications": [...]}`, at least once (retried until it answers 2xx).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<ProcessorRef>,
}

fn default_pool() -> usize {
    10
}
fn default_step() -> Duration {
    Duration::from_secs(60)
}
fn default_scan() -> Duration {
    Duration::from_secs(31)
}
fn default_call_scan() -> Duration {
    Duration::from_secs(3)
}

impl NamespaceConfig {
    /// Checks ranges.
    ///
    /// # Errors
    /// A message naming the field.
    pub fn validate(&self) -> Result<(), String> {
        let u = &self.processor.url;
        if !(u.starts_with("http://") || u.starts_with("https://") || u.starts_with("inproc:")) {
            return Err("processor.url must be an http:// or https:// URL, or inproc:NAME for a processor registered in-process".into());
        }
        if self.worker_pool_size == 0 || self.worker_pool_size > 1000 {
            return Err("worker_pool_size must be within 1..=1000".into());
        }
        if self.retry_policy.max_attempts < 1 {
            return Err("retry_policy.max_attempts must be at least 1".into());
        }
        self.retry_policy.backoff().validate()?;
        if let Some(w) = &self.webhook {
            if !(w.url.starts_with("http://") || w.url.starts_with("https://")) {
                return Err("webhook.url must be an http:// or https:// URL".into());
            }
        }
        crate::duration::check_timeout("process_step_timeout", self.process_step_timeout)?;
        crate::duration::check_timeout("task_scan_timeout", self.task_scan_timeout)?;
        // At least 10 ms: each runner of each node reads the database at this cadence when idle.
        crate::duration::check_range(
            "call_scan_timeout",
            self.call_scan_timeout,
            Duration::from_millis(10),
            crate::duration::MAX_TIMEOUT,
        )?;
        Ok(())
    }

    /// The lease of a process task: the step timeout plus the scan timeout, so a lease only
    /// expires when the node running it is gone (progressor's zombie window).
    pub fn lease(&self) -> Duration {
        self.process_step_timeout + self.task_scan_timeout + Duration::from_secs(5)
    }
}

/// Status of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProcessStatus {
    /// Created; its init has not succeeded yet.
    Init,
    /// Accepting calls and timers.
    Running,
    /// Broken: only repair (or simple-repair) helps.
    Error,
}

impl ProcessStatus {
    /// The lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            ProcessStatus::Init => "init",
            ProcessStatus::Running => "running",
            ProcessStatus::Error => "error",
        }
    }

    /// Parses the lower-case name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "init" => Some(ProcessStatus::Init),
            "running" => Some(ProcessStatus::Running),
            "error" => Some(ProcessStatus::Error),
            _ => None,
        }
    }
}

/// A process. JSON shape in API answers and in [`ProcessorRequest::process`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Process {
    /// Namespace.
    pub namespace: String,
    /// Id (≤ 256 characters).
    pub id: String,
    /// Status.
    pub status: ProcessStatus,
    /// Status before the last change.
    pub previous_status: Option<ProcessStatus>,
    /// When the status last changed.
    #[schema(value_type = String, format = DateTime)]
    pub status_changed_at: Timestamp,
    /// Error text of an `error` process.
    pub detail: Option<String>,
    /// Processor-owned state.
    pub aux_state: Value,
    /// Processor-owned metadata (a JSON object).
    pub metadata: Value,
    /// The task that broke it.
    pub corrupted_by: Option<i64>,
    /// When it was created.
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Timestamp,
    /// Id of its last event (0: none).
    pub last_event_id: i64,
}

/// One event of a process's append-only history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Event {
    /// 1, 2, 3… per process.
    pub event_id: i64,
    /// The task that produced it.
    pub task_id: Option<i64>,
    /// When it was recorded.
    #[schema(value_type = String, format = DateTime)]
    pub timestamp: Timestamp,
    /// Metadata.
    pub metadata: Value,
    /// Payload.
    pub payload: Value,
}

/// Which part of the history to read: events after `offset` (exclusive; backward: before it),
/// at most `limit`.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
    utoipa::IntoParams,
)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct HistoryRange {
    /// Exclusive bound (0/None: from the start, or the end when backward).
    #[serde(default)]
    pub offset: Option<i64>,
    /// At most this many (0 or more; none: every event).
    #[serde(default)]
    #[schema(minimum = 0)]
    #[param(minimum = 0)]
    pub limit: Option<i64>,
    /// Newest first.
    #[serde(default)]
    pub direction: Direction,
}

impl HistoryRange {
    /// Checks the fields the document bounds: a negative `limit` would reach the database's
    /// `LIMIT`, which PostgreSQL refuses.
    ///
    /// # Errors
    /// A message naming the field.
    pub fn validate(&self) -> Result<(), String> {
        match self.limit {
            Some(l) if l < 0 => Err(format!("limit must not be negative, got {l}")),
            _ => Ok(()),
        }
    }
}

/// History direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Oldest first.
    #[default]
    Forward,
    /// Newest first.
    Backward,
}

/// What docket POSTs to a processor.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ProcessorRequest {
    /// `init`, `call`, `repair` or `timeout`.
    pub task_type: String,
    /// The caller's args (null for timers).
    pub args: Value,
    /// The caller's context.
    pub context: Value,
    /// The process with the requested history range.
    pub process: ProcessorProcess,
}

/// The process as the processor sees it.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ProcessorProcess {
    /// Id.
    pub id: String,
    /// Namespace.
    pub namespace: String,
    /// Status.
    pub status: ProcessStatus,
    /// Previous status.
    pub previous_status: Option<ProcessStatus>,
    /// Detail.
    pub detail: Option<String>,
    /// Aux state.
    pub aux_state: Value,
    /// Metadata.
    pub metadata: Value,
    /// The requested range of the history.
    pub history: Vec<Event>,
    /// Id of the last event.
    pub last_event_id: i64,
    /// The task that broke it.
    pub corrupted_by: Option<i64>,
}

/// A new event from the processor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewEvent {
    /// Payload.
    #[serde(default)]
    pub payload: Value,
    /// Metadata.
    #[serde(default)]
    pub metadata: Value,
}

/// Timer action of a processor result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum Action {
    /// `"unset_timer"`: cancel the process's timers.
    Unset(UnsetTimer),
    /// `{"set_timer": RFC3339}` or `{"timeout": "5s"}`, optionally `"remove": true`.
    Set(SetTimer),
}

/// The literal `"unset_timer"`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub enum UnsetTimer {
    /// unset_timer.
    #[serde(rename = "unset_timer")]
    UnsetTimer,
}

/// A timer to set: at `set_timer`, or after `timeout`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetTimer {
    /// Absolute time.
    #[serde(default)]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub set_timer: Option<Timestamp>,
    /// Relative time (humantime).
    #[serde(default, with = "crate::duration::serde_opt")]
    #[schema(value_type = Option<String>, example = "30s")]
    pub timeout: Option<Duration>,
    /// Remove the process at that time instead of calling the processor.
    #[serde(default)]
    pub remove: bool,
}

/// A successful processor result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessorResult {
    /// New events, appended in order.
    #[serde(default)]
    pub events: Vec<NewEvent>,
    /// New aux state (absent: unchanged).
    #[serde(default)]
    pub aux_state: Option<Value>,
    /// New metadata (absent: unchanged).
    #[serde(default)]
    pub metadata: Option<Value>,
    /// Answer to the caller.
    #[serde(default)]
    pub response: Value,
    /// Timer action (absent/null: keep timers).
    #[serde(default)]
    pub action: Option<Action>,
}

/// What a processor answered: a result, or `{"error": any}`.
#[derive(Debug, Clone, PartialEq)]
pub enum ProcessorReply {
    /// Success.
    Ok(ProcessorResult),
    /// The processor's error.
    Error(Value),
}

impl ProcessorReply {
    /// Parses a processor's JSON answer.
    ///
    /// # Errors
    /// A message when the JSON is neither shape.
    pub fn parse(v: Value) -> Result<Self, String> {
        if let Value::Object(m) = &v {
            if m.len() == 1 && m.contains_key("error") {
                return Ok(ProcessorReply::Error(m["error"].clone()));
            }
        }
        serde_json::from_value::<ProcessorResult>(v)
            .map(ProcessorReply::Ok)
            .map_err(|e| format!("processor answered an invalid result: {e}"))
    }
}

/// A whole process to import (`PUT /v1/namespaces/{ns}/processes/{id}`, progressor's put).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessImportSpec {
    /// Status [running].
    #[serde(default = "running")]
    pub status: ProcessStatus,
    /// Detail (for `error`).
    #[serde(default)]
    pub detail: Option<String>,
    /// Aux state.
    #[serde(default)]
    pub aux_state: Value,
    /// Metadata [{}].
    #[serde(default = "empty_object")]
    pub metadata: Value,
    /// History, oldest first; event ids become 1, 2, 3….
    #[serde(default)]
    pub history: Vec<ImportedEvent>,
    /// An optional timer: `{"set_timer": T}` or `{"timeout": "5s"}`, with `"remove": true` for a removal.
    #[serde(default)]
    pub timer: Option<SetTimer>,
}

/// One event of an imported history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportedEvent {
    /// When it happened [now].
    #[serde(default)]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub timestamp: Option<Timestamp>,
    /// Metadata [{}].
    #[serde(default = "empty_object")]
    pub metadata: Value,
    /// Payload.
    #[serde(default)]
    pub payload: Value,
}

fn running() -> ProcessStatus {
    ProcessStatus::Running
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// The timer a result asks for: (run_at, remove?) or None.
pub fn timer_at(action: &SetTimer, now: Timestamp) -> Result<Timestamp, String> {
    match (action.set_timer, action.timeout) {
        (Some(t), None) => Ok(t),
        (None, Some(d)) => Ok(crate::time::add(now, d)),
        (None, None) => Ok(now),
        (Some(_), Some(_)) => Err("action has both set_timer and timeout".into()),
    }
}

/// One published notification (`GET /v1/events`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Notification {
    /// Position in the stream (resume after it).
    pub seq: i64,
    /// Namespace.
    pub namespace: String,
    /// Process id.
    pub process_id: String,
    /// `event`, `created`, `failed`, `repaired` or `removed`.
    pub kind: String,
    /// The event's id (kind `event`).
    pub event_id: Option<i64>,
    /// The event (kind `event`: `{"event_id", "timestamp", "metadata", "payload"}`), or details
    /// (kind `failed`: `{"detail"}`).
    pub data: Value,
    /// When it was written.
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Timestamp,
}

/// A namespace as stored: its name and configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct NamespaceRecord {
    /// Its name.
    pub name: String,
    /// Its configuration (JSON of `NamespaceConfig`).
    pub config: Value,
}

/// A process and the requested range of its history.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessWithHistory {
    /// The process.
    pub process: Process,
    /// Its events in the requested range.
    pub history: Vec<Event>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_processor_replies() {
        let r = ProcessorReply::parse(json!({"error": {"code": 7}})).unwrap();
        assert_eq!(r, ProcessorReply::Error(json!({"code": 7})));
        let r = ProcessorReply::parse(json!({
            "events": [{"payload": 1}], "aux_state": {"a": 1}, "response": "ok",
            "action": {"timeout": "2s"}
        }))
        .unwrap();
        let ProcessorReply::Ok(r) = r else { panic!() };
        assert_eq!(r.events.len(), 1);
        assert_eq!(
            r.action,
            Some(Action::Set(SetTimer {
                set_timer: None,
                timeout: Some(Duration::from_secs(2)),
                remove: false
            }))
        );
        let ProcessorReply::Ok(r) =
            ProcessorReply::parse(json!({"action": "unset_timer"})).unwrap()
        else {
            panic!()
        };
        assert_eq!(r.action, Some(Action::Unset(UnsetTimer::UnsetTimer)));
        let ProcessorReply::Ok(r) = ProcessorReply::parse(json!({"action": null})).unwrap() else {
            panic!()
        };
        assert_eq!(r.action, None);
        assert!(ProcessorReply::parse(json!({"events": 5})).is_err());
        assert!(ProcessorReply::parse(json!({"action": "explode"})).is_err());
    }

    #[test]
    fn namespace_defaults_are_progressors() {
        let c: NamespaceConfig =
            serde_json::from_value(json!({"processor": {"url": "http://127.0.0.1:1/p"}})).unwrap();
        assert_eq!(c.worker_pool_size, 10);
        assert_eq!(c.process_step_timeout, Duration::from_secs(60));
        assert_eq!(c.task_scan_timeout, Duration::from_secs(31));
        assert_eq!(c.call_scan_timeout, Duration::from_secs(3));
        assert_eq!(c.retry_policy, RetryPolicy::default());
        assert!(c.validate().is_ok());
        assert!(check_namespace("a b").is_err());
        assert!(RetryPolicy {
            non_retryable_errors: vec!["fatal".into()],
            ..Default::default()
        }
        .is_non_retryable("a fatal thing"));
    }
}
