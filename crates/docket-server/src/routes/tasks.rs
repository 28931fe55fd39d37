//! Tasks: enqueue, list, read, and the operator's cancel / retry / run now.

use crate::prelude::*;

#[utoipa::path(
    post, path = "/v1/tasks",
    tag = "tasks",
    request_body = crate::schemas::TaskOrBatch,
    responses((status = 201, description = "the task, or {tasks: [...]} for a batch", body = crate::schemas::TaskOrBatchAnswer), (status = 200, description = "a debounced enqueue replaced the waiting task with its key (`replaced: true`)", body = docket_core::Task), (status = 413, description = "payload_too_large", body = crate::error::ErrorBody), (status = 422, description = "invalid_task", body = crate::error::ErrorBody)),
    summary = "Enqueue one task, or many in one transaction"
)]
pub(crate) async fn task_add(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    caller: Option<axum::Extension<docket_engine::auth::Caller>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let trace = request_trace_id(&headers);
    let raw: Value = parse(body)?;
    let (specs, many) = match raw {
        Value::Object(mut m) if m.contains_key("tasks") && m.len() == 1 => {
            match m.remove("tasks") {
                Some(Value::Array(tasks)) => (tasks, true),
                _ => return Err(ApiError::invalid("tasks must be an array of task objects")),
            }
        }
        raw @ Value::Object(_) => (vec![raw], false),
        _ => {
            return Err(ApiError::invalid(
                "body must be a task object or {\"tasks\": [...]}",
            ))
        }
    };
    if specs.is_empty() {
        return Err(ApiError::invalid("tasks must not be empty"));
    }
    if specs.len() > MAX_BATCH {
        return Err(ApiError::invalid(format!(
            "at most {MAX_BATCH} tasks per request"
        )));
    }
    let mut tasks = Vec::with_capacity(specs.len());
    for (i, v) in specs.into_iter().enumerate() {
        let mut t: NewTask = serde_json::from_value(v).map_err(|e| {
            let mut err = ApiError::invalid(format!("task {i}: {e}"));
            err.details = Some(json!({"index": i}));
            err
        })?;
        auth::check_kind_scope(&s.engine, caller.as_ref().map(|c| &c.0), &[&t])?;
        check_size("payload", &t.payload)?;
        if let Some(p) = &t.progress {
            check_size("progress", p)?;
        }
        if t.trace_id.is_none() {
            t.trace_id = trace.clone();
        }
        tasks.push(t);
    }
    let out = s.engine.enqueue_many(tasks).await?;
    Ok(if many {
        (
            StatusCode::CREATED,
            Json(docket_core::api::TaskBatch { tasks: out }),
        )
            .into_response()
    } else {
        // A debounced enqueue that replaced the waiting task made nothing: 200.
        let status = if out[0].replaced == Some(true) {
            StatusCode::OK
        } else {
            StatusCode::CREATED
        };
        (status, Json(&out[0])).into_response()
    })
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    /// Only this queue.
    queue: Option<String>,
    /// Only tasks with this concurrency key.
    concurrency_key: Option<String>,
    /// One state, or several comma-separated (`running,retryable`); a filter naming no known
    /// state matches nothing.
    state: Option<String>,
    /// Only this kind.
    kind: Option<String>,
    /// Page size [100].
    #[param(minimum = 1, maximum = 10000)]
    limit: Option<i64>,
    /// Keyset cursor: tasks after this id (in `order`).
    after: Option<i64>,
    /// `asc` (default) or `desc` by id.
    #[param(pattern = "^(asc|desc)$")]
    order: Option<String>,
    /// Only tasks whose payload or errors contain this text (case-insensitive).
    text: Option<String>,
    /// Only this user's tasks (asyncflow's user task list).
    user_id: Option<String>,
    /// Only tasks with this trace id (32 hex digits). Reads at most 100,000 ids per page, as
    /// `text` does.
    trace_id: Option<String>,
    /// Only tasks with this unique key (indexed).
    unique_key: Option<String>,
    /// Only tasks with this tag (indexed: GIN on PostgreSQL, a side table elsewhere).
    tag: Option<String>,
    /// Only tasks whose last attempt ran on this worker. Reads at most 100,000 ids per page, as
    /// `text` does.
    worker: Option<String>,
}

#[utoipa::path(
    get, path = "/v1/tasks",
    tag = "tasks",
    params(ListQuery),
    responses((status = 200, description = "a page", body = docket_core::api::TaskPage)),
    summary = "List tasks (keyset paging by id)"
)]
pub(crate) async fn task_list(
    State(s): State<AppState>,
    caller: Option<axum::Extension<docket_engine::auth::Caller>>,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> ApiResult<Json<TaskPage>> {
    let q = query(q)?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=MAX_BATCH as i64).contains(&limit) {
        return Err(ApiError::invalid(format!(
            "limit must be within 1..={MAX_BATCH}, got {limit}"
        )));
    }
    // `state=running,retryable`: several states; a filter with no known state matches nothing
    // (answered below, once every other parameter has been checked).
    let states = q.state.as_deref().map(docket_core::state::parse_filter);
    let descending = match q.order.as_deref() {
        None | Some("asc") => false,
        Some("desc") => true,
        Some(o) => {
            return Err(ApiError::invalid(format!(
                "order must be asc or desc, got {o:?}"
            )))
        }
    };
    let states = match states {
        None => vec![],
        Some(Some(v)) => v,
        Some(None) => {
            return Ok(Json(TaskPage {
                tasks: vec![],
                next_after: None,
            }))
        }
    };
    let nonempty = |v: Option<String>| v.filter(|t| !t.is_empty());
    let mut page = s
        .engine
        .task_page(TaskListParams {
            queue: q.queue,
            concurrency_key: q.concurrency_key,
            states,
            kind: q.kind,
            after: q.after,
            descending,
            limit,
            text: nonempty(q.text),
            user_id: q.user_id,
            trace_id: nonempty(q.trace_id).map(|t| t.to_ascii_lowercase()),
            unique_key: nonempty(q.unique_key),
            tag: nonempty(q.tag),
            worker: nonempty(q.worker),
            ..Default::default()
        })
        .await?;
    if auth::masks_for(caller.as_ref().map(|c| &c.0)) {
        auth::mask_tasks(&s, page.tasks.iter_mut()).await?;
    }
    Ok(Json(page))
}

#[utoipa::path(
    get, path = "/v1/tasks/{id}",
    tag = "tasks",
    params(("id" = i64, Path, minimum = 1, description = "task id")),
    responses((status = 200, description = "the task; its version in the `ETag` header", body = docket_core::Task), (status = 404, description = "not_found", body = crate::error::ErrorBody)),
    summary = "One task"
)]
pub(crate) async fn task_get(
    State(s): State<AppState>,
    caller: Option<axum::Extension<docket_engine::auth::Caller>>,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let id = task_id(&id)?;
    match s.engine.task_get(id).await? {
        Some(t) => with_etag(&s, caller, t).await,
        None => Err(ApiError::not_found(format!("task {id} not found"))),
    }
}

/// The task as JSON with its version (of the unmasked task) as a strong `ETag`.
async fn with_etag(
    s: &AppState,
    caller: Option<axum::Extension<docket_engine::auth::Caller>>,
    mut t: Task,
) -> ApiResult<Response> {
    let etag = format!("\"{}\"", docket_core::patch::version(&t));
    if auth::masks_for(caller.as_ref().map(|c| &c.0)) {
        auth::mask_tasks(s, [&mut t]).await?;
    }
    let mut r = Json(t).into_response();
    if let Ok(v) = axum::http::HeaderValue::from_str(&etag) {
        r.headers_mut().insert(axum::http::header::ETAG, v);
    }
    Ok(r)
}

#[utoipa::path(
    patch, path = "/v1/tasks/{id}",
    tag = "tasks",
    params(("id" = i64, Path, minimum = 1, description = "task id"), ("If-Match" = Option<String>, Header, description = "apply only at this version (the task's ETag)")),
    request_body = docket_core::patch::TaskPatch,
    responses((status = 200, description = "the task after the change; its new version in `ETag`", body = docket_core::Task), (status = 400, description = "invalid_request", body = crate::error::ErrorBody), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "invalid_state, lease_lost", body = crate::error::ErrorBody), (status = 412, description = "version_mismatch", body = crate::error::ErrorBody)),
    summary = "Change a waiting task (priority, run_at, payload, node, queue, max_attempts, stage), or a running one's payload/progress with its lease"
)]
pub(crate) async fn task_patch(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    caller: Option<axum::Extension<docket_engine::auth::Caller>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let id = task_id(&id)?;
    let patch: docket_core::patch::TaskPatch = parse(body)?;
    for (f, v) in [("payload", &patch.payload), ("progress", &patch.progress)] {
        if let Some(v) = v {
            check_size(f, v)?;
        }
    }
    let if_match = match headers.get(axum::http::header::IF_MATCH) {
        None => None,
        Some(v) => {
            let v = v
                .to_str()
                .map_err(|_| ApiError::invalid("If-Match must be an ETag of the task"))?
                .trim()
                .trim_start_matches("W/")
                .trim_matches('"')
                .to_string();
            if v == "*" {
                None
            } else {
                Some(v)
            }
        }
    };
    if let Some(v) = &if_match {
        if v.is_empty() || v.len() > 64 || !v.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ApiError::invalid(format!(
                "If-Match must be an ETag of the task, got {v:?}"
            )));
        }
    }
    let who = actions::actor(&headers, "api");
    let t = s.engine.task_update(&who, id, patch, if_match).await?;
    with_etag(&s, caller, t).await
}

pub(crate) async fn task_by_hand(
    s: AppState,
    headers: &axum::http::HeaderMap,
    id: &str,
    action: actions::TaskAction,
) -> ApiResult<Json<Task>> {
    let id = task_id(id)?;
    let who = actions::actor(headers, "api");
    Ok(Json(actions::task(&s, &who, id, action).await?))
}

#[utoipa::path(
    post, path = "/v1/tasks/{id}/cancel",
    tag = "tasks",
    params(("id" = i64, Path, minimum = 1, description = "task id")),
    responses((status = 200, description = "the task", body = docket_core::Task), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "invalid_state", body = crate::error::ErrorBody), (status = 422, description = "invalid_task", body = crate::error::ErrorBody)),
    summary = "Cancel a task that is not finished (a running one stops at its next heartbeat/complete)"
)]
pub(crate) async fn task_cancel(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    Path(id): Path<String>,
) -> ApiResult<Json<Task>> {
    task_by_hand(s, &headers, &id, actions::TaskAction::Cancel).await
}

#[utoipa::path(
    post, path = "/v1/tasks/{id}/retry",
    tag = "tasks",
    params(("id" = i64, Path, minimum = 1, description = "task id")),
    responses((status = 200, description = "the task", body = docket_core::Task), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "invalid_state", body = crate::error::ErrorBody), (status = 422, description = "invalid_task", body = crate::error::ErrorBody)),
    summary = "Make a discarded or cancelled task available again"
)]
pub(crate) async fn task_retry(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    Path(id): Path<String>,
) -> ApiResult<Json<Task>> {
    task_by_hand(s, &headers, &id, actions::TaskAction::Retry).await
}

#[utoipa::path(
    post, path = "/v1/tasks/{id}/run-now",
    tag = "tasks",
    params(("id" = i64, Path, minimum = 1, description = "task id")),
    responses((status = 200, description = "the task", body = docket_core::Task), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "invalid_state", body = crate::error::ErrorBody)),
    summary = "Make a scheduled or retryable task available now (recorded in the audit log)"
)]
pub(crate) async fn task_run_now(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    Path(id): Path<String>,
) -> ApiResult<Json<Task>> {
    task_by_hand(s, &headers, &id, actions::TaskAction::RunNow).await
}

/// Body of `POST /v1/tasks/bulk`.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BulkBody {
    /// What to do to each matching task.
    action: docket_core::bulk::BulkAction,
    /// Which tasks (absent or empty: every task the action applies to).
    #[serde(default)]
    filter: docket_core::bulk::BulkFilter,
    /// Only count: answer how many tasks would change, change none.
    #[serde(default)]
    dry_run: bool,
}

/// Answer of a dry run of `POST /v1/tasks/bulk`.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(crate) struct BulkCount {
    /// The action counted for.
    action: docket_core::bulk::BulkAction,
    /// How many tasks it would change now (at most 100,000 unless the filter is by queue and
    /// state only).
    total: i64,
    /// True when more than `total` matched.
    more: bool,
}

#[utoipa::path(
    post, path = "/v1/tasks/bulk",
    tag = "tasks",
    request_body = BulkBody,
    responses(
        (status = 202, description = "the bulk action, asked: poll GET /v1/tasks/bulk/{id}", body = docket_core::bulk::BulkJob),
        (status = 200, description = "dry_run: how many would change", body = BulkCount),
        (status = 422, description = "invalid_request: a bad filter, or one naming no state the action changes", body = crate::error::ErrorBody)),
    summary = "Cancel, retry, run now or delete every task a filter matches, in the background (admin)"
)]
pub(crate) async fn task_bulk(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let b: BulkBody = parse(body)?;
    if b.dry_run {
        let (total, more) = s.engine.bulk_count(&b.filter, b.action).await?;
        return Ok(Json(BulkCount {
            action: b.action,
            total,
            more,
        })
        .into_response());
    }
    let who = actions::actor(&headers, "api");
    let job = s.engine.bulk_start(&who, b.filter, b.action).await?;
    Ok((StatusCode::ACCEPTED, Json(job)).into_response())
}

#[utoipa::path(
    get, path = "/v1/tasks/bulk/{id}",
    tag = "tasks",
    params(("id" = i64, Path, minimum = 1, description = "the bulk action's id (its task's)")),
    responses((status = 200, description = "the bulk action and its progress", body = docket_core::bulk::BulkJob), (status = 404, description = "not_found", body = crate::error::ErrorBody)),
    summary = "A bulk action's progress"
)]
pub(crate) async fn task_bulk_get(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<docket_core::bulk::BulkJob>> {
    let id = task_id(&id)?;
    match s.engine.bulk_get(id).await? {
        Some(j) => Ok(Json(j)),
        None => Err(ApiError::not_found(format!("no bulk action {id}"))),
    }
}
