//! The one error shape of the API: `{"error": {"code": "...", "message": "...", "details"?: any}}`
//! with a stable machine-readable `code`. Internal details are logged, never sent.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use docket_engine::EngineError;
use serde_json::{json, Value};

/// Every error code of the API, each with exactly one HTTP status (the error table of `docs/src/api/index.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, utoipa::ToSchema)]
#[schema(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Code {
    /// bad request (invalid_json)
    InvalidJson,
    /// bad request (invalid_request)
    InvalidRequest,
    /// bad request (invalid_duration)
    InvalidDuration,
    /// bad request (invalid_text)
    InvalidText,
    /// bad request (invalid_schedule)
    InvalidSchedule,
    /// bad request (sql_disabled)
    SqlDisabled,
    /// bad request (sql_target_not_allowed)
    SqlTargetNotAllowed,
    /// bad request (invalid_sql_payload)
    InvalidSqlPayload,
    /// bad request (url_not_allowed): a processor or webhook URL outside the outbound allow-list
    UrlNotAllowed,
    /// unprocessable entity (invalid_task)
    InvalidTask,
    /// unprocessable entity (processor_error)
    ProcessorError,
    /// not found (not_found)
    NotFound,
    /// not found (route_not_found)
    RouteNotFound,
    /// not found (namespace_not_found)
    NamespaceNotFound,
    /// not found (process_not_found)
    ProcessNotFound,
    /// method not allowed (method_not_allowed)
    MethodNotAllowed,
    /// unauthorized (unauthenticated): no token, or an unknown, revoked or expired one
    Unauthenticated,
    /// forbidden (forbidden): the token lacks the scope (or queue) the request needs
    Forbidden,
    /// payload too large (payload_too_large)
    PayloadTooLarge,
    /// unsupported media type (unsupported_media_type): a body that is not declared JSON
    UnsupportedMediaType,
    /// too many requests (rate_limited): over the token's request rate or long-poll cap;
    /// `Retry-After` says when to try again
    RateLimited,
    /// conflict (lease_lost)
    LeaseLost,
    /// conflict (cancelled)
    Cancelled,
    /// conflict (timed_out)
    TimedOut,
    /// conflict (invalid_state)
    InvalidState,
    /// conflict (conflict)
    Conflict,
    /// conflict (nondeterministic): a durable function's replay asked for another call than
    /// the run's journal holds at that place (the message names both)
    Nondeterministic,
    /// conflict (process_exists)
    ProcessExists,
    /// conflict (process_is_running)
    ProcessIsRunning,
    /// conflict (process_not_running)
    ProcessNotRunning,
    /// precondition failed (version_mismatch): `If-Match` (or `version`) names a version the
    /// task has moved on from
    VersionMismatch,
    /// internal server error (internal)
    Internal,
    /// gateway timeout (timeout)
    Timeout,
    /// service unavailable (unavailable)
    Unavailable,
    /// service unavailable (maintenance_stalled)
    MaintenanceStalled,
}

impl Code {
    /// Every code, for documentation and tests.
    pub const ALL: &'static [Code] = &[
        Code::InvalidJson,
        Code::InvalidRequest,
        Code::InvalidDuration,
        Code::InvalidText,
        Code::InvalidSchedule,
        Code::SqlDisabled,
        Code::SqlTargetNotAllowed,
        Code::InvalidSqlPayload,
        Code::UrlNotAllowed,
        Code::InvalidTask,
        Code::ProcessorError,
        Code::NotFound,
        Code::RouteNotFound,
        Code::NamespaceNotFound,
        Code::ProcessNotFound,
        Code::MethodNotAllowed,
        Code::Unauthenticated,
        Code::Forbidden,
        Code::PayloadTooLarge,
        Code::UnsupportedMediaType,
        Code::RateLimited,
        Code::LeaseLost,
        Code::Cancelled,
        Code::TimedOut,
        Code::InvalidState,
        Code::Conflict,
        Code::Nondeterministic,
        Code::ProcessExists,
        Code::ProcessIsRunning,
        Code::ProcessNotRunning,
        Code::VersionMismatch,
        Code::Internal,
        Code::Timeout,
        Code::Unavailable,
        Code::MaintenanceStalled,
    ];

    /// The HTTP status this code always comes with.
    pub fn status(self) -> StatusCode {
        match self {
            Code::InvalidJson => StatusCode::BAD_REQUEST,
            Code::InvalidRequest => StatusCode::BAD_REQUEST,
            Code::InvalidDuration => StatusCode::BAD_REQUEST,
            Code::InvalidText => StatusCode::BAD_REQUEST,
            Code::InvalidSchedule => StatusCode::BAD_REQUEST,
            Code::SqlDisabled => StatusCode::BAD_REQUEST,
            Code::SqlTargetNotAllowed => StatusCode::BAD_REQUEST,
            Code::InvalidSqlPayload => StatusCode::BAD_REQUEST,
            Code::UrlNotAllowed => StatusCode::BAD_REQUEST,
            Code::InvalidTask => StatusCode::UNPROCESSABLE_ENTITY,
            Code::ProcessorError => StatusCode::UNPROCESSABLE_ENTITY,
            Code::NotFound => StatusCode::NOT_FOUND,
            Code::RouteNotFound => StatusCode::NOT_FOUND,
            Code::NamespaceNotFound => StatusCode::NOT_FOUND,
            Code::ProcessNotFound => StatusCode::NOT_FOUND,
            Code::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Code::Unauthenticated => StatusCode::UNAUTHORIZED,
            Code::Forbidden => StatusCode::FORBIDDEN,
            Code::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Code::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Code::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            Code::LeaseLost => StatusCode::CONFLICT,
            Code::Cancelled => StatusCode::CONFLICT,
            Code::TimedOut => StatusCode::CONFLICT,
            Code::InvalidState => StatusCode::CONFLICT,
            Code::Conflict => StatusCode::CONFLICT,
            Code::Nondeterministic => StatusCode::CONFLICT,
            Code::ProcessExists => StatusCode::CONFLICT,
            Code::ProcessIsRunning => StatusCode::CONFLICT,
            Code::ProcessNotRunning => StatusCode::CONFLICT,
            Code::VersionMismatch => StatusCode::PRECONDITION_FAILED,
            Code::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            Code::Timeout => StatusCode::GATEWAY_TIMEOUT,
            Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Code::MaintenanceStalled => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The code as sent: `{"error": {"code": "..."}}`.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::InvalidJson => "invalid_json",
            Code::InvalidRequest => "invalid_request",
            Code::InvalidDuration => "invalid_duration",
            Code::InvalidText => "invalid_text",
            Code::InvalidSchedule => "invalid_schedule",
            Code::SqlDisabled => "sql_disabled",
            Code::SqlTargetNotAllowed => "sql_target_not_allowed",
            Code::InvalidSqlPayload => "invalid_sql_payload",
            Code::InvalidTask => "invalid_task",
            Code::ProcessorError => "processor_error",
            Code::NotFound => "not_found",
            Code::RouteNotFound => "route_not_found",
            Code::NamespaceNotFound => "namespace_not_found",
            Code::ProcessNotFound => "process_not_found",
            Code::MethodNotAllowed => "method_not_allowed",
            Code::Unauthenticated => "unauthenticated",
            Code::Forbidden => "forbidden",
            Code::PayloadTooLarge => "payload_too_large",
            Code::UnsupportedMediaType => "unsupported_media_type",
            Code::RateLimited => "rate_limited",
            Code::UrlNotAllowed => "url_not_allowed",
            Code::LeaseLost => "lease_lost",
            Code::Cancelled => "cancelled",
            Code::TimedOut => "timed_out",
            Code::InvalidState => "invalid_state",
            Code::Conflict => "conflict",
            Code::Nondeterministic => "nondeterministic",
            Code::ProcessExists => "process_exists",
            Code::ProcessIsRunning => "process_is_running",
            Code::ProcessNotRunning => "process_not_running",
            Code::VersionMismatch => "version_mismatch",
            Code::Internal => "internal",
            Code::Timeout => "timeout",
            Code::Unavailable => "unavailable",
            Code::MaintenanceStalled => "maintenance_stalled",
        }
    }
}

/// An API error: HTTP status, stable code, human message.
#[derive(Debug)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable code (see the error table of `docs/src/api/index.md`).
    pub code: &'static str,
    /// Human-readable message.
    pub message: String,
    /// Optional structured details.
    pub details: Option<Value>,
    /// Seconds for a `Retry-After` header (429 `rate_limited`).
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// A new error; its status is the code's.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        ApiError {
            status: code.status(),
            code: code.as_str(),
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    /// The same error with a `Retry-After` of `secs` (at least 1).
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs.max(1));
        self
    }

    /// 400 `invalid_request`, or 400 `invalid_duration` when the message is about a duration.
    pub fn invalid(message: impl Into<String>) -> Self {
        let message = message.into();
        let code = if message.contains("invalid duration") {
            Code::InvalidDuration
        } else {
            Code::InvalidRequest
        };
        ApiError::new(code, message)
    }

    /// 404 `not_found`.
    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::new(Code::NotFound, message)
    }
}

/// The body of every error answer: `{"error": {"code", "message", "details"?}}`.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// Stable machine-readable code; each code comes with exactly one HTTP status.
    #[schema(value_type = String)]
    pub code: &'static str,
    /// For people; may change between versions.
    pub message: String,
    /// Structured details (the processor's error, the failing batch index, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

/// What a handler answers.
pub(crate) type ApiResult<T> = Result<T, ApiError>;

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: self.message,
                details: self.details,
            },
        };
        let mut r = (self.status, axum::Json(body)).into_response();
        if let Some(secs) = self.retry_after {
            r.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, secs.into());
        }
        r
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::InvalidTask { index, message } => {
                let mut err = ApiError::new(Code::InvalidTask, format!("task {index}: {message}"));
                err.details = Some(json!({"index": index}));
                err
            }
            EngineError::InvalidSchedule(m) => ApiError::new(Code::InvalidSchedule, m),
            EngineError::Refused { index, refusal } => {
                let status =
                    StatusCode::from_u16(refusal.status).unwrap_or(StatusCode::BAD_REQUEST);
                let mut err = ApiError::new(Code::InvalidTask, refusal.message);
                err.status = status;
                err.code = refusal.code;
                if let Some(i) = index {
                    err.message = format!("task {i}: {}", err.message);
                    err.details = Some(json!({"index": i}));
                }
                err
            }
            EngineError::Invalid(m) => ApiError::new(Code::InvalidRequest, m),
            EngineError::NotFound(what) => ApiError::not_found(format!("{what} not found")),
            EngineError::LeaseLost => ApiError::new(Code::LeaseLost, e.to_string()),
            EngineError::Cancelled => {
                ApiError::new(Code::Cancelled, "task was cancelled; stop working on it")
            }
            EngineError::TimedOut => ApiError::new(
                Code::TimedOut,
                "the attempt ran past the task's timeout and was failed; stop working on it",
            ),
            EngineError::InvalidState(m) => ApiError::new(Code::InvalidState, m),
            EngineError::Conflict(m) => ApiError::new(Code::Conflict, m),
            EngineError::Nondeterministic(m) => ApiError::new(Code::Nondeterministic, m),
            EngineError::PreconditionFailed(m) => ApiError::new(Code::VersionMismatch, m),
            EngineError::BadValue(m) => {
                tracing::warn!(error = %m, "the database refused a value");
                ApiError::new(
                    Code::InvalidRequest,
                    "the database refused a value of this request (out of range or badly encoded)",
                )
            }
            EngineError::Constraint(m) => {
                tracing::warn!(error = %m, "a constraint refused the change");
                ApiError::new(
                    Code::Conflict,
                    "a constraint of the database refused the change",
                )
            }
            EngineError::Corrupt(m) => {
                tracing::error!(error = %m, "stored data does not decode");
                ApiError::new(
                    Code::Internal,
                    "a stored value does not decode; the server logged which",
                )
            }
            EngineError::Unavailable(m) => {
                tracing::error!(error = %m, "store error");
                ApiError::new(Code::Unavailable, "the database is unavailable; try again")
            }
            other => {
                tracing::error!(error = %other, "engine error");
                ApiError::new(Code::Internal, "internal error")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each code is one string with one status, and the error table of the API guide
    /// (`docs/src/api/index.md`) gives each its status, and the OpenAPI document names each.
    #[test]
    fn every_code_is_unique_and_documented() {
        let guide = include_str!("../../../docs/src/api/index.md");
        // `| 409 | `lease_lost`, `cancelled` | when |`: the status, then the codes it covers.
        let mut table = std::collections::HashMap::new();
        for row in guide
            .lines()
            .filter(|l| l.starts_with("| 4") || l.starts_with("| 5"))
        {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let status: u16 = cells[1].parse().expect("a status");
            for code in cells[2].split('`').skip(1).step_by(2) {
                assert!(
                    table.insert(code.to_string(), status).is_none(),
                    "{code} twice in the guide's error table"
                );
            }
        }
        let openapi = crate::openapi::document();
        let doc: serde_json::Value = serde_json::from_str(openapi).unwrap();
        let documented: Vec<&str> = doc["components"]["schemas"]["Code"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        let ours: Vec<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(
            documented, ours,
            "the Code schema lists every code as it is sent"
        );
        let mut seen = std::collections::HashSet::new();
        for c in Code::ALL {
            assert!(seen.insert(c.as_str()), "{} twice", c.as_str());
            assert_eq!(
                table.get(c.as_str()).copied(),
                Some(c.status().as_u16()),
                "the API guide's error table gives {} its status",
                c.as_str()
            );
            assert!(
                openapi.contains(c.as_str()),
                "openapi.json does not name {}",
                c.as_str()
            );
        }
    }
}
