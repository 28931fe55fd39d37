//! Durable functions (issue 41): workflow runs — start, read, list, wait for a result, send an
//! event, cancel, retry — and the calls a worker makes under the lease of a run's task
//! (record steps, suspend, finish, resume). The rules are `docket_core::durable`'s.

use crate::prelude::*;
use docket_core::durable::{
    EntryList, EventRequest, EventSent, FinishRequest, Recorded, ResumeRequest, Resumed, RunList,
    RunListParams, StartRequest, Started, StepsRequest, SuspendRequest, Suspended, WorkflowRun,
};

/// A run id from the path (1..=200 characters, no control characters).
fn run_id(id: &str) -> ApiResult<&str> {
    docket_core::durable::check_id("id", id).map_err(ApiError::invalid)?;
    Ok(id)
}

fn entries_size(steps: &[docket_core::durable::NewEntry]) -> ApiResult<()> {
    for e in steps {
        if let Some(v) = &e.output {
            check_size("output", v)?;
        }
        if let Some(c) = &e.child {
            check_size("child.input", &c.input)?;
        }
    }
    Ok(())
}

#[utoipa::path(
    post, path = "/v1/workflow-runs",
    tag = "workflow runs",
    request_body = StartRequest,
    responses((status = 201, description = "the run, started", body = Started), (status = 200, description = "a run of that id was started before: it is answered (`created: false`)", body = Started), (status = 400, description = "invalid_request", body = crate::error::ErrorBody), (status = 409, description = "conflict: the id is a run of another workflow", body = crate::error::ErrorBody), (status = 413, description = "payload_too_large", body = crate::error::ErrorBody)),
    summary = "Start a run of a durable function (idempotent by id)"
)]
pub(crate) async fn run_start(
    State(s): State<AppState>,
    caller: Option<axum::Extension<docket_engine::auth::Caller>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let r: StartRequest = parse(body)?;
    check_size("input", &r.input)?;
    let queue = r
        .queue
        .clone()
        .unwrap_or_else(|| docket_core::durable::DEFAULT_QUEUE.to_string());
    auth::check_queue(caller.as_ref().map(|c| &c.0), &queue)?;
    let out = s.engine.run_start(r).await?;
    let status = if out.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(out)).into_response())
}

#[utoipa::path(
    get, path = "/v1/workflow-runs",
    tag = "workflow runs",
    params(RunListParams),
    responses((status = 200, description = "runs, newest first", body = RunList), (status = 400, description = "invalid_request", body = crate::error::ErrorBody)),
    summary = "List runs by workflow, state, parent and start time"
)]
pub(crate) async fn run_list(
    State(s): State<AppState>,
    q: Result<Query<RunListParams>, QueryRejection>,
) -> ApiResult<Json<RunList>> {
    let Query(q) = q.map_err(|e| ApiError::invalid(e.body_text()))?;
    Ok(Json(RunList {
        runs: s.engine.run_list(q).await?,
    }))
}

#[utoipa::path(
    get, path = "/v1/workflow-runs/{id}",
    tag = "workflow runs",
    params(("id" = String, Path, description = "run id")),
    responses((status = 200, description = "the run", body = WorkflowRun), (status = 404, description = "not_found", body = crate::error::ErrorBody)),
    summary = "One run"
)]
pub(crate) async fn run_get(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<WorkflowRun>> {
    let id = run_id(&id)?;
    match s.engine.run_get(id).await? {
        Some(r) => Ok(Json(r)),
        None => Err(ApiError::not_found(format!("workflow run {id} not found"))),
    }
}

#[utoipa::path(
    get, path = "/v1/workflow-runs/{id}/steps",
    tag = "workflow runs",
    params(("id" = String, Path, description = "run id")),
    responses((status = 200, description = "the run's journal, by seq", body = EntryList), (status = 404, description = "not_found", body = crate::error::ErrorBody)),
    summary = "A run's journal: its steps, sleeps, events, children, recorded values"
)]
pub(crate) async fn run_steps(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<EntryList>> {
    let id = run_id(&id)?;
    if s.engine.run_get(id).await?.is_none() {
        return Err(ApiError::not_found(format!("workflow run {id} not found")));
    }
    Ok(Json(EntryList {
        steps: s.engine.run_entries(id).await?,
    }))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResultQuery {
    /// Wait up to this long for the run to finish (humantime, ≤ 60 s) [0: answer now].
    #[param(value_type = Option<String>, example = "5s")]
    wait: Option<String>,
}

#[utoipa::path(
    get, path = "/v1/workflow-runs/{id}/result",
    tag = "workflow runs",
    params(("id" = String, Path, description = "run id"), ResultQuery),
    responses((status = 200, description = "the run, once finished or when the wait ran out (see its state)", body = WorkflowRun), (status = 400, description = "invalid_request", body = crate::error::ErrorBody), (status = 404, description = "not_found", body = crate::error::ErrorBody)),
    summary = "Wait for a run to finish"
)]
pub(crate) async fn run_result(
    State(s): State<AppState>,
    Path(id): Path<String>,
    q: Result<Query<ResultQuery>, QueryRejection>,
) -> ApiResult<Json<WorkflowRun>> {
    let id = run_id(&id)?;
    let Query(q) = q.map_err(|e| ApiError::invalid(e.body_text()))?;
    let wait = match q.wait.as_deref() {
        None => Duration::ZERO,
        Some(w) => docket_core::duration::parse(w)
            .map_err(|e| ApiError::new(Code::InvalidDuration, format!("wait: {e}")))?,
    };
    if wait > docket_core::durable::MAX_RESULT_WAIT {
        return Err(ApiError::invalid("wait must be at most 60s"));
    }
    match s.engine.run_result(id, wait).await? {
        Some(r) => Ok(Json(r)),
        None => Err(ApiError::not_found(format!("workflow run {id} not found"))),
    }
}

#[utoipa::path(
    post, path = "/v1/workflow-runs/{id}/events",
    tag = "workflow runs",
    params(("id" = String, Path, description = "run id")),
    request_body = EventRequest,
    responses((status = 202, description = "in the run's mailbox (`delivered`: the run waited for it and was woken)", body = EventSent), (status = 400, description = "invalid_request", body = crate::error::ErrorBody), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "invalid_state: the run has finished", body = crate::error::ErrorBody)),
    summary = "Send an event to a run (a `wait_for_event` of that name takes it, oldest first)"
)]
pub(crate) async fn run_send(
    State(s): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let id = run_id(&id)?;
    let r: EventRequest = parse(body)?;
    check_size("payload", &r.payload)?;
    let sent = s.engine.run_send(id, r).await?;
    Ok((StatusCode::ACCEPTED, Json(sent)).into_response())
}

#[utoipa::path(
    post, path = "/v1/workflow-runs/{id}/cancel",
    tag = "workflow runs",
    params(("id" = String, Path, description = "run id")),
    responses((status = 200, description = "the run (cancelled, with its unfinished children; a finished run as it was)", body = WorkflowRun), (status = 404, description = "not_found", body = crate::error::ErrorBody)),
    summary = "Cancel a run and its unfinished children"
)]
pub(crate) async fn run_cancel(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    Path(id): Path<String>,
) -> ApiResult<Json<WorkflowRun>> {
    let id = run_id(&id)?;
    let r = s.engine.run_cancel(id).await?;
    let who = actions::actor(&headers, "api");
    s.engine
        .audit(
            &who,
            "workflow_run.cancel",
            &format!("workflow_run:{id}"),
            Some(json!({"workflow": r.workflow, "state": r.state})),
        )
        .await;
    Ok(Json(r))
}

#[utoipa::path(
    post, path = "/v1/workflow-runs/{id}/retry",
    tag = "workflow runs",
    params(("id" = String, Path, description = "run id")),
    responses((status = 200, description = "the run, running again (its journal replayed)", body = WorkflowRun), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "invalid_state: not failed or cancelled", body = crate::error::ErrorBody)),
    summary = "Run a failed or cancelled run again"
)]
pub(crate) async fn run_retry(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    Path(id): Path<String>,
) -> ApiResult<Json<WorkflowRun>> {
    let id = run_id(&id)?;
    let r = s.engine.run_retry(id).await?;
    let who = actions::actor(&headers, "api");
    s.engine
        .audit(
            &who,
            "workflow_run.retry",
            &format!("workflow_run:{id}"),
            Some(json!({"workflow": r.workflow, "state": r.state})),
        )
        .await;
    Ok(Json(r))
}

#[utoipa::path(
    post, path = "/v1/workflow-runs/{id}/steps",
    tag = "workflow runs",
    params(("id" = String, Path, description = "run id")),
    request_body = StepsRequest,
    responses((status = 200, description = "recorded", body = Recorded), (status = 400, description = "invalid_request", body = crate::error::ErrorBody), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "lease_lost, cancelled, timed_out (stop running the function); nondeterministic (the journal holds another call at a seq); conflict (a child's id is taken)", body = crate::error::ErrorBody)),
    summary = "Record journal entries under the lease of the run's task (a worker's call)"
)]
pub(crate) async fn run_record(
    State(s): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Recorded>> {
    let id = run_id(&id)?;
    let r: StepsRequest = parse(body)?;
    entries_size(&r.steps)?;
    let recorded = s.engine.run_record(id, r).await?;
    Ok(Json(Recorded { recorded }))
}

#[utoipa::path(
    post, path = "/v1/workflow-runs/{id}/suspend",
    tag = "workflow runs",
    params(("id" = String, Path, description = "run id")),
    request_body = SuspendRequest,
    responses((status = 200, description = "what the wait became: go on (`due`, `event`, `timed_out`) or stop (`suspended`: the task was handed back)", body = Suspended), (status = 400, description = "invalid_request", body = crate::error::ErrorBody), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "lease_lost, cancelled, timed_out; nondeterministic", body = crate::error::ErrorBody)),
    summary = "Sleep, or wait for an event or a child (a worker's call)"
)]
pub(crate) async fn run_suspend(
    State(s): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Suspended>> {
    let id = run_id(&id)?;
    let r: SuspendRequest = parse(body)?;
    entries_size(&r.steps)?;
    Ok(Json(s.engine.run_suspend(id, r).await?))
}

#[utoipa::path(
    post, path = "/v1/workflow-runs/{id}/finish",
    tag = "workflow runs",
    params(("id" = String, Path, description = "run id")),
    request_body = FinishRequest,
    responses((status = 200, description = "the run, ended (and its task)", body = WorkflowRun), (status = 400, description = "invalid_request", body = crate::error::ErrorBody), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "lease_lost, cancelled, timed_out; nondeterministic", body = crate::error::ErrorBody), (status = 413, description = "payload_too_large", body = crate::error::ErrorBody)),
    summary = "End a run with its result or error (a worker's call)"
)]
pub(crate) async fn run_finish(
    State(s): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<WorkflowRun>> {
    let id = run_id(&id)?;
    let r: FinishRequest = parse(body)?;
    entries_size(&r.steps)?;
    if let Some(v) = &r.result {
        check_size("result", v)?;
    }
    Ok(Json(s.engine.run_finish(id, r).await?))
}

#[utoipa::path(
    post, path = "/v1/workflow-runs/{id}/resume",
    tag = "workflow runs",
    params(("id" = String, Path, description = "run id")),
    request_body = ResumeRequest,
    responses((status = 200, description = "the run, its journal and the server's time", body = Resumed), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "lease_lost, cancelled, timed_out", body = crate::error::ErrorBody)),
    summary = "Read a run's journal to replay it (a worker's call, under the lease)"
)]
pub(crate) async fn run_resume(
    State(s): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Resumed>> {
    let id = run_id(&id)?;
    let r: ResumeRequest = parse(body)?;
    Ok(Json(s.engine.run_resume(id, r.lease).await?))
}
