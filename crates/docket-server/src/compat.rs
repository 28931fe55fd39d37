//! asyncflow's HTTP routes (seed 002), mounted under `/api` by `docket serve --compat
//! asyncflow`: asyncflow workers and clients run against docket unchanged. Each call maps onto
//! docket's model (docs: compat/asyncflow.md has the table):
//!
//! - a `taskType` is compared as asyncflow compares it, lower-cased ([`task_type`]): the seed
//!   creates `Lark` and reads, lists and holds it as `lark`. The lower-case type is a queue of
//!   that name (asyncflow keeps one table per type) and the task's kind; `taskStage` is the
//!   stage, `userId` the user, `taskContext` the payload;
//! - a task's id is asyncflow's `<id>_<type>_task_<table>` ([`asyncflow_id`], e.g.
//!   `12_lark_task_1`) in every answer; requests name a task by that or by docket's plain
//!   number ([`TaskRef::parse`]);
//! - `status`: 1 waiting (scheduled, available, retryable), 2 running, 3 success (completed),
//!   4 failed (discarded, cancelled);
//! - asyncflow has no leases: a held task is named by its id alone, so these routes act as the
//!   holder of a running task's lease (`LeaseStore::task_lease_token`);
//! - answers are asyncflow's envelope `{"msg", "code", "result"}`: `code` 0 and `msg` "ok" on
//!   success; on error the HTTP status is docket's (400, 404, 409, …), `code` the same number
//!   and `msg` docket's error code and message. Handlers fail with docket's [`ApiError`];
//!   [`envelope`] writes every error under `/api` in asyncflow's shape, whoever refused the
//!   request (a handler, auth, the cross-site check, an unknown route or method, a panic);
//! - they are guarded as `/v1` is, with its own checks: reads mask the payloads of
//!   `mask_payload` queues (`auth::mask_tasks`), a `work` token holds and sets only tasks
//!   of its queues (`auth::check_queue`), writes pass the cross-site check
//!   (`auth::api_guard`).

use crate::prelude::*;
use axum::http::{header, HeaderValue};
use axum::routing::{get, post};
use axum::Router;
use docket_core::patch::TaskPatch;
use docket_core::{TaskState, Timestamp};
use docket_engine::Claim;
use std::collections::HashMap;

/// The worker name recorded on tasks held through these routes.
const WORKER: &str = "asyncflow";
/// Most tasks one list or hold answers.
const MAX_LIMIT: i64 = 1000;

/// The routes, under `/api` (asyncflow's base URL is `http://host:8081/api`).
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/task_schedule_cfg/list", post(cfg_list))
        .route("/api/task/createTask", post(create_task))
        .route("/api/task/getTask", get(get_task))
        .route("/api/task/getTaskList", get(get_task_list))
        .route("/api/task/hold_task", post(hold_task))
        .route("/api/task/setTask", post(set_task))
        .route("/api/task/getUserTaskList", get(get_user_task_list))
}

/// Writes every error answer under `/api` in asyncflow's envelope: `{"msg": "<docket's code>:
/// <message>", "code": <the HTTP status>, "result": null}`, with the status and headers
/// (`Retry-After`) kept. Outside every layer of the router but CORS (with `--compat
/// asyncflow`), so it sees what auth, the rate limit, the cross-site check, the NUL check,
/// axum's own rejections, unknown routes and methods and a panic answer, in docket's shape
/// (`{"error": {"code", "message"}}`).
pub(crate) async fn envelope(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if !auth::under_api(req.uri().path()) {
        return next.run(req).await;
    }
    let resp = next.run(req).await;
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    // docket's error bodies are small; one that is not JSON (none should be) keeps its status.
    let body = axum::body::to_bytes(body, 64 * 1024)
        .await
        .unwrap_or_default();
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let text = |k: &str| v["error"][k].as_str().map(str::to_string);
    let code = text("code").unwrap_or_else(|| {
        match status.as_u16() {
            404 => Code::RouteNotFound,
            405 => Code::MethodNotAllowed,
            s if s >= 500 => Code::Internal,
            _ => Code::InvalidRequest,
        }
        .as_str()
        .to_string()
    });
    let message =
        text("message").unwrap_or_else(|| status.canonical_reason().unwrap_or("error").to_string());
    let body = json!({
        "msg": format!("{code}: {message}"),
        "code": status.as_u16(),
        "result": null,
    })
    .to_string();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Response::from_parts(parts, axum::body::Body::from(body))
}

type CompatResult = Result<Json<Value>, ApiError>;

fn bad(msg: impl Into<String>) -> ApiError {
    ApiError::invalid(msg)
}

fn ok(result: Value) -> CompatResult {
    Ok(Json(json!({"msg": "ok", "code": 0, "result": result})))
}

/// A task type as asyncflow names it: lower-cased (seed 002: a task created as `Lark` is
/// answered, listed and held as `lark`, in table `t_lark_task_1`; MySQL compares its
/// `task_type` without case). Every type the routes read and answer goes through this.
pub fn type_name(kind: &str) -> String {
    kind.to_lowercase()
}

/// A task type sent in `field`, as docket keeps it: [`type_name`] of a valid name (1 to 256
/// characters, no control characters; checked after lower-casing, which can lengthen it).
///
/// # Errors
/// What is wrong with the name, for a 400.
pub fn task_type(field: &str, v: &str) -> Result<String, String> {
    docket_core::task::check_name(field, v)?;
    let t = type_name(v);
    docket_core::task::check_name(field, &t)?;
    Ok(t)
}

/// The table number in asyncflow's task ids (`t_<type>_task_<n>`): asyncflow starts a type in
/// table 1 and moves to the next past 5 million rows; docket keeps every task in one table,
/// so every id it answers names table 1.
pub const TABLE: u32 = 1;

/// A task's id as asyncflow answers it: `<id>_<type>_task_<table>` — docket's number, the
/// [`type_name`] of its kind and [`TABLE`] (seed 002's `211899957840445440_lark_task_1`).
pub fn asyncflow_id(id: i64, kind: &str) -> String {
    format!("{id}_{}_task_{TABLE}", type_name(kind))
}

/// A task named in a request: asyncflow's id, or docket's number as clients before asyncflow
/// ids were answered sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRef {
    /// docket's number.
    pub id: i64,
    /// The id's type, lower-cased (none for a plain number).
    pub task_type: Option<String>,
    /// The id's table (none for a plain number).
    pub table: Option<u32>,
}

/// A positive number written in digits only (no sign, no spaces).
fn digits(s: &str) -> Option<i64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<i64>().ok().filter(|n| *n > 0)
}

/// At most 64 characters of what a client sent, for a message.
fn shown(v: &str) -> String {
    let mut s: String = v.chars().take(64).collect();
    if s.len() < v.len() {
        s.push('…');
    }
    format!("{s:?}")
}

impl TaskRef {
    /// Reads `v` (surrounding whitespace ignored): docket's number (`12`) or asyncflow's
    /// `<id>_<type>_task_<table>` (`12_lark_task_1`; the type may hold `_`, so the id is read
    /// up to the first `_` and the table after the last; the type is compared lower-cased).
    ///
    /// # Errors
    /// A message naming the two shapes, for a 400: not a positive 64-bit number, a type that is
    /// empty or holds a control character, a table that is not a positive number, or no
    /// `_task_` before it.
    pub fn parse(v: &str) -> Result<TaskRef, String> {
        let s = v.trim();
        let err = || {
            format!(
                "taskId must be asyncflow's <id>_<type>_task_<table> (e.g. 12_lark_task_1) or docket's number, got {}",
                shown(v)
            )
        };
        if let Some(id) = digits(s) {
            return Ok(TaskRef {
                id,
                task_type: None,
                table: None,
            });
        }
        let (id, rest) = s.split_once('_').ok_or_else(err)?;
        let id = digits(id).ok_or_else(err)?;
        let (head, table) = rest.rsplit_once('_').ok_or_else(err)?;
        let table = digits(table)
            .and_then(|t| u32::try_from(t).ok())
            .ok_or_else(err)?;
        let ty = head.strip_suffix("_task").ok_or_else(err)?;
        // No length check: a /v1 kind of 256 characters can lengthen when lower-cased, and
        // its id must still read back.
        if ty.is_empty() || ty.chars().any(char::is_control) {
            return Err(err());
        }
        let ty = type_name(ty);
        Ok(TaskRef {
            id,
            task_type: Some(ty),
            table: Some(table),
        })
    }

    /// Whether this names task `t`: its number, and its type and [`TABLE`] when the id gives
    /// them (asyncflow would look for it in another table, and find nothing).
    pub fn names(&self, t: &Task) -> bool {
        t.id == self.id
            && self
                .task_type
                .as_ref()
                .is_none_or(|ty| *ty == type_name(&t.kind))
            && self.table.is_none_or(|n| n == TABLE)
    }
}

/// asyncflow's status number of a docket state.
fn status_of(s: TaskState) -> i64 {
    match s {
        TaskState::Scheduled | TaskState::Available | TaskState::Retryable => 1,
        TaskState::Running => 2,
        TaskState::Completed => 3,
        TaskState::Discarded | TaskState::Cancelled => 4,
    }
}

/// The docket states of an asyncflow status number.
fn states_of(status: i64) -> Result<Vec<TaskState>, ApiError> {
    Ok(match status {
        1 => vec![
            TaskState::Scheduled,
            TaskState::Available,
            TaskState::Retryable,
        ],
        2 => vec![TaskState::Running],
        3 => vec![TaskState::Completed],
        4 => vec![TaskState::Discarded, TaskState::Cancelled],
        s => {
            return Err(bad(format!(
                "status must be 1 (waiting), 2 (running), 3 (success) or 4 (failed), got {s}"
            )))
        }
    })
}

fn ms(t: Timestamp) -> i64 {
    t.timestamp_millis()
}

fn secs(d: std::time::Duration) -> u64 {
    d.as_secs()
}

/// `taskContext`: asyncflow sends and reads a string, and gets it back byte for byte. A string
/// that is JSON written as docket writes it (compact, keys sorted) is stored as that JSON, so
/// docket's own API and workers see the object; any other string — other spacing or key
/// order, a JSON string literal, not JSON — is stored as a JSON string holding the text.
fn context_in(s: &str) -> Value {
    match serde_json::from_str::<Value>(s) {
        Ok(v) if !v.is_string() && serde_json::to_string(&v).is_ok_and(|t| t == s) => v,
        _ => Value::String(s.to_string()),
    }
}

/// asyncflow's retry (seed 002, `max_retry_interval`): 1 s after the first failure, then
/// doubling — 2 s, 4 s, 8 s — up to the cap, with no jitter; a queue's own `backoff` (its
/// t_schedule_cfg `retry_interval`) replaces it, jitter and all.
const ASYNCFLOW_BACKOFF: docket_core::Backoff = docket_core::Backoff {
    kind: docket_core::BackoffKind::Exponential,
    initial: std::time::Duration::from_secs(1),
    coefficient: 2.0,
    max: std::time::Duration::from_secs(3600),
    jitter: 0.0,
};

/// `b` capped at `maxRetryInterval` seconds (its first delay too, when it is smaller).
fn capped(mut b: docket_core::Backoff, secs: u64) -> docket_core::Backoff {
    b.max = std::time::Duration::from_secs(secs).min(docket_core::duration::MAX);
    b.initial = b.initial.min(b.max);
    b
}

fn context_out(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// asyncflow's `scheduleLog` before a worker sent one: the last attempt and up to 5 before it,
/// from the run log.
fn schedule_log(t: &Task) -> String {
    let entry = |r: &docket_core::run::TaskRun| {
        json!({
            "TraceId": r.trace_id.clone().unwrap_or_default(),
            "ErrMsg": r.message.clone().unwrap_or_default(),
            "Cost": r.duration_ms.map(|d| format!("{d}ms")).unwrap_or_default(),
        })
    };
    let Some((last, rest)) = t.runs.split_last() else {
        return "{}".into();
    };
    let history: Vec<Value> = rest.iter().rev().take(5).map(entry).collect();
    json!({"LastData": entry(last), "HistoryDatas": history}).to_string()
}

/// asyncflow's `taskData`.
fn task_data(t: &Task) -> Value {
    // crtRetryNum: failed attempts of this stage so far (the running one not counted).
    let retries = match t.state {
        TaskState::Running | TaskState::Completed => t.attempt.saturating_sub(1),
        _ => t.attempt,
    };
    json!({
        "userId": t.user_id.clone().unwrap_or_default(),
        "taskId": asyncflow_id(t.id, &t.kind),
        "taskType": type_name(&t.kind),
        "taskStage": t.stage.clone().unwrap_or_default(),
        "status": status_of(t.state),
        "priority": t.priority,
        "crtRetryNum": retries,
        "maxRetryNum": t.max_attempts,
        "maxRetryInterval": secs(t.backoff.max),
        "orderTime": ms(t.run_at),
        "scheduleLog": match &t.progress {
            // What the worker last sent, byte for byte (asyncflow keeps the worker's string).
            Some(Value::String(log)) => log.clone(),
            _ => schedule_log(t),
        },
        "taskContext": context_out(&t.payload),
        "createTime": ms(t.created_at),
        "modifyTime": ms(t.updated_at),
    })
}

/// The task `v` names (see [`TaskRef`]); 400 for a malformed id, 404 when no task has it.
async fn find_task(s: &AppState, v: &str) -> Result<Task, ApiError> {
    let r = TaskRef::parse(v).map_err(bad)?;
    s.engine
        .task_get(r.id)
        .await?
        .filter(|t| r.names(t))
        .ok_or_else(|| ApiError::not_found(format!("task {} not found", shown(v.trim()))))
}

fn limit(q: &HashMap<String, String>, default: i64) -> Result<i64, ApiError> {
    match q.get("limit") {
        None => Ok(default),
        Some(v) => v
            .parse::<i64>()
            .ok()
            .filter(|l| (1..=MAX_LIMIT).contains(l))
            .ok_or_else(|| bad(format!("limit must be within 1..={MAX_LIMIT}, got {v:?}"))),
    }
}

fn required<'a>(q: &'a HashMap<String, String>, field: &str) -> Result<&'a str, ApiError> {
    q.get(field)
        .map(String::as_str)
        .ok_or_else(|| bad(format!("{field} is required")))
}

fn name(q: &HashMap<String, String>, field: &str) -> Result<String, ApiError> {
    let v = required(q, field)?;
    docket_core::task::check_name(field, v).map_err(bad)?;
    Ok(v.to_string())
}

fn query(
    q: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> Result<HashMap<String, String>, ApiError> {
    match q {
        Ok(Query(m)) => {
            if m.values().any(|v| v.contains('\0')) {
                return Err(ApiError::new(
                    Code::InvalidText,
                    "a query parameter holds a NUL character",
                ));
            }
            Ok(m)
        }
        Err(e) => Err(bad(e.body_text())),
    }
}

/// `POST /api/task_schedule_cfg/list`: every queue with settings, as t_schedule_cfg rows.
async fn cfg_list(State(s): State<AppState>) -> CompatResult {
    let list: Vec<Value> = s
        .engine
        .queue_list()
        .await?
        .into_iter()
        .filter(|q| q.created_at.is_some())
        .map(|q| {
            let st = &q.settings;
            json!({
                "task_type": q.name,
                "schedule_limit": st.schedule_limit,
                "schedule_interval": st.schedule_interval.map(secs),
                "max_processing_time": st.timeout.map(secs),
                "max_retry_num": st.max_attempts,
                "retry_interval": st.backoff.map(|b| secs(b.initial)),
                "max_retry_interval": st.backoff.map(|b| secs(b.max)),
                "create_time": q.created_at.map(ms),
                "modify_time": q.updated_at.map(ms),
            })
        })
        .collect();
    ok(json!({"scheduleCfgList": list}))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreateBody {
    task_data: CreateData,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct CreateData {
    user_id: Option<String>,
    task_type: Option<String>,
    task_stage: Option<String>,
    task_context: Option<String>,
    priority: Option<i32>,
    max_retry_num: Option<i32>,
    max_retry_interval: Option<u64>,
    order_time: Option<i64>,
    schedule_log: Option<String>,
}

fn order_time(ms: i64) -> Result<Timestamp, ApiError> {
    chrono::DateTime::from_timestamp_millis(ms)
        .filter(|t| docket_core::time::check("orderTime", *t).is_ok())
        .ok_or_else(|| {
            bad(format!(
                "orderTime must be ms since the epoch within years 1..=9999, got {ms}"
            ))
        })
}

/// `POST /api/task/createTask`. Under auth, a type whose kind asks for a scope (`sql`) needs it
/// besides `enqueue`, as on `POST /v1/tasks` (`auth::check_kind_scope`).
async fn create_task(
    State(s): State<AppState>,
    who: Caller,
    body: Result<Bytes, BytesRejection>,
) -> CompatResult {
    let b: CreateBody = parse(body)?;
    let d = b.task_data;
    let kind = d
        .task_type
        .filter(|t| !t.is_empty())
        .ok_or_else(|| bad("taskData.taskType is required"))?;
    let kind = task_type("taskData.taskType", &kind).map_err(bad)?;
    let mut t = NewTask::new(
        kind.clone(),
        d.task_context
            .as_deref()
            .map(context_in)
            .unwrap_or(Value::Null),
    );
    t.queue = Some(kind.clone());
    t.stage = d.task_stage.filter(|s| !s.is_empty());
    t.user_id = d.user_id.filter(|s| !s.is_empty());
    t.priority = d.priority;
    t.max_attempts = d.max_retry_num.filter(|m| *m > 0);
    if let Some(o) = d.order_time {
        t.run_at = Some(order_time(o)?);
    }
    // Kept as the task's progress, answered byte for byte until a worker sends its own.
    t.progress = d.schedule_log.filter(|l| !l.is_empty()).map(Value::String);
    let q = s.engine.queue_settings(std::slice::from_ref(&kind)).await?;
    let b = q
        .get(&kind)
        .and_then(|q| q.backoff)
        .unwrap_or(ASYNCFLOW_BACKOFF);
    t.backoff = Some(match d.max_retry_interval.filter(|m| *m > 0) {
        Some(m) => capped(b, m),
        None => b,
    });
    check_size("taskContext", &t.payload)?;
    if let Some(p) = &t.progress {
        check_size("scheduleLog", p)?;
    }
    auth::check_kind_scope(&s.engine, caller(&who), &[&t])?;
    let task = s.engine.enqueue_many(vec![t]).await?.remove(0);
    ok(json!({"taskId": asyncflow_id(task.id, &task.kind)}))
}

/// The caller of a request under auth (none with auth off).
type Caller = Option<axum::Extension<docket_engine::auth::Caller>>;

fn caller(c: &Caller) -> Option<&docket_engine::auth::Caller> {
    c.as_ref().map(|c| &c.0)
}

/// `GET /api/task/getTask?taskId=`: masked as `GET /v1/tasks/{id}` is (queue setting
/// `mask_payload`: `taskContext` and `scheduleLog` are `***` to a token without `admin`).
async fn get_task(
    State(s): State<AppState>,
    who: Caller,
    q: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> CompatResult {
    let q = query(q)?;
    let mut t = find_task(&s, required(&q, "taskId")?).await?;
    if auth::masks_for(caller(&who)) {
        auth::mask_tasks(&s, [&mut t]).await?;
    }
    ok(json!({"taskData": task_data(&t)}))
}

/// A list of tasks, masked as `GET /v1/tasks` is.
async fn list(s: &AppState, who: &Caller, p: TaskListParams) -> CompatResult {
    let mut tasks = s.engine.task_list(p).await?;
    if auth::masks_for(caller(who)) {
        auth::mask_tasks(s, tasks.iter_mut()).await?;
    }
    ok(json!({"taskList": tasks.iter().map(task_data).collect::<Vec<_>>()}))
}

/// `GET /api/task/getTaskList?taskType=&status=&limit=`.
async fn get_task_list(
    State(s): State<AppState>,
    who: Caller,
    q: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> CompatResult {
    let q = query(q)?;
    let states = match q.get("status") {
        None => vec![],
        Some(v) => states_of(
            v.parse()
                .map_err(|_| bad(format!("status must be 1..=4, got {v:?}")))?,
        )?,
    };
    let queue = q
        .get("taskType")
        .map(|t| task_type("taskType", t).map_err(bad))
        .transpose()?;
    list(
        &s,
        &who,
        TaskListParams {
            queue,
            states,
            limit: limit(&q, 100)?,
            ..Default::default()
        },
    )
    .await
}

/// `GET /api/task/getUserTaskList?userId=&statusList=1,2`.
async fn get_user_task_list(
    State(s): State<AppState>,
    who: Caller,
    q: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> CompatResult {
    let q = query(q)?;
    let user = name(&q, "userId")?;
    let mut states = vec![];
    for part in q
        .get("statusList")
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
    {
        states.extend(states_of(part.parse().map_err(|_| {
            bad(format!("statusList holds {part:?}, not a status 1..=4"))
        })?)?);
    }
    list(
        &s,
        &who,
        TaskListParams {
            user_id: Some(user),
            states,
            limit: limit(&q, MAX_LIMIT)?,
            ..Default::default()
        },
    )
    .await
}

/// `POST /api/task/hold_task?taskType=&limit=`: claims waiting tasks of the type (its
/// queue's `schedule_limit` caps the count), each under a lease of its timeout
/// (asyncflow's max_processing_time).
async fn hold_task(
    State(s): State<AppState>,
    who: Caller,
    q: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> CompatResult {
    let q = query(q)?;
    let queue = task_type("taskType", required(&q, "taskType")?).map_err(bad)?;
    auth::check_queue(caller(&who), &queue)?;
    let got = s
        .engine
        .claim(&Claim::new(&queue, WORKER, limit(&q, 1)?), &s.shutdown)
        .await?;
    ok(json!({"taskList": got.iter().map(task_data).collect::<Vec<_>>()}))
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct SetBody {
    task_id: Option<Value>,
    task_stage: Option<String>,
    status: Option<i64>,
    schedule_log: Option<String>,
    task_context: Option<String>,
    order_time: Option<i64>,
    priority: Option<i32>,
    max_retry_num: Option<i32>,
    crt_retry_num: Option<i32>,
    max_retry_interval: Option<u64>,
}

impl SetBody {
    /// The retry fields as a patch of task `t`: `maxRetryNum`, `maxRetryInterval` (the
    /// backoff's cap) and `crtRetryNum` (retries made: a held task's attempt in hand is one
    /// more). Zero or absent fields change nothing, as in asyncflow.
    fn retry_patch(&self, t: &Task) -> TaskPatch {
        let held = t.state == TaskState::Running;
        TaskPatch {
            max_attempts: self.max_retry_num.filter(|m| *m > 0),
            backoff: self
                .max_retry_interval
                .filter(|m| *m > 0)
                .map(|m| capped(t.backoff, m)),
            attempt: self.crt_retry_num.filter(|c| *c >= 0).map(|c| {
                if held {
                    c.saturating_add(1)
                } else {
                    c
                }
            }),
            ..Default::default()
        }
    }
}

/// The error message a worker put in its scheduleLog (`LastData.ErrMsg`), if any.
fn err_msg(log: Option<&str>) -> Option<String> {
    let v: Value = serde_json::from_str(log?).ok()?;
    v["LastData"]["ErrMsg"]
        .as_str()
        .filter(|m| !m.is_empty())
        .map(str::to_string)
}

/// `POST /api/task/setTask`: a worker reports on a held task, or anyone changes a waiting one.
///
/// A running task: `maxRetryNum`, `maxRetryInterval` and `crtRetryNum` change it first (under
/// its lease); then `status` 3 completes it; 1 with a new `taskStage` hands it on to that stage
/// (`taskContext` its new payload, `priority`, `orderTime` its start); 1 with the same stage
/// fails the attempt to be retried (at `orderTime` when given, else by the backoff); 4 fails it
/// for good; 2 (or none) records `taskContext`, `priority` and `orderTime`. A waiting task:
/// `taskStage`, `taskContext`, `priority`, `orderTime` and the retry fields change it (PATCH);
/// `status` 4 cancels it.
///
/// Under auth, a `work` token limited to some queues may set only tasks of those: these
/// routes hold the task's lease for it, so the check a claim makes (`auth::check_queue`)
/// is made here on the task's queue, held or waiting.
async fn set_task(
    State(s): State<AppState>,
    who: Caller,
    body: Result<Bytes, BytesRejection>,
) -> CompatResult {
    let b: SetBody = parse(body)?;
    let named = match &b.task_id {
        Some(Value::String(v)) => v.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(other) => {
            return Err(bad(format!(
                "taskId must be a string (asyncflow's id) or docket's number, got {}",
                shown(&other.to_string())
            )))
        }
        None => return Err(bad("taskId is required")),
    };
    if let Some(st) = b.status {
        states_of(st)?;
    }
    let context = b.task_context.as_deref().map(context_in);
    if let Some(c) = &context {
        check_size("taskContext", c)?;
    }
    let run_at = b.order_time.map(order_time).transpose()?;
    let t = find_task(&s, &named).await?;
    auth::check_queue(caller(&who), &t.queue)?;
    let id = t.id;
    let stage = b.task_stage.clone().filter(|st| !st.is_empty());
    if t.state == TaskState::Running {
        let token = s
            .engine
            .lease_token(id)
            .await?
            .ok_or_else(|| ApiError::new(Code::LeaseLost, "the task is no longer running"))?;
        // The retry fields (and, for status 2 or none, context, priority and order time) go
        // first, so a retry below counts them.
        let mut patch = if b.status == Some(3) {
            TaskPatch::default()
        } else {
            b.retry_patch(&t)
        };
        if matches!(b.status, None | Some(2)) {
            patch.payload = context.clone();
            patch.priority = b.priority;
            patch.run_at = run_at;
        }
        // The worker's scheduleLog is its report on the task: kept as the task's progress and
        // answered byte for byte. An attempt's end reported without one lets docket's log of
        // that attempt show (a string kept from an earlier attempt would hide it).
        patch.progress = match &b.schedule_log {
            Some(log) => Some(Value::String(log.clone())),
            None if matches!(b.status, Some(1 | 3 | 4))
                && matches!(t.progress, Some(Value::String(_))) =>
            {
                Some(Value::Null)
            }
            None => None,
        };
        if patch != TaskPatch::default() {
            patch.lease = Some(token.clone());
            s.engine.task_update(WORKER, id, patch, None).await?;
        }
        let outcome = match b.status {
            Some(3) => s
                .engine
                .complete_many(&[TaskComplete {
                    id,
                    token,
                    result: context.clone().unwrap_or(Value::Null),
                    next: None,
                }])
                .await?
                .remove(0),
            Some(1) if stage.is_some() && stage != t.stage => {
                let now = s.engine.clock.now();
                let next = docket_core::api::CompleteRequest {
                    lease: token.clone(),
                    next_stage: stage,
                    payload: context.clone(),
                    priority: b.priority,
                    run_at: run_at.filter(|r| *r > now),
                    ..Default::default()
                }
                .next(now)
                .map_err(bad)?;
                s.engine
                    .complete_many(&[TaskComplete {
                        id,
                        token,
                        result: Value::Null,
                        next,
                    }])
                    .await?
                    .remove(0)
            }
            Some(st @ (1 | 4)) => {
                let now = s.engine.clock.now();
                let error = err_msg(b.schedule_log.as_deref())
                    .unwrap_or_else(|| format!("asyncflow setTask status {st}"));
                s.engine
                    .fail_many(
                        &[TaskFail {
                            id,
                            token,
                            error,
                            retry_in: run_at
                                .filter(|_| st == 1)
                                .map(|r| docket_core::time::since(r, now)),
                            permanent: st == 4,
                        }],
                        Some(WORKER),
                    )
                    .await?
                    .remove(0)
            }
            _ => return ok(Value::Null),
        };
        return match outcome {
            docket_core::lease::LeaseOutcome::Ok { .. } => ok(Value::Null),
            docket_core::lease::LeaseOutcome::LeaseLost => {
                Err(ApiError::new(Code::LeaseLost, "the task is no longer held"))
            }
            docket_core::lease::LeaseOutcome::Cancelled => {
                Err(ApiError::new(Code::Cancelled, "task was cancelled"))
            }
            docket_core::lease::LeaseOutcome::TimedOut => Err(ApiError::new(
                Code::TimedOut,
                "the attempt ran past max_processing_time and was failed",
            )),
            docket_core::lease::LeaseOutcome::NotFound => Err(ApiError::not_found(format!(
                "task {} not found",
                asyncflow_id(id, &t.kind)
            ))),
        };
    }
    if b.status == Some(4) && status_of(t.state) == 1 {
        crate::actions::task(&s, WORKER, id, docket_engine::actions::TaskAction::Cancel).await?;
        return ok(Value::Null);
    }
    if matches!(b.status, Some(2 | 3)) {
        return Err(ApiError::new(
            Code::InvalidState,
            format!(
                "task {} is not running (status {}): only a held task can be set to {}",
                asyncflow_id(id, &t.kind),
                status_of(t.state),
                b.status.unwrap_or_default()
            ),
        ));
    }
    let patch = TaskPatch {
        stage,
        payload: context,
        priority: b.priority,
        run_at,
        progress: b.schedule_log.clone().map(Value::String),
        ..b.retry_patch(&t)
    };
    if patch == TaskPatch::default() {
        return ok(Value::Null);
    }
    s.engine.task_update(WORKER, id, patch, None).await?;
    ok(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every id docket answers reads back as the task's number, lower-case type and table 1,
    /// whatever the type holds (`_`, `_task_`, spaces, capitals, letters that lengthen).
    #[test]
    fn ids_read_back() {
        for kind in [
            "Lark",
            "lark",
            "a_task_1",
            "_",
            "x_task",
            "task",
            "a b",
            "İstanbul",
            "1",
            "9_x",
            &"İ".repeat(256),
        ] {
            for id in [1, 42, i64::MAX] {
                let s = asyncflow_id(id, kind);
                assert_eq!(
                    TaskRef::parse(&s),
                    Ok(TaskRef {
                        id,
                        task_type: Some(type_name(kind)),
                        table: Some(TABLE),
                    }),
                    "{s}"
                );
            }
        }
        assert_eq!(
            asyncflow_id(211_899_957_840_445_440, "Lark"),
            "211899957840445440_lark_task_1"
        );
    }

    #[test]
    fn plain_numbers_and_bad_ids() {
        for (v, id) in [("12", 12), (" 12 ", 12), ("007", 7)] {
            assert_eq!(
                TaskRef::parse(v),
                Ok(TaskRef {
                    id,
                    task_type: None,
                    table: None
                })
            );
        }
        assert_eq!(
            TaskRef::parse("5_LARK_task_3").map(|r| (r.task_type, r.table)),
            Ok((Some("lark".to_string()), Some(3)))
        );
        for v in [
            "",
            "0",
            "-1",
            "+1",
            "1.0",
            "1e3",
            "9223372036854775808",
            "abc",
            "_lark_task_1",
            "0_lark_task_1",
            "-1_lark_task_1",
            "5_lark",
            "5_lark_task",
            "5_lark_task_",
            "5__task_1",
            "5_task_1",
            "5_lark_task_0",
            "5_lark_task_4294967296",
            "5_lark_job_1",
            "5_la\u{0}rk_task_1",
            "5_la\nrk_task_1",
        ] {
            let e = TaskRef::parse(v).unwrap_err();
            assert!(e.starts_with("taskId must be"), "{v:?}: {e}");
        }
        let e = TaskRef::parse(&"7".repeat(1000)).unwrap_err();
        assert!(
            e.len() < 200,
            "the message shows a bounded part of the id: {e}"
        );
    }

    #[test]
    fn types_are_lower_cased_and_checked() {
        assert_eq!(task_type("t", "Lark"), Ok("lark".to_string()));
        assert_eq!(task_type("t", "LARK_Task"), Ok("lark_task".to_string()));
        assert!(task_type("t", "").is_err());
        assert!(task_type("t", "a\u{0}b").is_err());
        assert!(task_type("t", &"x".repeat(257)).is_err());
        // 256 capital İ are 512 characters lower-cased: past the limit.
        assert!(task_type("t", &"İ".repeat(256)).is_err());
    }
}
