//! Durable processes (progressor): init, call, repair, simple-repair, read, list, trace, import.

use crate::prelude::*;

#[utoipa::path(
    post, path = "/v1/namespaces/{ns}/processes",
    tag = "processes",
    params(("ns" = String, Path, min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_.-]+$", description = "namespace: 1 to 64 of A-Z a-z 0-9 _ . -")),
    request_body = docket_core::api::ProcessInitRequest,
    responses((status = 200, description = "the processor's response", body = docket_core::api::ProcessResponse), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "process_exists, cancelled", body = crate::error::ErrorBody), (status = 413, description = "payload_too_large", body = crate::error::ErrorBody), (status = 422, description = "processor_error", body = crate::error::ErrorBody), (status = 504, description = "timeout: no answer within process_step_timeout", body = crate::error::ErrorBody)),
    summary = "init: create a process and run its init task (synchronous)"
)]
pub(crate) async fn process_init(
    State(s): State<AppState>,
    Path(ns): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<ProcessResponse>> {
    check_namespace(&ns)?;
    let b: ProcessInitRequest = parse(body)?;
    b.validate().map_err(ApiError::invalid)?;
    check_size("args", &b.args)?;
    let req = ProcessRequest {
        args: b.args,
        context: b.context,
        idempotency_key: b.idempotency_key,
        range: HistoryRange::default(),
    };
    Ok(Json(ProcessResponse {
        response: s.processes.init(&ns, &b.id, req).await?,
    }))
}

pub(crate) async fn call_like(
    s: AppState,
    ns: String,
    id: String,
    body: Result<Bytes, BytesRejection>,
    repair: bool,
) -> ApiResult<Json<ProcessResponse>> {
    let b: ProcessCallRequest = parse(body)?;
    b.validate().map_err(ApiError::invalid)?;
    check_size("args", &b.args)?;
    let req = ProcessRequest {
        args: b.args,
        context: b.context,
        idempotency_key: b.idempotency_key,
        range: b.range,
    };
    let r = if repair {
        s.processes.repair(&ns, &id, req).await?
    } else {
        s.processes.call(&ns, &id, req).await?
    };
    Ok(Json(ProcessResponse { response: r }))
}

#[utoipa::path(
    post, path = "/v1/namespaces/{ns}/processes/{id}/call",
    tag = "processes",
    params(("ns" = String, Path, min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_.-]+$", description = "namespace: 1 to 64 of A-Z a-z 0-9 _ . -"), ("id" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "process id")),
    request_body = docket_core::api::ProcessCallRequest,
    responses((status = 200, description = "the processor's response", body = docket_core::api::ProcessResponse), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "process_not_running, cancelled", body = crate::error::ErrorBody), (status = 413, description = "payload_too_large", body = crate::error::ErrorBody), (status = 422, description = "processor_error", body = crate::error::ErrorBody), (status = 504, description = "timeout: no answer within process_step_timeout", body = crate::error::ErrorBody)),
    summary = "call (synchronous; queued FIFO behind the process's running task)"
)]
pub(crate) async fn process_call(
    State(s): State<AppState>,
    Path((ns, id)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<ProcessResponse>> {
    check_namespace(&ns)?;
    check_name("process id", &id)?;
    call_like(s, ns, id, body, false).await
}

#[utoipa::path(
    post, path = "/v1/namespaces/{ns}/processes/{id}/repair",
    tag = "processes",
    params(("ns" = String, Path, min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_.-]+$", description = "namespace: 1 to 64 of A-Z a-z 0-9 _ . -"), ("id" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "process id")),
    request_body = docket_core::api::ProcessCallRequest,
    responses((status = 200, description = "the processor's response", body = docket_core::api::ProcessResponse), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "process_is_running, cancelled", body = crate::error::ErrorBody), (status = 413, description = "payload_too_large", body = crate::error::ErrorBody), (status = 422, description = "processor_error", body = crate::error::ErrorBody), (status = 504, description = "timeout: no answer within process_step_timeout", body = crate::error::ErrorBody)),
    summary = "repair a process in error (synchronous)"
)]
pub(crate) async fn process_repair(
    State(s): State<AppState>,
    Path((ns, id)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<ProcessResponse>> {
    check_namespace(&ns)?;
    check_name("process id", &id)?;
    call_like(s, ns, id, body, true).await
}

#[utoipa::path(
    get, path = "/v1/namespaces/{ns}/processes/{id}",
    tag = "processes",
    params(("ns" = String, Path, min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_.-]+$", description = "namespace: 1 to 64 of A-Z a-z 0-9 _ . -"), ("id" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "process id"), docket_core::process::HistoryRange),
    responses((status = 200, description = "process, history, last_event_id", body = docket_core::api::ProcessView), (status = 404, description = "not_found", body = crate::error::ErrorBody)),
    summary = "The process with a range of its history"
)]
pub(crate) async fn process_get(
    State(s): State<AppState>,
    Path((ns, id)): Path<(String, String)>,
    q: Result<Query<HistoryRange>, QueryRejection>,
) -> ApiResult<Json<ProcessView>> {
    check_namespace(&ns)?;
    check_name("process id", &id)?;
    let range = query(q)?;
    range.validate().map_err(ApiError::invalid)?;
    let (process, history) = s.processes.get(&ns, &id, range).await?;
    Ok(Json(ProcessView {
        last_event_id: process.last_event_id,
        process,
        history,
    }))
}

#[utoipa::path(
    post, path = "/v1/namespaces/{ns}/processes/{id}/simple-repair",
    tag = "processes",
    params(("ns" = String, Path, min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_.-]+$", description = "namespace: 1 to 64 of A-Z a-z 0-9 _ . -"), ("id" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "process id")),
    responses((status = 200, description = "the process", body = docket_core::api::ProcessRepaired), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "process_is_running", body = crate::error::ErrorBody)),
    summary = "simple-repair: an error process back to running without calling the processor"
)]
pub(crate) async fn process_simple_repair(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    Path((ns, id)): Path<(String, String)>,
) -> ApiResult<Json<ProcessRepaired>> {
    check_namespace(&ns)?;
    check_name("process id", &id)?;
    actions::process_repair(&s, &actions::actor(&headers, "api"), &ns, &id).await?;
    let (process, _) = s
        .processes
        .get(
            &ns,
            &id,
            HistoryRange {
                limit: Some(0),
                ..Default::default()
            },
        )
        .await?;
    Ok(Json(ProcessRepaired { process }))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProcessListQuery {
    /// Only processes in this status.
    #[param(pattern = "^(init|running|error)$")]
    status: Option<String>,
    /// Page size [100].
    #[param(minimum = 1, maximum = 10000)]
    limit: Option<i64>,
    /// Keyset cursor: processes whose id sorts after this one.
    after: Option<String>,
}

#[utoipa::path(
    get, path = "/v1/namespaces/{ns}/processes",
    tag = "processes",
    params(("ns" = String, Path, min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_.-]+$", description = "namespace: 1 to 64 of A-Z a-z 0-9 _ . -"), ProcessListQuery),
    responses((status = 200, description = "a page", body = docket_core::api::ProcessPage)),
    summary = "Processes of a namespace by id (keyset paging)"
)]
pub(crate) async fn process_list(
    State(s): State<AppState>,
    Path(ns): Path<String>,
    q: Result<Query<ProcessListQuery>, QueryRejection>,
) -> ApiResult<Json<ProcessPage>> {
    check_namespace(&ns)?;
    let q = query(q)?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=MAX_BATCH as i64).contains(&limit) {
        return Err(ApiError::invalid(format!(
            "limit must be within 1..={MAX_BATCH}, got {limit}"
        )));
    }
    let status = match q.status.as_deref() {
        None => None,
        Some(st) => Some(
            docket_core::process::ProcessStatus::parse(st).ok_or_else(|| {
                ApiError::invalid(format!("status must be init, running or error, got {st:?}"))
            })?,
        ),
    };
    let ps = s
        .processes
        .list(&ns, status, q.after.as_deref(), limit)
        .await?;
    let next = if ps.len() as i64 == limit {
        ps.last().map(|p| p.id.clone())
    } else {
        None
    };
    Ok(Json(ProcessPage {
        processes: ps,
        next_after: next,
    }))
}

#[utoipa::path(
    get, path = "/v1/namespaces/{ns}/processes/{id}/trace",
    tag = "processes",
    params(("ns" = String, Path, min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_.-]+$", description = "namespace: 1 to 64 of A-Z a-z 0-9 _ . -"), ("id" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "process id")),
    responses((status = 200, description = "tasks", body = docket_core::api::ProcessTrace), (status = 404, description = "not_found", body = crate::error::ErrorBody)),
    summary = "Every task of the process, oldest first, each with the events it produced"
)]
pub(crate) async fn process_trace(
    State(s): State<AppState>,
    caller: Option<axum::Extension<docket_engine::auth::Caller>>,
    Path((ns, id)): Path<(String, String)>,
) -> ApiResult<Json<ProcessTrace>> {
    check_namespace(&ns)?;
    check_name("process id", &id)?;
    let mut tasks = s.processes.trace(&ns, &id).await?;
    if auth::masks_for(caller.as_ref().map(|c| &c.0)) {
        let refs: Vec<&mut Task> = tasks.iter_mut().map(|t| &mut t.task).collect();
        auth::mask_tasks(&s, refs).await?;
    }
    Ok(Json(ProcessTrace { tasks }))
}

#[utoipa::path(
    put, path = "/v1/namespaces/{ns}/processes/{id}",
    tag = "processes",
    params(("ns" = String, Path, min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_.-]+$", description = "namespace: 1 to 64 of A-Z a-z 0-9 _ . -"), ("id" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "process id")),
    request_body = docket_core::process::ProcessImportSpec,
    responses((status = 200, description = "the process", body = docket_core::api::ProcessImported), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "process_exists", body = crate::error::ErrorBody)),
    summary = "put: import a whole process (progressor's migration path)"
)]
pub(crate) async fn process_put(
    State(s): State<AppState>,
    Path((ns, id)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<ProcessImported>> {
    check_namespace(&ns)?;
    check_name("process id", &id)?;
    let spec: docket_core::process::ProcessImportSpec = parse(body)?;
    let process = s.processes.put(&ns, &id, spec).await?;
    Ok(Json(ProcessImported {
        last_event_id: process.last_event_id,
        process,
    }))
}
