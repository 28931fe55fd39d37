//! API tokens: create (admin only; the secret is shown once), list, revoke.

use crate::prelude::*;

#[utoipa::path(
    post, path = "/v1/tokens",
    tag = "tokens",
    request_body = docket_core::api::TokenCreateRequest,
    responses((status = 201, description = "the token, shown this once", body = docket_core::api::TokenCreated), (status = 401, description = "unauthenticated", body = crate::error::ErrorBody), (status = 403, description = "forbidden: needs admin", body = crate::error::ErrorBody), (status = 409, description = "conflict: a live token has the name", body = crate::error::ErrorBody)),
    summary = "Create an API token (admin); only its SHA-256 is stored"
)]
pub(crate) async fn token_create(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let b: docket_core::api::TokenCreateRequest = parse(body)?;
    let (token, rec) = s
        .engine
        .token_create(docket_engine::auth::NewToken {
            name: b.name,
            scopes: b.scopes,
            queues: b.queues,
            expires_in: b.expires_in,
            secret: None,
        })
        .await?;
    actions::token_changed(&s, &actions::actor(&headers, "api"), "create", &rec.name).await;
    Ok((
        StatusCode::CREATED,
        Json(docket_core::api::TokenCreated { token, info: rec }),
    )
        .into_response())
}

#[utoipa::path(
    get, path = "/v1/tokens",
    tag = "tokens",
    responses((status = 200, description = "every token, revoked ones included", body = docket_core::api::TokenList), (status = 401, description = "unauthenticated", body = crate::error::ErrorBody), (status = 403, description = "forbidden: needs admin", body = crate::error::ErrorBody)),
    summary = "List API tokens (admin); never the tokens themselves"
)]
pub(crate) async fn token_list(
    State(s): State<AppState>,
) -> ApiResult<Json<docket_core::api::TokenList>> {
    let tokens = s.engine.token_list().await?;
    Ok(Json(docket_core::api::TokenList { tokens }))
}

#[utoipa::path(
    delete, path = "/v1/tokens/{name}",
    tag = "tokens",
    params(("name" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "token name")),
    responses((status = 204, description = "revoked: it stops working at once on every node"), (status = 401, description = "unauthenticated", body = crate::error::ErrorBody), (status = 403, description = "forbidden: needs admin", body = crate::error::ErrorBody), (status = 404, description = "no live token has the name", body = crate::error::ErrorBody)),
    summary = "Revoke an API token (admin)"
)]
pub(crate) async fn token_revoke(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    check_name("name", &name)?;
    if s.engine.token_revoke(&name).await? {
        actions::token_changed(&s, &actions::actor(&headers, "api"), "revoke", &name).await;
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found(format!("no live token named {name:?}")))
    }
}
