//! Batches (issue 26): create with callbacks, add tasks, seal, list, read.

use crate::prelude::*;
use docket_core::batch::{Batch, BatchAdd, BatchCreated, BatchList, NewBatch};

/// The caller's checks on tasks it enqueues: kind scopes, payload sizes, and the request's
/// trace id on tasks without one.
fn check_tasks(
    s: &AppState,
    headers: &axum::http::HeaderMap,
    caller: Option<&docket_engine::auth::Caller>,
    tasks: &mut [NewTask],
) -> ApiResult<()> {
    let trace = request_trace_id(headers);
    for t in tasks.iter_mut() {
        auth::check_kind_scope(&s.engine, caller, &[t])?;
        check_size("payload", &t.payload)?;
        if let Some(p) = &t.progress {
            check_size("progress", p)?;
        }
        if t.trace_id.is_none() {
            t.trace_id = trace.clone();
        }
    }
    Ok(())
}

#[utoipa::path(
    post, path = "/v1/batches",
    tag = "batches",
    request_body = NewBatch,
    responses((status = 201, description = "the batch and its tasks", body = BatchCreated), (status = 400, description = "invalid_request", body = crate::error::ErrorBody), (status = 413, description = "payload_too_large", body = crate::error::ErrorBody), (status = 422, description = "invalid_task", body = crate::error::ErrorBody)),
    summary = "Create a batch: its tasks in one transaction, and callback tasks enqueued once when every task finished"
)]
pub(crate) async fn batch_create(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    caller: Option<axum::Extension<docket_engine::auth::Caller>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let mut b: NewBatch = parse(body)?;
    let caller = caller.as_ref().map(|c| &c.0);
    check_tasks(&s, &headers, caller, &mut b.tasks)?;
    let mut callbacks: Vec<NewTask> = docket_core::batch::CALLBACKS
        .iter()
        .filter_map(|c| b.callbacks.get(c).cloned())
        .collect();
    check_tasks(&s, &headers, caller, &mut callbacks)?;
    let (batch, tasks) = s.engine.batch_create(b).await?;
    Ok((StatusCode::CREATED, Json(BatchCreated { batch, tasks })).into_response())
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct BatchListQuery {
    /// Only batches with ids below this (the next page: the last id seen).
    before: Option<i64>,
    /// At most this many, 1..=100; default 50.
    #[param(minimum = 1, maximum = 100)]
    limit: Option<i64>,
}

#[utoipa::path(
    get, path = "/v1/batches",
    tag = "batches",
    params(BatchListQuery),
    responses((status = 200, description = "batches, newest first, with their progress", body = BatchList), (status = 400, description = "invalid_request", body = crate::error::ErrorBody)),
    summary = "List batches"
)]
pub(crate) async fn batch_list(
    State(s): State<AppState>,
    q: Result<Query<BatchListQuery>, QueryRejection>,
) -> ApiResult<Json<BatchList>> {
    let Query(q) = q.map_err(|e| ApiError::invalid(e.body_text()))?;
    let limit = q.limit.unwrap_or(50);
    if !(1..=100).contains(&limit) {
        return Err(ApiError::invalid("limit must be 1 to 100"));
    }
    Ok(Json(BatchList {
        batches: s.engine.batch_list(q.before, limit).await?,
    }))
}

fn batch_id(id: &str) -> ApiResult<i64> {
    match id.parse::<i64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(ApiError::invalid(format!(
            "batch id must be a positive integer, not {id:?}"
        ))),
    }
}

#[utoipa::path(
    get, path = "/v1/batches/{id}",
    tag = "batches",
    params(("id" = i64, Path, minimum = 1, description = "batch id")),
    responses((status = 200, description = "the batch: its tasks counted by state, its callbacks and which were enqueued", body = Batch), (status = 404, description = "not_found", body = crate::error::ErrorBody)),
    summary = "One batch and its progress"
)]
pub(crate) async fn batch_get(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Batch>> {
    let id = batch_id(&id)?;
    match s.engine.batch_get(id).await? {
        Some(b) => Ok(Json(b)),
        None => Err(ApiError::not_found(format!("batch {id} not found"))),
    }
}

#[utoipa::path(
    post, path = "/v1/batches/{id}/tasks",
    tag = "batches",
    params(("id" = i64, Path, minimum = 1, description = "batch id")),
    request_body = BatchAdd,
    responses((status = 201, description = "the batch and the tasks added", body = BatchCreated), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "conflict: the batch settled", body = crate::error::ErrorBody), (status = 422, description = "invalid_task", body = crate::error::ErrorBody)),
    summary = "Add tasks to a batch that has not settled (from a running member, too), and seal it when asked"
)]
pub(crate) async fn batch_add(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    caller: Option<axum::Extension<docket_engine::auth::Caller>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let id = batch_id(&id)?;
    let mut add: BatchAdd = parse(body)?;
    check_tasks(&s, &headers, caller.as_ref().map(|c| &c.0), &mut add.tasks)?;
    let (batch, tasks) = s.engine.batch_add(id, add.tasks, add.seal).await?;
    Ok((StatusCode::CREATED, Json(BatchCreated { batch, tasks })).into_response())
}

#[utoipa::path(
    post, path = "/v1/batches/{id}/seal",
    tag = "batches",
    params(("id" = i64, Path, minimum = 1, description = "batch id")),
    responses((status = 200, description = "the batch, sealed", body = Batch), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "conflict: the batch settled", body = crate::error::ErrorBody)),
    summary = "Seal an open batch: its callbacks run once every task finished"
)]
pub(crate) async fn batch_seal(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Batch>> {
    let id = batch_id(&id)?;
    let (batch, _) = s.engine.batch_add(id, vec![], true).await?;
    Ok(Json(batch))
}
