//! Queues: counts, settings, pause and resume.

use crate::prelude::*;

#[utoipa::path(
    get, path = "/v1/queues",
    tag = "queues",
    responses((status = 200, description = "queues", body = docket_core::api::QueueList)),
    summary = "Every queue with counts by state"
)]
pub(crate) async fn queue_list(State(s): State<AppState>) -> ApiResult<Json<QueueList>> {
    Ok(Json(QueueList {
        queues: s.engine.queue_list().await?,
    }))
}

#[utoipa::path(
    get, path = "/v1/queues/{queue}",
    tag = "queues",
    params(("queue" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "queue name")),
    responses((status = 200, description = "the queue", body = docket_core::QueueStats)),
    summary = "One queue"
)]
pub(crate) async fn queue_get(
    State(s): State<AppState>,
    Path(queue): Path<String>,
) -> ApiResult<Json<QueueStats>> {
    check_name("queue", &queue)?;
    Ok(Json(s.engine.queue_get(&queue).await?))
}

#[utoipa::path(
    put, path = "/v1/queues/{queue}",
    tag = "queues",
    params(("queue" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "queue name")),
    request_body = docket_core::QueueSettings,
    responses((status = 200, description = "the queue", body = docket_core::QueueStats)),
    summary = "Replace a queue's settings"
)]
pub(crate) async fn queue_put(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    Path(queue): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<QueueStats>> {
    check_name("queue", &queue)?;
    // PUT replaces the settings: an empty body is a mistake, not "reset everything".
    if body
        .as_ref()
        .is_ok_and(|b| b.iter().all(u8::is_ascii_whitespace))
    {
        return Err(ApiError::invalid(
            "PUT /v1/queues/{queue} needs a JSON body with the settings ({} resets them all)",
        ));
    }
    let settings: QueueSettings = parse(body)?;
    settings.validate_for(&queue).map_err(ApiError::invalid)?;
    let who = actions::actor(&headers, "api");
    Ok(Json(s.engine.queue_put(&who, &queue, &settings).await?))
}

pub(crate) async fn set_paused(
    s: AppState,
    headers: &axum::http::HeaderMap,
    queue: String,
    paused: bool,
) -> ApiResult<Json<QueueStats>> {
    let who = actions::actor(headers, "api");
    Ok(Json(actions::queue_paused(&s, &who, &queue, paused).await?))
}

#[utoipa::path(
    post, path = "/v1/queues/{queue}/pause",
    tag = "queues",
    params(("queue" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "queue name")),
    responses((status = 200, description = "the queue", body = docket_core::QueueStats)),
    summary = "Pause: nothing of the queue is claimed"
)]
pub(crate) async fn queue_pause(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    Path(queue): Path<String>,
) -> ApiResult<Json<QueueStats>> {
    set_paused(s, &headers, queue, true).await
}

#[utoipa::path(
    post, path = "/v1/queues/{queue}/resume",
    tag = "queues",
    params(("queue" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "queue name")),
    responses((status = 200, description = "the queue", body = docket_core::QueueStats)),
    summary = "Resume"
)]
pub(crate) async fn queue_resume(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    Path(queue): Path<String>,
) -> ApiResult<Json<QueueStats>> {
    set_paused(s, &headers, queue, false).await
}
