//! Rate limits (issue 26 item 3): create or replace, list, read, delete.

use crate::prelude::*;
use docket_core::rate_limit::{RateLimit, RateLimitList, RateLimitSpec};

#[utoipa::path(
    put, path = "/v1/rate-limits/{name}",
    tag = "rate-limits",
    params(("name" = String, Path, min_length = 1, max_length = 100, pattern = "^[A-Za-z0-9_.-]+$", description = "the limit's name (tasks name it in rate_limit, optionally with :partition)")),
    request_body = RateLimitSpec,
    responses((status = 200, description = "the limit", body = RateLimit), (status = 400, description = "invalid_request", body = crate::error::ErrorBody)),
    summary = "Create or replace a rate limit (window, bucket or concurrent); its keys start afresh"
)]
pub(crate) async fn rate_limit_put(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<RateLimit>> {
    docket_core::rate_limit::check_name(&name).map_err(ApiError::invalid)?;
    let spec: RateLimitSpec = parse(body)?;
    spec.check().map_err(ApiError::invalid)?;
    let who = actions::actor(&headers, "api");
    Ok(Json(s.engine.rate_limit_put(&who, &name, &spec).await?))
}

#[utoipa::path(
    get, path = "/v1/rate-limits",
    tag = "rate-limits",
    responses((status = 200, description = "every limit with its totals", body = RateLimitList)),
    summary = "List rate limits with what they admitted and delayed"
)]
pub(crate) async fn rate_limit_list(State(s): State<AppState>) -> ApiResult<Json<RateLimitList>> {
    Ok(Json(RateLimitList {
        rate_limits: s.engine.rate_limit_list().await?,
    }))
}

#[utoipa::path(
    get, path = "/v1/rate-limits/{name}",
    tag = "rate-limits",
    params(("name" = String, Path, min_length = 1, max_length = 100, pattern = "^[A-Za-z0-9_.-]+$", description = "the limit's name")),
    responses((status = 200, description = "the limit", body = RateLimit), (status = 404, description = "not_found", body = crate::error::ErrorBody)),
    summary = "Read a rate limit with its totals"
)]
pub(crate) async fn rate_limit_get(
    State(s): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult<Json<RateLimit>> {
    docket_core::rate_limit::check_name(&name).map_err(ApiError::invalid)?;
    Ok(Json(s.engine.rate_limit_get(&name).await?))
}

#[utoipa::path(
    delete, path = "/v1/rate-limits/{name}",
    tag = "rate-limits",
    params(("name" = String, Path, min_length = 1, max_length = 100, pattern = "^[A-Za-z0-9_.-]+$", description = "the limit's name")),
    responses((status = 204, description = "deleted: its tasks run unlimited"), (status = 404, description = "not_found", body = crate::error::ErrorBody)),
    summary = "Delete a rate limit (tasks naming it run unlimited)"
)]
pub(crate) async fn rate_limit_delete(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    docket_core::rate_limit::check_name(&name).map_err(ApiError::invalid)?;
    let who = actions::actor(&headers, "api");
    s.engine.rate_limit_delete(&who, &name).await?;
    Ok(StatusCode::NO_CONTENT)
}
