//! Request and response bodies of the HTTP API (`/v1`), in one place: the server parses and
//! answers with these types, the client sends and reads them, and `openapi.json` is generated
//! from them (utoipa), so the three cannot drift apart. Durations are humantime strings on the
//! wire; times RFC 3339 UTC.

use crate::process::{Event, HistoryRange, NamespaceConfig, Process};
use crate::{NewTask, QueueStats, Schedule, Task, TaskState, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

/// `POST /v1/queues/{queue}/claim`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    /// Worker name recorded on the tasks (1–256 characters).
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$"
    )]
    pub worker: String,
    /// Most tasks to claim, 1..=10,000 [1].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 10000)]
    pub limit: Option<i64>,
    /// Only tasks of these kinds (1..=100 names; asyncflow's hold by task type) [any kind].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_items = 1, max_items = 100)]
    pub kinds: Option<Vec<String>>,
    /// Only tasks at these stages (1..=100 names; asyncflow's task_stage) [any stage].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_items = 1, max_items = 100)]
    pub stages: Option<Vec<String>>,
    /// The worker's labels (issue 43; Hatchet's worker labels): `{"region": "eu", "gpu":
    /// "a100"}`. A task that `requires` labels, or still `prefer`s them, is taken only by a
    /// claim that has every one [none: tasks without affinity, and those whose preference
    /// ran out]. See `docket_core::labels`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(schema_with = crate::labels::labels_schema_opt)]
    pub labels: Option<crate::labels::Labels>,
    /// Lease per task, 100 ms..=30 days [the task's timeout]; never past the attempt deadline.
    #[serde(
        default,
        with = "crate::duration::serde_opt",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, example = "30s")]
    pub lease: Option<Duration>,
    /// Long-poll: wait up to this long (≤ 60 s) for a task when none is available [0].
    #[serde(
        default,
        with = "crate::duration::serde_opt",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, example = "5s")]
    pub wait: Option<Duration>,
    /// An id of your choosing for this claim: a random UUID (or 32 hex digits). Should its
    /// answer never reach you — a stop while the claim waits, a cut connection — `POST
    /// /v1/queues/{queue}/claims/{claim_id}/release` hands back what it took, at once and
    /// without counting an attempt, even when the release arrives before the claim commits
    /// [none]. It becomes the nonce of the claim's lease tokens: never reuse or guess one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        pattern = "^([0-9a-fA-F]{32}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$",
        example = "0b0d9c1e-6a77-4b43-9d55-3f0c3b6f2a41"
    )]
    pub claim_id: Option<String>,
    /// Answer with lean tasks (`ClaimResponse::lean`, `tasks` then empty): only what a
    /// handler needs — id, kind, payload, attempt, max_attempts, stage, timeout, attempted_at,
    /// lease, and trace_id, process, batch_id, deps where the task has them. A worker that
    /// needs the rest reads `GET /v1/tasks/{id}` [false: full tasks in `tasks`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lean: bool,
    /// Completions to record before the claim, as the items of `POST /v1/tasks/complete`
    /// (0..=10,000, `id` required): report what finished and ask for more in one round trip.
    /// They are committed before the claim looks for work, whatever it finds; their outcomes
    /// are `ClaimResponse::completed`, in order [none].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_items = 10000)]
    pub complete: Option<Vec<CompleteRequest>>,
    /// Failures to record before the claim, as the items of `POST /v1/tasks/fail` (0..=10,000,
    /// `id` required; `worker` defaults to this claim's); outcomes in `ClaimResponse::failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(max_items = 10000)]
    pub fail: Option<Vec<FailRequest>>,
}

/// Answer of `POST /v1/queues/{queue}/claims/{claim_id}/release`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct ClaimReleased {
    /// The tasks handed back (now `available`, their attempt not counted); empty when the
    /// claim took nothing or its tasks were finished or handed back already.
    pub released: Vec<i64>,
}

/// One item of `POST /v1/tasks/release`: a task held but not started, handed back.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseItem {
    /// Task id.
    #[schema(minimum = 1)]
    pub id: i64,
    /// The lease token of the claim.
    #[schema(min_length = 1)]
    pub lease: String,
}

impl ReleaseItem {
    /// Checks the fields the document bounds.
    ///
    /// # Errors
    /// A message naming the bad field.
    pub fn validate(&self) -> Result<(), String> {
        check_lease("lease", &self.lease)
    }
}

/// Checks a lease token a request carries against the document's `minLength: 1`: an empty one
/// is a malformed request (400); any other token the task does not hold is `lease_lost`.
///
/// # Errors
/// `<field> must not be empty`.
pub fn check_lease(field: &str, lease: &str) -> Result<(), String> {
    if lease.is_empty() {
        return Err(format!("{field} must not be empty"));
    }
    Ok(())
}

/// Checks the `id` of a complete or fail item (the document's `minimum: 1`); whether it must
/// be there is the route's to say.
fn check_item_id(id: Option<i64>) -> Result<(), String> {
    match id {
        Some(i) if i < 1 => Err(format!("id must be a task id, at least 1, got {i}")),
        _ => Ok(()),
    }
}

/// Answer of a claim: the tasks, each with its `lease`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct ClaimResponse {
    /// Claimed tasks (empty when none was available within `wait`, and when the claim asked
    /// for `lean` tasks).
    pub tasks: Vec<Task>,
    /// With `lean: true`: the claimed tasks, lean (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lean: Option<Vec<LeanTask>>,
    /// The outcomes of the claim's `complete` items, in order (absent without them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed: Option<Vec<ItemOutcome>>,
    /// The outcomes of the claim's `fail` items, in order (absent without them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<Vec<ItemOutcome>>,
}

/// A claimed task as a lean claim answers it (`ClaimRequest::lean`): what a handler needs and
/// a worker uses to hold the lease.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct LeanTask {
    /// Task id.
    pub id: i64,
    /// Handler/type name.
    pub kind: String,
    /// Any JSON.
    pub payload: Value,
    /// This attempt's number (1 = the first).
    pub attempt: i32,
    /// Attempts allowed.
    pub max_attempts: i32,
    /// The stage it is at (absent for a single-stage task).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// Attempt timeout (humantime), counted from `attempted_at`.
    #[serde(with = "crate::duration::serde_str")]
    #[schema(value_type = String, example = "30s")]
    pub timeout: Duration,
    /// When this attempt started (the claim).
    #[schema(value_type = Option<String>, format = DateTime)]
    pub attempted_at: Option<Timestamp>,
    /// The lease.
    pub lease: crate::task::Lease,
    /// Trace id (32 hex digits), when the task has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// The durable process it is a step or timer of, when it is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<crate::task::ProcessRef>,
    /// The batch it belongs to, when it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_id: Option<i64>,
    /// A workflow task's dependencies' results by ref (see `Task::deps`), when it has them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub deps: Option<std::collections::BTreeMap<String, Value>>,
}

impl LeanTask {
    /// The lean view of a claimed task; `None` for a task without a lease (not a claim's).
    #[must_use]
    pub fn of(t: Task) -> Option<Self> {
        Some(Self {
            lease: t.lease?,
            id: t.id,
            kind: t.kind,
            payload: t.payload,
            attempt: t.attempt,
            max_attempts: t.max_attempts,
            stage: t.stage,
            timeout: t.timeout,
            attempted_at: t.attempted_at,
            trace_id: t.trace_id,
            process: t.process,
            batch_id: t.batch_id,
            deps: t.deps,
        })
    }
}

/// `POST /v1/tasks/{id}/heartbeat`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatRequest {
    /// The lease token of the claim.
    #[schema(min_length = 1)]
    pub lease: String,
    /// Progress to record (any JSON, ≤ 1 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Value>,
    /// New lease length from now, 100 ms..=30 days [the claim's].
    #[serde(
        default,
        with = "crate::duration::serde_opt",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, example = "30s")]
    pub extend: Option<Duration>,
}

impl HeartbeatRequest {
    /// Checks the fields the document bounds (`extend` is checked by the server: 100 ms..=30
    /// days).
    ///
    /// # Errors
    /// A message naming the bad field.
    pub fn validate(&self) -> Result<(), String> {
        check_lease("lease", &self.lease)
    }
}

/// `POST /v1/tasks/{id}/complete`, or one item of `POST /v1/tasks/complete` (then `id` is
/// required).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompleteRequest {
    /// Task id (batch items only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub id: Option<i64>,
    /// The lease token of the claim.
    #[schema(min_length = 1)]
    pub lease: String,
    /// What the attempt returned (any JSON, ≤ 1 MiB).
    #[serde(default)]
    pub result: Value,
    /// Hand the task on to this stage instead of finishing it (asyncflow's multi-stage
    /// tasks): same id, back to available (or scheduled by `run_at`/`run_in`), attempts
    /// counted again from 1; its stage history and run log are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$"
    )]
    pub next_stage: Option<String>,
    /// With `next_stage`: the task's new payload (the next stage's context) [kept].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    /// With `next_stage`: the new priority [kept].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// With `next_stage`: when the next stage may start [now].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub run_at: Option<Timestamp>,
    /// With `next_stage`: start the next stage after this delay, instead of `run_at`.
    #[serde(
        default,
        with = "crate::duration::serde_opt",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, example = "5m")]
    pub run_in: Option<Duration>,
}

impl CompleteRequest {
    /// Checks the request and resolves the stage hand-off it asks for at `now` (None: the
    /// task finishes).
    ///
    /// # Errors
    /// A message naming the bad field.
    pub fn next(&self, now: Timestamp) -> Result<Option<crate::task::NextStage>, String> {
        check_lease("lease", &self.lease)?;
        check_item_id(self.id)?;
        let Some(stage) = &self.next_stage else {
            if self.payload.is_some()
                || self.priority.is_some()
                || self.run_at.is_some()
                || self.run_in.is_some()
            {
                return Err(
                    "payload, priority, run_at and run_in go with next_stage (a finished task keeps its own)"
                        .into(),
                );
            }
            return Ok(None);
        };
        crate::task::check_name("next_stage", stage)?;
        if self.payload.as_ref().is_some_and(crate::task::has_nul) {
            return Err("payload must not contain NUL characters (\\u0000)".into());
        }
        if self.run_at.is_some() && self.run_in.is_some() {
            return Err("give run_at or run_in, not both".into());
        }
        if let Some(t) = self.run_at {
            crate::time::check("run_at", t)?;
        }
        let run_at = match (self.run_at, self.run_in) {
            (Some(t), _) => t,
            (None, Some(d)) => crate::time::add(now, d),
            (None, None) => now,
        };
        use chrono::SubsecRound;
        let run_at = run_at.trunc_subsecs(6);
        Ok(Some(crate::task::NextStage {
            stage: stage.clone(),
            state: if run_at > now {
                TaskState::Scheduled
            } else {
                TaskState::Available
            },
            run_at,
            payload: self.payload.clone(),
            priority: self.priority,
        }))
    }
}

/// `POST /v1/tasks/{id}/fail`, or one item of `POST /v1/tasks/fail` (then `id` is required).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FailRequest {
    /// Task id (batch items only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub id: Option<i64>,
    /// The lease token of the claim.
    #[schema(min_length = 1)]
    pub lease: String,
    /// What went wrong (kept in the task's `errors`).
    pub error: String,
    /// Retry after this delay instead of the backoff.
    #[serde(
        default,
        with = "crate::duration::serde_opt",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, example = "30s")]
    pub retry_in: Option<Duration>,
    /// Do not retry: discard now.
    #[serde(default)]
    pub permanent: bool,
    /// Worker name recorded with the error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$"
    )]
    pub worker: Option<String>,
}

impl FailRequest {
    /// Checks the fields the document bounds (`retry_in` is any duration).
    ///
    /// # Errors
    /// A message naming the bad field.
    pub fn validate(&self) -> Result<(), String> {
        check_lease("lease", &self.lease)?;
        check_item_id(self.id)?;
        if let Some(w) = &self.worker {
            crate::task::check_name("worker", w)?;
        }
        Ok(())
    }
}

/// `POST /v1/tasks/complete` and `POST /v1/tasks/fail`: many items in one statement.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchRequest<T> {
    /// 1..=10,000 items.
    #[schema(min_items = 1, max_items = 10000)]
    pub items: Vec<T>,
}

/// The answer to one complete or fail.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct Finished {
    /// Task id.
    pub id: i64,
    /// The task's state now (`completed`, `retryable`, `discarded`).
    pub state: TaskState,
    /// Its next start (retryable) or its last `run_at`.
    #[schema(value_type = String, format = DateTime)]
    pub run_at: Timestamp,
}

/// One item's result in a batch answer: `outcome` is `ok` (then `state` and `run_at`),
/// `lease_lost`, `cancelled`, `timed_out` or `not_found`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct ItemOutcome {
    /// Task id.
    pub id: i64,
    /// `ok`, `lease_lost`, `cancelled`, `timed_out`, `not_found`.
    #[schema(value_type = String, pattern = "^(ok|lease_lost|cancelled|timed_out|not_found)$")]
    pub outcome: String,
    /// New state (`ok` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<TaskState>,
    /// Next start (`ok` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub run_at: Option<Timestamp>,
}

/// Answer of a batch complete or fail, one result per item in input order.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct BatchResponse {
    /// Results.
    pub results: Vec<ItemOutcome>,
}

/// A page of `GET /v1/tasks`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct TaskPage {
    /// Tasks.
    pub tasks: Vec<Task>,
    /// Cursor for the next page (`after=`), when there may be more.
    pub next_after: Option<i64>,
}

/// A node as `GET /v1/nodes` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct NodeView {
    /// Node name.
    pub name: String,
    /// `active`, `lost` (silent for 3 heartbeat periods) or `stopped`.
    pub state: String,
    /// When it started.
    #[schema(value_type = String, format = DateTime)]
    pub started_at: Timestamp,
    /// Its last heartbeat.
    #[schema(value_type = String, format = DateTime)]
    pub heartbeat_at: Timestamp,
    /// When it shut down cleanly.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub stopped_at: Option<Timestamp>,
    /// docket version.
    pub version: String,
    /// Free-form details (pid, …).
    pub info: Value,
}

/// Answer of `GET /v1/nodes`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct NodeList {
    /// Every node in the registry.
    pub nodes: Vec<NodeView>,
}

/// A worker's state: node-daemons' `STATE_IDLE`, `STATE_WORK`, `STATE_STOP`, and `lost` for a
/// worker that missed three reports in a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkerState {
    /// Running, no task in hand (between claims).
    Idle,
    /// Running tasks.
    Work,
    /// Stopped (shut down, or stopping: finishing what it holds).
    Stop,
    /// Silent for three report intervals (set by the server; a worker cannot report it).
    Lost,
}

/// Most task ids one worker report lists.
pub const MAX_REPORT_TASKS: usize = 10_000;

/// `POST /v1/workers/{name}/report`: what a worker tells the server every `interval`
/// (`docket worker` does it on its own).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkerReport {
    /// `idle`, `work` or `stop`.
    pub state: WorkerState,
    /// Ids of the tasks in hand (≤ 10,000).
    #[serde(default)]
    #[schema(max_items = 10000)]
    pub tasks: Vec<i64>,
    /// The queue it works.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// The kinds it takes (empty: every kind).
    #[serde(default)]
    pub kinds: Vec<String>,
    // `i32`, as the document's `int32` says: a larger number is refused when the body is read
    // (so are `pid` and `restarts`); `validate` refuses a negative one.
    /// Tasks it runs at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0)]
    pub concurrency: Option<i32>,
    /// Host it runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Its process id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0)]
    pub pid: Option<i32>,
    /// How often its supervisor restarted it after a crash.
    #[serde(default)]
    #[schema(minimum = 0)]
    pub restarts: i32,
    /// When it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub started_at: Option<Timestamp>,
    /// How often it reports, 100 ms..=1 h; it is `lost` after three intervals of silence.
    #[serde(with = "crate::duration::serde_str")]
    #[schema(value_type = String, example = "5s")]
    pub interval: Duration,
    /// The labels it claims with (issue 43; `docket worker --label`) [none].
    #[serde(default, skip_serializing_if = "crate::labels::Labels::is_empty")]
    #[schema(schema_with = crate::labels::labels_schema)]
    pub labels: crate::labels::Labels,
}

impl WorkerReport {
    /// Checks the fields.
    ///
    /// # Errors
    /// A message naming the bad field.
    pub fn validate(&self) -> Result<(), String> {
        if self.state == WorkerState::Lost {
            return Err("state must be idle, work or stop (lost is the server's word)".into());
        }
        if self.tasks.len() > MAX_REPORT_TASKS {
            return Err(format!("tasks lists at most {MAX_REPORT_TASKS} ids"));
        }
        for (f, v) in [
            ("concurrency", self.concurrency),
            ("pid", self.pid),
            ("restarts", Some(self.restarts)),
        ] {
            if v.is_some_and(|v| v < 0) {
                return Err(format!("{f} must not be negative"));
            }
        }
        if self.interval < Duration::from_millis(100) || self.interval > Duration::from_secs(3600) {
            return Err(format!(
                "interval must be within 100ms..=1h, got {}",
                crate::duration::format(self.interval)
            ));
        }
        if let Some(q) = &self.queue {
            crate::task::check_name("queue", q)?;
        }
        for (i, k) in self.kinds.iter().enumerate() {
            crate::task::check_name(&format!("kinds[{i}]"), k)?;
        }
        if let Some(h) = &self.host {
            crate::task::check_name("host", h)?;
        }
        if let Some(t) = self.started_at {
            crate::time::check("started_at", t)?;
        }
        crate::labels::check_labels("labels", &self.labels)?;
        Ok(())
    }
}

/// One worker in `GET /v1/workers`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct WorkerView {
    /// Its name.
    pub name: String,
    /// Its state now: the reported one, or `lost`.
    pub state: WorkerState,
    /// When it last reported.
    #[schema(value_type = String, format = DateTime)]
    pub reported_at: Timestamp,
    /// Its last report.
    pub report: WorkerReport,
}

/// `GET /v1/workers`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct WorkerList {
    /// Every worker that reported (within the nodes' retention), by name.
    pub workers: Vec<WorkerView>,
}

/// `POST /v1/tasks` with several tasks, inserted in one transaction (all or none).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewTaskBatch {
    /// 1..=10,000 tasks.
    #[schema(min_items = 1, max_items = 10000)]
    pub tasks: Vec<NewTask>,
}

/// Answer of a batch enqueue: the tasks in input order (an existing task for a taken
/// `unique_key`, with `inserted: false`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskBatch {
    /// Tasks.
    pub tasks: Vec<Task>,
}

/// Answer of `GET /v1/queues`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct QueueList {
    /// Every queue that has tasks or settings.
    pub queues: Vec<QueueStats>,
}

/// Answer of `GET /v1/schedules`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct ScheduleList {
    /// Every schedule, by name.
    pub schedules: Vec<Schedule>,
}

/// A namespace of durable processes: `GET/PUT /v1/namespaces/{ns}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct NamespaceView {
    /// Namespace name.
    pub name: String,
    /// Its configuration, defaults filled in.
    pub config: NamespaceConfig,
}

/// Answer of `GET /v1/namespaces`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct NamespaceList {
    /// Every namespace.
    pub namespaces: Vec<NamespaceView>,
}

/// `POST /v1/namespaces/{ns}/processes` (progressor's init).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessInitRequest {
    /// The new process's id (1–256 characters).
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$"
    )]
    pub id: String,
    /// Arguments for the processor (any JSON, ≤ 1 MiB).
    #[serde(default)]
    pub args: Value,
    /// Caller context passed to the processor (progressor's context).
    #[serde(default)]
    pub context: Value,
    /// A repeated request with the same key gets the first one's answer (1–256 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$"
    )]
    pub idempotency_key: Option<String>,
}

impl ProcessInitRequest {
    /// Checks the fields the document bounds (`id` is checked with the process).
    ///
    /// # Errors
    /// A message naming the bad field.
    pub fn validate(&self) -> Result<(), String> {
        check_idempotency_key(self.idempotency_key.as_deref())
    }
}

fn check_idempotency_key(k: Option<&str>) -> Result<(), String> {
    k.map_or(Ok(()), |k| crate::task::check_name("idempotency_key", k))
}

/// `POST /v1/namespaces/{ns}/processes/{id}/call` and `…/repair`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProcessCallRequest {
    /// Arguments for the processor (any JSON, ≤ 1 MiB).
    #[serde(default)]
    pub args: Value,
    /// Caller context passed to the processor.
    #[serde(default)]
    pub context: Value,
    /// A repeated request with the same key gets the first one's answer (1–256 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$"
    )]
    pub idempotency_key: Option<String>,
    /// Which events of the history the processor is sent [all].
    #[serde(default)]
    pub range: HistoryRange,
}

impl ProcessCallRequest {
    /// Checks the fields the document bounds.
    ///
    /// # Errors
    /// A message naming the bad field.
    pub fn validate(&self) -> Result<(), String> {
        check_idempotency_key(self.idempotency_key.as_deref())?;
        self.range.validate().map_err(|e| format!("range.{e}"))
    }
}

/// Answer of init, call and repair: what the processor answered.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct ProcessResponse {
    /// The processor's `response`.
    pub response: Value,
}

/// Answer of `GET /v1/namespaces/{ns}/processes/{id}`: the process with a range of history.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct ProcessView {
    /// The process.
    pub process: Process,
    /// The requested range of its events.
    pub history: Vec<Event>,
    /// Id of its newest event (0: none).
    pub last_event_id: i64,
}

/// Answer of `PUT /v1/namespaces/{ns}/processes/{id}` (import).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct ProcessImported {
    /// The imported process.
    pub process: Process,
    /// Id of its newest event.
    pub last_event_id: i64,
}

/// Answer of `POST …/simple-repair`: the process, back to `running`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct ProcessRepaired {
    /// The process.
    pub process: Process,
}

/// A page of `GET /v1/namespaces/{ns}/processes`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct ProcessPage {
    /// Processes, by id.
    pub processes: Vec<Process>,
    /// Cursor for the next page (`after=`), when there may be more.
    pub next_after: Option<String>,
}

/// One task of a process's trace, with the events it produced.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct TraceTask {
    /// The task.
    #[serde(flatten)]
    pub task: Task,
    /// Events it produced, in order.
    pub events: Vec<Event>,
}

/// Answer of `GET /v1/namespaces/{ns}/processes/{id}/trace`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct ProcessTrace {
    /// Every task of the process, oldest first.
    pub tasks: Vec<TraceTask>,
}

/// `POST /v1/tokens` (admin): a new API token.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenCreateRequest {
    /// Name (1–256 characters; unique among tokens not revoked); recorded in the audit log.
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$"
    )]
    pub name: String,
    /// Scopes: `admin`, `read`, `enqueue`, `work`, `process`, `sql`.
    #[schema(min_items = 1)]
    pub scopes: Vec<crate::auth::Scope>,
    /// With `work`: only these queues [every queue].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<String>,
    /// Stops working after this long (humantime, 1 s ..= 36500 days) [never].
    #[serde(
        default,
        with = "crate::duration::serde_opt",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, example = "30d")]
    pub expires_in: Option<Duration>,
}

/// A token as listed: never the token itself, which only [`TokenCreated`] carries, once.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct TokenView {
    /// Name.
    pub name: String,
    /// Scopes.
    pub scopes: Vec<crate::auth::Scope>,
    /// With `work`: only these queues (empty: every queue).
    pub queues: Vec<String>,
    /// Created.
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Timestamp,
    /// When it stops working (null: never).
    #[schema(value_type = Option<String>, format = DateTime)]
    pub expires_at: Option<Timestamp>,
    /// When it was revoked (null: it was not).
    #[schema(value_type = Option<String>, format = DateTime)]
    pub revoked_at: Option<Timestamp>,
    /// Last request made with it (written at most once a minute).
    #[schema(value_type = Option<String>, format = DateTime)]
    pub last_used_at: Option<Timestamp>,
}

/// Answer of `POST /v1/tokens`: the token — shown this once; only its SHA-256 is stored.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct TokenCreated {
    /// The token, for `Authorization: Bearer …`.
    pub token: String,
    /// What was stored.
    pub info: TokenView,
}

/// Answer of `GET /v1/tokens`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct TokenList {
    /// Every token, revoked ones included, oldest first.
    pub tokens: Vec<TokenView>,
}

/// A task list query (`GET /v1/tasks`, the dashboard, the store's `task_list`): filters combine
/// with AND; keyset paging by id.
#[derive(Debug, Clone, Default)]
pub struct TaskListParams {
    /// Only this queue.
    pub queue: Option<String>,
    /// Only these states (empty: any state).
    pub states: Vec<TaskState>,
    /// Only this kind.
    pub kind: Option<String>,
    /// Only this concurrency key (a process's tasks: `<namespace>:<id>`).
    pub concurrency_key: Option<String>,
    /// Only this user's tasks.
    pub user_id: Option<String>,
    /// Only ids greater than this (ascending order) or smaller (descending).
    pub after: Option<i64>,
    /// Newest first.
    pub descending: bool,
    /// At most this many.
    pub limit: i64,
    /// Only tasks whose payload or errors contain this text (case-insensitive). Bounded: see
    /// [`TaskListParams::text_window`].
    pub text: Option<String>,
    /// Only tasks with this trace id (W3C trace context, 32 hex digits). Bounded like `text`.
    pub trace_id: Option<String>,
    /// Only tasks with this unique key (the unfinished one and any kept finished ones).
    pub unique_key: Option<String>,
    /// Only tasks with this tag (an index on every backend: GIN on PostgreSQL, a side table
    /// elsewhere).
    pub tag: Option<String>,
    /// Only tasks whose last attempt ran on this worker. Bounded like `text`.
    pub worker: Option<String>,
    /// Only ids at or above this (set by [`TaskListParams::text_window`]).
    pub min_id: Option<i64>,
    /// Only ids at or below this (set by [`TaskListParams::text_window`]).
    pub max_id: Option<i64>,
}

/// Most task ids a search without an index reads per page (100,000): `text` (a substring of
/// payload or errors), `trace_id` and `worker`. A search for something rare would otherwise read
/// every task kept (issue 27: search that does not hurt the database). Every task gets a trace
/// id, so an index on it would cost every enqueue a random-key index insert; the window costs
/// nothing until someone searches. The page's `next_after` continues past the window.
pub const TEXT_SEARCH_IDS: i64 = 100_000;

impl TaskListParams {
    /// Searches no index serves: `text`, `trace_id` or `worker`.
    pub fn unindexed(&self) -> bool {
        self.text.is_some() || self.trace_id.is_some() || self.worker.is_some()
    }

    /// Bounds an [`unindexed`](Self::unindexed) search to [`TEXT_SEARCH_IDS`] ids from where
    /// the page starts (`after`, or past `newest`, the highest id there is, newest first): sets
    /// `min_id` / `max_id`. Nothing changes for other lists.
    pub fn text_window(&mut self, newest: i64) {
        if !self.unindexed() {
            return;
        }
        if self.descending {
            let top = self.after.unwrap_or(newest.saturating_add(1));
            self.min_id = Some(top.saturating_sub(TEXT_SEARCH_IDS).max(0));
        } else {
            self.max_id = Some(self.after.unwrap_or(0).saturating_add(TEXT_SEARCH_IDS));
        }
    }

    /// The page's `next_after`: the last id of a full page; for a short page of a bounded
    /// search that stopped before the oldest (or newest) id, the window's edge, so paging goes
    /// on; else `None`.
    pub fn next_after(&self, ids: &[i64], newest: i64) -> Option<i64> {
        if ids.len() as i64 >= self.limit {
            return ids.last().copied();
        }
        match (self.descending, self.min_id, self.max_id) {
            (true, Some(min), _) if min > 1 => Some(min),
            (false, _, Some(max)) if max < newest => Some(max),
            _ => None,
        }
    }
}

/// Finished tasks in one minute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Throughput {
    /// Start of the minute.
    #[schema(value_type = String, format = DateTime)]
    pub minute: Timestamp,
    /// Tasks completed.
    pub completed: i64,
    /// Tasks discarded (failed for good).
    pub failed: i64,
}

/// One operator action of the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AuditEntry {
    /// Sequence number.
    pub id: i64,
    /// When.
    #[schema(value_type = String, format = DateTime)]
    pub at: Timestamp,
    /// Who (`X-Docket-Actor` header, or `dashboard@IP` / `api@IP`).
    pub actor: String,
    /// What (`task.cancel`, `queue.pause`, …).
    pub action: String,
    /// On what (`task:12`, `queue:emails`, …).
    pub target: String,
    /// Anything else.
    pub detail: Option<Value>,
}

/// The oldest available task of a queue (what the queue-lag gauge reads).
#[derive(Debug, Clone, PartialEq)]
pub struct QueueOldest {
    /// The queue.
    pub queue: String,
    /// `run_at` of its oldest available task.
    pub run_at: Timestamp,
}

/// Connections of the database pool(s) of this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStats {
    /// Checked out.
    pub in_use: usize,
    /// Open and idle.
    pub idle: usize,
}

/// A node of the cluster as recorded in `docket_nodes`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NodeRecord {
    /// Node name.
    pub name: String,
    /// When it started.
    pub started_at: Timestamp,
    /// Its last heartbeat.
    pub heartbeat_at: Timestamp,
    /// When it stopped cleanly, if it did.
    pub stopped_at: Option<Timestamp>,
    /// Since when it is drained (claims nothing), if it is; a heartbeat keeps it.
    #[serde(default)]
    pub draining_at: Option<Timestamp>,
    /// docket version it runs.
    pub version: String,
    /// Free-form info (listen address, pid).
    pub info: Value,
}

/// Which database docket keeps its tasks in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// PostgreSQL.
    Postgres,
    /// SQLite.
    Sqlite,
    /// MySQL 8.0+ or MariaDB 10.6+.
    MySql,
}

impl Backend {
    /// Whether other processes' changes can wake this node (PostgreSQL's LISTEN/NOTIFY); the
    /// others poll.
    pub fn listens(self) -> bool {
        self == Backend::Postgres
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_searches_read_a_bounded_window_and_page_on() {
        let mut p = TaskListParams {
            text: Some("needle".into()),
            descending: true,
            limit: 50,
            ..Default::default()
        };
        p.text_window(250_000);
        assert_eq!(p.min_id, Some(150_001));
        assert_eq!(p.next_after(&[200_000], 250_000), Some(150_001));
        p.after = Some(50_000);
        p.min_id = None;
        p.text_window(250_000);
        assert_eq!(p.min_id, Some(0), "never below zero");
        assert_eq!(p.next_after(&[], 250_000), None, "the oldest reached");
        let mut up = TaskListParams {
            text: Some("x".into()),
            limit: 2,
            ..Default::default()
        };
        up.text_window(250_000);
        assert_eq!(up.max_id, Some(100_000));
        assert_eq!(up.next_after(&[5], 250_000), Some(100_000));
        assert_eq!(up.next_after(&[5, 6], 250_000), Some(6), "a full page");
        let mut plain = TaskListParams {
            limit: 10,
            ..Default::default()
        };
        plain.text_window(i64::MAX);
        assert_eq!((plain.min_id, plain.max_id), (None, None));
        assert_eq!(plain.next_after(&[1], 5), None);
    }
}
