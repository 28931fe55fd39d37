//! Workflows (issue 26): a graph of tasks with dependencies (and sub-workflows); read its
//! state; add tasks to it at run time; cancel or retry it.

use crate::prelude::*;
use docket_core::workflow::{NewWorkflow, Workflow, WorkflowAddition, WorkflowCreated};

#[utoipa::path(
    post, path = "/v1/workflows",
    tag = "workflows",
    request_body = NewWorkflow,
    responses((status = 201, description = "the workflow (its batch and graph) and its tasks", body = WorkflowCreated), (status = 400, description = "invalid_request: a cycle, an unknown or duplicate ref, …; nothing written", body = crate::error::ErrorBody), (status = 413, description = "payload_too_large", body = crate::error::ErrorBody), (status = 422, description = "invalid_task", body = crate::error::ErrorBody)),
    summary = "Create a workflow: tasks with dependencies (a DAG) in one transaction; a task runs once every dependency completed"
)]
pub(crate) async fn workflow_create(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    caller: Option<axum::Extension<docket_engine::auth::Caller>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let mut w: NewWorkflow = parse(body)?;
    let caller = caller.as_ref().map(|c| &c.0);
    let trace = request_trace_id(&headers);
    let callbacks: Vec<&NewTask> = docket_core::batch::CALLBACKS
        .iter()
        .filter_map(|c| w.callbacks.get(c))
        .collect();
    auth::check_kind_scope(&s.engine, caller, &callbacks)?;
    vet(&s, caller, trace, &mut w.tasks, &mut w.workflows)?;
    let out = s.engine.workflow_create(w).await?;
    Ok((StatusCode::CREATED, Json(out)).into_response())
}

fn workflow_id(id: &str) -> ApiResult<i64> {
    match id.parse::<i64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(ApiError::invalid(format!(
            "workflow id must be a positive integer, not {id:?}"
        ))),
    }
}

#[utoipa::path(
    get, path = "/v1/workflows/{id}",
    tag = "workflows",
    params(("id" = i64, Path, minimum = 1, description = "workflow id (its batch's id)")),
    responses((status = 200, description = "the workflow: its batch (progress, callbacks) and every task with its ref, state and edges", body = Workflow), (status = 404, description = "not_found", body = crate::error::ErrorBody)),
    summary = "One workflow and the state of each of its tasks"
)]
pub(crate) async fn workflow_get(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Workflow>> {
    let id = workflow_id(&id)?;
    match s.engine.workflow_get(id).await? {
        Some(w) => Ok(Json(w)),
        None => Err(ApiError::not_found(format!("workflow {id} not found"))),
    }
}

#[utoipa::path(
    post, path = "/v1/workflows/{id}/cancel",
    tag = "workflows",
    params(("id" = i64, Path, minimum = 1, description = "workflow id")),
    responses((status = 200, description = "the workflow after the cancel", body = Workflow), (status = 404, description = "not_found", body = crate::error::ErrorBody)),
    summary = "Cancel every unfinished task of a workflow (running ones are asked to stop)"
)]
pub(crate) async fn workflow_cancel(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    Path(id): Path<String>,
) -> ApiResult<Json<Workflow>> {
    let id = workflow_id(&id)?;
    let who = actions::actor(&headers, "api");
    Ok(Json(s.engine.workflow_cancel(&who, id).await?))
}

#[utoipa::path(
    post, path = "/v1/workflows/{id}/retry",
    tag = "workflows",
    params(("id" = i64, Path, minimum = 1, description = "workflow id")),
    responses((status = 200, description = "the workflow after the retry", body = Workflow), (status = 404, description = "not_found", body = crate::error::ErrorBody)),
    summary = "Retry a workflow: its discarded and cancelled tasks run again, those with dependencies once these complete; a settled workflow's callbacks fire again when it next finishes"
)]
pub(crate) async fn workflow_retry(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    Path(id): Path<String>,
) -> ApiResult<Json<Workflow>> {
    let id = workflow_id(&id)?;
    let who = actions::actor(&headers, "api");
    Ok(Json(s.engine.workflow_retry(&who, id).await?))
}

#[utoipa::path(
    post, path = "/v1/workflows/{id}/tasks",
    tag = "workflows",
    params(("id" = i64, Path, minimum = 1, description = "workflow id")),
    request_body = WorkflowAddition,
    responses((status = 201, description = "the workflow after the addition, and the tasks added", body = WorkflowCreated), (status = 400, description = "invalid_request: a cycle, an unknown ref, a ref the workflow has, …; nothing written", body = crate::error::ErrorBody), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "conflict: the workflow has settled (retry it first)", body = crate::error::ErrorBody), (status = 413, description = "payload_too_large", body = crate::error::ErrorBody), (status = 422, description = "invalid_task", body = crate::error::ErrorBody)),
    summary = "Add tasks (and sub-workflows) to a running workflow: fan-out decided at run time; their depends_on may name the workflow's refs"
)]
pub(crate) async fn workflow_add(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    caller: Option<axum::Extension<docket_engine::auth::Caller>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let id = workflow_id(&id)?;
    let mut add: WorkflowAddition = parse(body)?;
    let caller = caller.as_ref().map(|c| &c.0);
    let trace = request_trace_id(&headers);
    vet(&s, caller, trace, &mut add.tasks, &mut add.workflows)?;
    let who = actions::actor(&headers, "api");
    let out = s.engine.workflow_add(&who, id, add).await?;
    Ok((StatusCode::CREATED, Json(out)).into_response())
}

/// Checks every task of a workflow request (sub-workflows' included) as `POST /v1/tasks`
/// does — the caller's kind scope, the payload's size — and gives those without a trace id the
/// request's.
fn vet(
    s: &AppState,
    caller: Option<&docket_engine::auth::Caller>,
    trace: Option<String>,
    tasks: &mut [docket_core::workflow::WorkflowTask],
    subs: &mut [docket_core::workflow::SubWorkflow],
) -> ApiResult<()> {
    let mut specs = vec![];
    collect_tasks(tasks, subs, &mut specs);
    for t in specs {
        auth::check_kind_scope(&s.engine, caller, &[t])?;
        check_size("payload", &t.payload)?;
        if t.trace_id.is_none() {
            t.trace_id = trace.clone();
        }
    }
    Ok(())
}

/// Every task spec of a workflow request, sub-workflows' included.
fn collect_tasks<'a>(
    tasks: &'a mut [docket_core::workflow::WorkflowTask],
    subs: &'a mut [docket_core::workflow::SubWorkflow],
    out: &mut Vec<&'a mut NewTask>,
) {
    out.extend(tasks.iter_mut().map(|t| &mut t.task));
    for s in subs {
        collect_tasks(&mut s.tasks, &mut s.workflows, out);
    }
}
