//! The OpenAPI document of the API, generated with utoipa from the handlers' `#[utoipa::path]`
//! attributes and the request/response types (`docket_core::api` and the domain types), so
//! the document cannot drift from the code. Served at `/openapi.json`; a copy is checked in as
//! `crates/docket-server/openapi.json` for review, and a test fails when the two differ
//! (`UPDATE_OPENAPI=1 cargo test -p docket-server --lib openapi` rewrites it).

use crate::error::ErrorBody;
use docket_core::api::{NewTaskBatch, NodeView, TaskBatch};
use docket_core::{NewTask, QueueStats, Task, Timestamp};
use serde::Serialize;
use std::sync::OnceLock;
use utoipa::openapi::{RefOr, Response};
use utoipa::{Modify, OpenApi, ToSchema};

/// Every status code every operation can answer besides its own: 400 (a malformed request)
/// and 503 (the database is unreachable).
const COMMON_ERRORS: &[(&str, &str)] = &[
    (
        "400",
        "invalid_json, invalid_request, invalid_duration, invalid_text, …",
    ),
    ("503", "unavailable: the database did not answer"),
];

#[derive(OpenApi)]
#[openapi(
    info(
        title = "docket",
        description = "Durable tasks over HTTP. Times are RFC 3339 UTC; durations humantime strings (at most 36500 days). Errors: {\"error\": {\"code\", \"message\", \"details\"?}}; each code has exactly one status (see the Code schema and README \"Errors\")."
    ),
    paths(
        crate::healthz,
        crate::openapi,
        crate::metrics_text,
        crate::task_add,
        crate::task_list,
        crate::task_complete_batch,
        crate::task_fail_batch,
        crate::task_get,
        crate::task_cancel,
        crate::task_retry,
        crate::task_run_now,
        crate::task_patch,
        crate::worker_report,
        crate::worker_list,
        crate::task_heartbeat,
        crate::task_complete,
        crate::task_fail,
        crate::queue_list,
        crate::queue_get,
        crate::queue_put,
        crate::queue_pause,
        crate::queue_resume,
        crate::queue_claim,
        crate::node_list,
        crate::node_drain,
        crate::node_resume,
        crate::namespace_list,
        crate::namespace_get,
        crate::namespace_put,
        crate::process_init,
        crate::process_list,
        crate::process_get,
        crate::process_put,
        crate::process_call,
        crate::process_repair,
        crate::process_simple_repair,
        crate::process_trace,
        crate::events_stream,
        crate::schedule_put,
        crate::schedule_list,
        crate::schedule_get,
        crate::schedule_delete,
        crate::schedule_pause,
        crate::schedule_resume,
        crate::audit_list,
        crate::status,
        crate::dashboard::changes,
        crate::token_create,
        crate::token_list,
        crate::token_revoke,
    ),
    components(schemas(
        docket_store::Notification,
        crate::error::Code,
        docket_core::process::ProcessorRequest,
        docket_core::process::ProcessorResult,
        ProcessorError,
    )),
    modifiers(&CommonErrors)
)]
struct ApiDoc;

/// Adds [`COMMON_ERRORS`] to every operation.
struct CommonErrors;

impl Modify for CommonErrors {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let error = |d: &str| -> RefOr<Response> {
            utoipa::openapi::ResponseBuilder::new()
                .description(d)
                .content(
                    "application/json",
                    utoipa::openapi::ContentBuilder::new()
                        .schema(Some(RefOr::Ref(utoipa::openapi::Ref::from_schema_name(
                            ErrorBody::name(),
                        ))))
                        .build(),
                )
                .into()
        };
        for item in doc.paths.paths.values_mut() {
            for op in [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ]
            .into_iter()
            .flatten()
            {
                for (status, d) in COMMON_ERRORS {
                    op.responses
                        .responses
                        .entry((*status).to_string())
                        .or_insert_with(|| error(d));
                }
            }
        }
    }
}

/// The document as JSON (built once).
pub fn document() -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    DOC.get_or_init(|| {
        let mut v = serde_json::to_value(ApiDoc::openapi()).expect("the document serialises");
        v["info"]["version"] = env!("CARGO_PKG_VERSION").into();
        open_all_of(&mut v);
        secure(&mut v);
        serde_json::to_string_pretty(&v).expect("the document serialises") + "\n"
    })
}

/// Declares the bearer-token scheme and, on every operation, the scope it needs
/// ([`docket_core::auth::needed_scope`], the rule the server applies; also as
/// `x-docket-scope`) and the answers auth and the request guards add: 401, 403 and 429 where a
/// token is needed, 415 on every write.
fn secure(v: &mut serde_json::Value) {
    use serde_json::json;
    let err = |d: &str| json!({"description": d, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}});
    let r = |name: &str| json!({"$ref": format!("#/components/responses/{name}")});
    v["components"]["responses"] = json!({
        "Unauthenticated": err("unauthenticated: no token, or an unknown, revoked or expired one"),
        "Forbidden": err("forbidden: the token lacks the scope (or queue) this needs, or a cross-site browser request"),
        "RateLimited": err("rate_limited: over the token's request rate or long-poll cap; see Retry-After"),
        "UnsupportedMediaType": err("unsupported_media_type: a body not declared application/json"),
    });
    v["components"]["securitySchemes"] = json!({"bearer": {
        "type": "http",
        "scheme": "bearer",
        "description": "An API token (`docket token create`). Needed when the server runs with `--auth required`, the default on any address but loopback; see README \"Security\"."
    }});
    let Some(paths) = v["paths"].as_object_mut() else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for (method, op) in item.iter_mut() {
            let m = method.to_ascii_uppercase();
            if !matches!(m.as_str(), "GET" | "PUT" | "POST" | "DELETE" | "PATCH") {
                continue;
            }
            let scope = docket_core::auth::needed_scope(&m, path);
            match scope {
                Some(sc) => {
                    op["security"] = json!([{"bearer": []}]);
                    op["x-docket-scope"] = sc.as_str().into();
                    let d = op["description"].as_str().unwrap_or("").to_string();
                    let sep = if d.is_empty() { "" } else { "\n\n" };
                    op["description"] = format!("{d}{sep}Scope: `{sc}`.").into();
                    let responses = &mut op["responses"];
                    responses["401"] = r("Unauthenticated");
                    responses["403"] = r("Forbidden");
                    responses["429"] = r("RateLimited");
                }
                None => {
                    op["security"] = json!([]);
                }
            }
            if m != "GET" && path.starts_with("/v1/") {
                op["responses"]["415"] = r("UnsupportedMediaType");
            }
        }
    }
}

/// A `#[serde(flatten)]` of a `deny_unknown_fields` type becomes an `allOf` whose member says
/// `additionalProperties: false`, which no object with the other members' properties can
/// match (JSON Schema checks each member alone). The members of an `allOf` are opened; the
/// flattened type must be inlined (`#[schema(inline)]`) for this to reach it.
fn open_all_of(v: &mut serde_json::Value) {
    // An inlined member may come wrapped in a one-element `oneOf` (to carry a description).
    fn open(member: &mut serde_json::Value) {
        if let Some(o) = member.as_object_mut() {
            o.remove("additionalProperties");
            if let Some(serde_json::Value::Array(one)) = o.get_mut("oneOf") {
                if one.len() == 1 {
                    open(&mut one[0]);
                }
            }
        }
    }
    match v {
        serde_json::Value::Object(m) => {
            if let Some(serde_json::Value::Array(members)) = m.get_mut("allOf") {
                members.iter_mut().for_each(open);
            }
            m.values_mut().for_each(open_all_of);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(open_all_of),
        _ => {}
    }
}

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
    pub entries: Vec<docket_store::AuditEntry>,
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
    pub per_minute: Vec<docket_store::Throughput>,
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

#[cfg(test)]
mod tests {
    /// The checked-in `openapi.json` is the generated document.
    #[test]
    fn openapi_json_is_generated() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.json");
        let doc = super::document();
        if std::env::var_os("UPDATE_OPENAPI").is_some() {
            std::fs::write(path, doc).unwrap();
        }
        let v: serde_json::Value = serde_json::from_str(doc).unwrap();
        // The processor contract (README "Durable processes") is in the document.
        for name in [
            "ProcessorRequest",
            "ProcessorResult",
            "ProcessorError",
            "Code",
        ] {
            assert!(v["components"]["schemas"][name].is_object(), "{name}");
        }
        let on_disk = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            on_disk == doc,
            "{path} is not the generated document: run UPDATE_OPENAPI=1 cargo test -p docket-server --lib openapi"
        );
    }
}
