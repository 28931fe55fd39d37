//! The server's own request and response bodies that are not `docket_core::api`'s (health,
//! status, the task-or-batch union, server-sent events, the audit page): the handlers answer
//! with them and the OpenAPI document names them.

use docket_core::api::{NewTaskBatch, NodeView, TaskBatch};
use docket_core::{NewTask, QueueStats, Task, Timestamp};
use serde::Serialize;
use utoipa::ToSchema;

/// What a namespace's processor answers instead of a [`docket_core::process::ProcessorResult`]
/// when the step failed (progressor's error reply).
#[derive(Serialize, ToSchema)]
#[allow(dead_code)] // Only its shape is used, for the document.
pub(crate) struct ProcessorError {
    /// The error, any JSON; the process goes to `error` (or the step is retried).
    pub error: serde_json::Value,
}

/// `GET /healthz`.
#[derive(Serialize, ToSchema)]
pub(crate) struct Health {
    /// `ok`.
    pub status: String,
    /// This node's name.
    pub node: String,
    /// Seconds since this node's maintenance loop last finished a pass (null: not yet).
    pub maintenance_last_pass_seconds_ago: Option<f64>,
}

/// `POST /v1/tasks`: one task, or `{"tasks": [...]}`.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)] // Only its shape is used, for the document.
pub(crate) enum TaskOrBatch {
    /// One task.
    One(Box<NewTask>),
    /// Several, in one transaction.
    Many(NewTaskBatch),
}

/// Answer of `POST /v1/tasks`: the task, or `{"tasks": [...]}` for a batch.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)] // Only its shape is used, for the document.
pub(crate) enum TaskOrBatchAnswer {
    /// One task.
    One(Box<Task>),
    /// Several.
    Many(TaskBatch),
}

/// One server-sent event (`text/event-stream`).
#[derive(Serialize, ToSchema)]
#[allow(dead_code)] // Only its shape is used, for the document.
pub(crate) struct SseEvent {
    /// Event name (`event`, `created`, … or `changed`).
    pub event: Option<String>,
    /// The event's data line(s): a JSON `Notification` on `/v1/events`.
    pub data: String,
    /// The SSE id: the notification's `seq`.
    pub id: Option<String>,
    /// Reconnect delay, ms.
    pub retry: Option<i64>,
}

/// Answer of `GET /v1/audit`.
#[derive(Serialize, ToSchema)]
pub(crate) struct AuditPage {
    /// Newest first.
    pub entries: Vec<docket_core::api::AuditEntry>,
}

/// A queue in `GET /v1/status`: its settings and counts, and its oldest available task.
#[derive(Serialize, ToSchema)]
pub(crate) struct QueueStatus {
    /// Settings and counts.
    #[serde(flatten)]
    pub queue: QueueStats,
    /// `run_at` of its oldest available task (null: none).
    #[schema(value_type = Option<String>, format = DateTime)]
    pub oldest_available_at: Option<Timestamp>,
}

/// Schedules in `GET /v1/status`.
#[derive(Serialize, ToSchema)]
pub(crate) struct ScheduleCounts {
    /// Every schedule.
    pub total: usize,
    /// Paused ones.
    pub paused: usize,
}

/// The last hour in `GET /v1/status`.
#[derive(Serialize, ToSchema)]
pub(crate) struct LastHour {
    /// Tasks completed.
    pub completed: i64,
    /// Tasks discarded.
    pub failed: i64,
    /// Per minute, oldest first.
    pub per_minute: Vec<docket_core::api::Throughput>,
}

/// Answer of `GET /v1/status`.
#[derive(Serialize, ToSchema)]
pub(crate) struct StatusView {
    /// The server's clock.
    #[schema(value_type = String, format = DateTime)]
    pub now: Timestamp,
    /// Every queue.
    pub queues: Vec<QueueStatus>,
    /// Every node.
    pub nodes: Vec<NodeView>,
    /// Schedules.
    pub schedules: ScheduleCounts,
    /// Throughput.
    pub last_hour: LastHour,
}
