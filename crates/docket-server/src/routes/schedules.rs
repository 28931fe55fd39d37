//! Schedules: create or replace, list, read, pause, resume, remove.

use crate::prelude::*;

#[utoipa::path(
    post, path = "/v1/schedules",
    tag = "schedules",
    request_body = docket_core::ScheduleSpec,
    responses((status = 200, description = "replaced", body = docket_core::Schedule), (status = 201, description = "created", body = docket_core::Schedule)),
    summary = "Create or replace a schedule (repeat interval or cron) of a task template"
)]
pub(crate) async fn schedule_put(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    caller: Option<axum::Extension<docket_engine::auth::Caller>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let spec: docket_core::ScheduleSpec = parse(body)?;
    auth::check_kind_scope(&s.engine, caller.as_ref().map(|c| &c.0), &[&spec.task])?;
    check_size("payload", &spec.task.payload)?;
    let created = s.engine.schedule_get(&spec.name).await?.is_none();
    let out = s.engine.schedule_put(spec).await?;
    let who = actions::actor(&headers, "api");
    let action = if created { "create" } else { "replace" };
    actions::schedule_changed(&s, &who, action, &out.spec.name).await;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(out)).into_response())
}

#[utoipa::path(
    get, path = "/v1/schedules",
    tag = "schedules",
    responses((status = 200, description = "every schedule", body = docket_core::api::ScheduleList)),
    summary = "List schedules"
)]
pub(crate) async fn schedule_list(State(s): State<AppState>) -> ApiResult<Json<ScheduleList>> {
    Ok(Json(ScheduleList {
        schedules: s.engine.schedule_list().await?,
    }))
}

pub(crate) fn schedule_missing(name: &str) -> ApiError {
    ApiError::not_found(format!("no schedule named {name:?}"))
}

#[utoipa::path(
    get, path = "/v1/schedules/{name}",
    tag = "schedules",
    params(("name" = String, Path, min_length = 1, max_length = 200, pattern = "^[A-Za-z0-9_.:-]+$", description = "schedule name")),
    responses((status = 200, description = "the schedule", body = docket_core::Schedule), (status = 404, description = "not_found", body = crate::error::ErrorBody)),
    summary = "One schedule"
)]
pub(crate) async fn schedule_get(
    State(s): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult<Json<docket_core::Schedule>> {
    s.engine
        .schedule_get(&name)
        .await?
        .map(Json)
        .ok_or_else(|| schedule_missing(&name))
}

#[utoipa::path(
    delete, path = "/v1/schedules/{name}",
    tag = "schedules",
    params(("name" = String, Path, min_length = 1, max_length = 200, pattern = "^[A-Za-z0-9_.:-]+$", description = "schedule name")),
    responses((status = 204, description = "removed"), (status = 404, description = "not_found", body = crate::error::ErrorBody)),
    summary = "Remove a schedule (its tasks stay)"
)]
pub(crate) async fn schedule_delete(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    if s.engine
        .schedule_delete(&actions::actor(&headers, "api"), &name)
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(schedule_missing(&name))
    }
}

pub(crate) async fn schedule_set_paused(
    s: AppState,
    headers: &axum::http::HeaderMap,
    name: String,
    paused: bool,
) -> ApiResult<Json<docket_core::Schedule>> {
    let out = s
        .engine
        .schedule_pause(&name, paused)
        .await?
        .ok_or_else(|| schedule_missing(&name))?;
    let action = if paused { "pause" } else { "resume" };
    actions::schedule_changed(&s, &actions::actor(headers, "api"), action, &name).await;
    Ok(Json(out))
}

#[utoipa::path(
    post, path = "/v1/schedules/{name}/pause",
    tag = "schedules",
    params(("name" = String, Path, min_length = 1, max_length = 200, pattern = "^[A-Za-z0-9_.:-]+$", description = "schedule name")),
    responses((status = 200, description = "the schedule", body = docket_core::Schedule), (status = 404, description = "not_found", body = crate::error::ErrorBody)),
    summary = "Pause: no occurrence fires"
)]
pub(crate) async fn schedule_pause(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    Path(name): Path<String>,
) -> ApiResult<Json<docket_core::Schedule>> {
    schedule_set_paused(s, &headers, name, true).await
}

#[utoipa::path(
    post, path = "/v1/schedules/{name}/resume",
    tag = "schedules",
    params(("name" = String, Path, min_length = 1, max_length = 200, pattern = "^[A-Za-z0-9_.:-]+$", description = "schedule name")),
    responses((status = 200, description = "the schedule", body = docket_core::Schedule), (status = 404, description = "not_found", body = crate::error::ErrorBody)),
    summary = "Resume from the next occurrence after now (missed ones are not fired)"
)]
pub(crate) async fn schedule_resume(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    Path(name): Path<String>,
) -> ApiResult<Json<docket_core::Schedule>> {
    schedule_set_paused(s, &headers, name, false).await
}
