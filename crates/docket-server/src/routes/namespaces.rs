//! Namespaces of durable processes, and how process errors map to API errors.

use crate::prelude::*;

impl From<ProcessError> for ApiError {
    fn from(e: ProcessError) -> Self {
        match e {
            ProcessError::NamespaceNotFound(ns) => {
                ApiError::new(Code::NamespaceNotFound, format!("namespace {ns} not found"))
            }
            ProcessError::NotFound => ApiError::new(Code::ProcessNotFound, "process not found"),
            ProcessError::Exists => ApiError::new(Code::ProcessExists, "process exists"),
            ProcessError::NotRunning(m) => ApiError::new(Code::ProcessNotRunning, m),
            ProcessError::IsRunning(m) => ApiError::new(Code::ProcessIsRunning, m),
            ProcessError::Processor(v) => {
                let mut err =
                    ApiError::new(Code::ProcessorError, "the processor answered with an error");
                err.details = Some(v);
                err
            }
            ProcessError::Timeout => ApiError::new(
                Code::Timeout,
                "no answer within the namespace's process_step_timeout",
            ),
            ProcessError::Cancelled(m) => ApiError::new(Code::Cancelled, m),
            ProcessError::Invalid(m) => ApiError::invalid(m),
            ProcessError::UrlNotAllowed(m) => ApiError::new(Code::UrlNotAllowed, m),
            ProcessError::Store(s) => s.into(),
            other => {
                tracing::error!(error = %other, "process error");
                ApiError::new(Code::Internal, "internal error")
            }
        }
    }
}

#[utoipa::path(
    get, path = "/v1/namespaces",
    tag = "processes",
    responses((status = 200, description = "namespaces", body = docket_core::api::NamespaceList)),
    summary = "Every namespace"
)]
pub(crate) async fn namespace_list(State(s): State<AppState>) -> ApiResult<Json<NamespaceList>> {
    let namespaces = s
        .processes
        .namespaces()
        .await?
        .into_iter()
        .map(|(name, config)| NamespaceView { name, config })
        .collect();
    Ok(Json(NamespaceList { namespaces }))
}

#[utoipa::path(
    get, path = "/v1/namespaces/{ns}",
    tag = "processes",
    params(("ns" = String, Path, min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_.-]+$", description = "namespace: 1 to 64 of A-Z a-z 0-9 _ . -")),
    responses((status = 200, description = "the namespace", body = docket_core::api::NamespaceView), (status = 404, description = "not_found", body = crate::error::ErrorBody)),
    summary = "One namespace"
)]
pub(crate) async fn namespace_get(
    State(s): State<AppState>,
    Path(ns): Path<String>,
) -> ApiResult<Json<NamespaceView>> {
    check_namespace(&ns)?;
    let config = s.processes.namespace(&ns).await?;
    Ok(Json(NamespaceView { name: ns, config }))
}

#[utoipa::path(
    put, path = "/v1/namespaces/{ns}",
    tag = "processes",
    params(("ns" = String, Path, min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_.-]+$", description = "namespace: 1 to 64 of A-Z a-z 0-9 _ . -")),
    request_body = docket_core::process::NamespaceConfig,
    responses((status = 200, description = "the namespace", body = docket_core::api::NamespaceView)),
    summary = "Create or replace a namespace (omitted fields take progressor's defaults)"
)]
pub(crate) async fn namespace_put(
    State(s): State<AppState>,
    Path(ns): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<NamespaceView>> {
    check_namespace(&ns)?;
    let config: NamespaceConfig = parse(body)?;
    s.processes.namespace_put(&ns, config.clone()).await?;
    Ok(Json(NamespaceView { name: ns, config }))
}
