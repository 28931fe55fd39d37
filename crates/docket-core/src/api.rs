//! Request and response bodies of the worker-facing HTTP API (claim, heartbeat, complete, fail,
//! their batch forms, task pages, nodes), in one place: the server parses and answers with
//! these types and the client sends and reads them, so the two cannot drift apart. Durations
//! are humantime strings on the wire.

use crate::{Task, TaskState, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

/// `POST /v1/queues/{queue}/claim`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    /// Worker name recorded on the tasks (1–256 characters).
    pub worker: String,
    /// Most tasks to claim, 1..=10,000 [1].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<i64>,
    /// Only tasks of these kinds (1..=100 names; asyncflow's hold by task type) [any kind].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kinds: Option<Vec<String>>,
    /// Lease per task, 100 ms..=30 days [the task's timeout]; never past the attempt deadline.
    #[serde(
        default,
        with = "crate::duration::serde_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub lease: Option<Duration>,
    /// Long-poll: wait up to this long (≤ 60 s) for a task when none is available [0].
    #[serde(
        default,
        with = "crate::duration::serde_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub wait: Option<Duration>,
}

/// Answer of a claim: the tasks, each with its `lease`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ClaimResponse {
    /// Claimed tasks (empty when none was available within `wait`).
    pub tasks: Vec<Task>,
}

/// `POST /v1/tasks/{id}/heartbeat`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatRequest {
    /// The lease token of the claim.
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
    pub extend: Option<Duration>,
}

/// `POST /v1/tasks/{id}/complete`, or one item of `POST /v1/tasks/complete` (then `id` is
/// required).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CompleteRequest {
    /// Task id (batch items only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    /// The lease token of the claim.
    pub lease: String,
    /// What the attempt returned (any JSON, ≤ 1 MiB).
    #[serde(default)]
    pub result: Value,
}

/// `POST /v1/tasks/{id}/fail`, or one item of `POST /v1/tasks/fail` (then `id` is required).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FailRequest {
    /// Task id (batch items only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    /// The lease token of the claim.
    pub lease: String,
    /// What went wrong (kept in the task's `errors`).
    pub error: String,
    /// Retry after this delay instead of the backoff.
    #[serde(
        default,
        with = "crate::duration::serde_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub retry_in: Option<Duration>,
    /// Do not retry: discard now.
    #[serde(default)]
    pub permanent: bool,
    /// Worker name recorded with the error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
}

/// `POST /v1/tasks/complete` and `POST /v1/tasks/fail`: many items in one statement.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BatchRequest<T> {
    /// 1..=10,000 items.
    pub items: Vec<T>,
}

/// The answer to one complete or fail.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Finished {
    /// Task id.
    pub id: i64,
    /// The task's state now (`completed`, `retryable`, `discarded`).
    pub state: TaskState,
    /// Its next start (retryable) or its last `run_at`.
    pub run_at: Timestamp,
}

/// One item's result in a batch answer: `outcome` is `ok` (then `state` and `run_at`),
/// `lease_lost`, `cancelled`, `timed_out` or `not_found`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ItemOutcome {
    /// Task id.
    pub id: i64,
    /// `ok`, `lease_lost`, `cancelled`, `timed_out`, `not_found`.
    pub outcome: String,
    /// New state (`ok` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<TaskState>,
    /// Next start (`ok` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_at: Option<Timestamp>,
}

/// Answer of a batch complete or fail, one result per item in input order.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct BatchResponse {
    /// Results.
    pub results: Vec<ItemOutcome>,
}

/// A page of `GET /v1/tasks`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct TaskPage {
    /// Tasks.
    pub tasks: Vec<Task>,
    /// Cursor for the next page (`after=`), when there may be more.
    pub next_after: Option<i64>,
}

/// A node as `GET /v1/nodes` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NodeView {
    /// Node name.
    pub name: String,
    /// `active`, `lost` (silent for 3 heartbeat periods) or `stopped`.
    pub state: String,
    /// When it started.
    pub started_at: Timestamp,
    /// Its last heartbeat.
    pub heartbeat_at: Timestamp,
    /// When it shut down cleanly.
    pub stopped_at: Option<Timestamp>,
    /// docket version.
    pub version: String,
    /// Free-form details (pid, …).
    pub info: Value,
}

/// Answer of `GET /v1/nodes`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct NodeList {
    /// Every node in the registry.
    pub nodes: Vec<NodeView>,
}
