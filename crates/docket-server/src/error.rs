//! The one error shape of the API: `{"error": {"code": "...", "message": "...", "details"?: any}}`
//! with a stable machine-readable `code`. Internal details are logged, never sent.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use docket_engine::EngineError;
use docket_store::StoreError;
use serde_json::{json, Value};

/// An API error: HTTP status, stable code, human message.
#[derive(Debug)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable code (see the README's table).
    pub code: &'static str,
    /// Human-readable message.
    pub message: String,
    /// Optional structured details.
    pub details: Option<Value>,
}

impl ApiError {
    /// A new error.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            details: None,
        }
    }

    /// 400 `invalid_request`, or 400 `invalid_duration` when the message is about a duration.
    pub fn invalid(message: impl Into<String>) -> Self {
        let message = message.into();
        let code = if message.contains("invalid duration") {
            "invalid_duration"
        } else {
            "invalid_request"
        };
        ApiError::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// 404 `not_found`.
    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({"error": {"code": self.code, "message": self.message}});
        if let Some(d) = self.details {
            body["error"]["details"] = d;
        }
        (self.status, axum::Json(body)).into_response()
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(what) => ApiError::not_found(format!("{what} not found")),
            StoreError::LeaseLost => {
                ApiError::new(StatusCode::CONFLICT, "lease_lost", e.to_string())
            }
            StoreError::Cancelled => ApiError::new(
                StatusCode::CONFLICT,
                "cancelled",
                "task was cancelled; stop working on it",
            ),
            StoreError::InvalidState(m) => ApiError::new(StatusCode::CONFLICT, "invalid_state", m),
            StoreError::Conflict(m) => ApiError::new(StatusCode::CONFLICT, "conflict", m),
            StoreError::Invalid(m) => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_request", m)
            }
            other => {
                tracing::error!(error = %other, "store error");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "the database is unavailable; try again",
                )
            }
        }
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::InvalidTask { index, message } => {
                let mut err = ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid_task",
                    format!("task {index}: {message}"),
                );
                err.details = Some(json!({"index": index}));
                err
            }
            EngineError::InvalidSchedule(m) => {
                ApiError::new(StatusCode::BAD_REQUEST, "invalid_schedule", m)
            }
            EngineError::Store(s) => s.into(),
            other => {
                tracing::error!(error = %other, "engine error");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "internal error",
                )
            }
        }
    }
}
