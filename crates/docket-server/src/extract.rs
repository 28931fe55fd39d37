//! Reading requests: JSON bodies, queries, ids and names, with the API's error shape, and
//! the middleware that turns axum's own rejections into it.

use crate::error::{ApiError, ApiResult, Code};
use crate::state::{MAX_BODY_BYTES, MAX_PAYLOAD_BYTES};
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::Query;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::time::Duration;

/// Parses a JSON body with our error shape: 400 `invalid_json` for malformed JSON, 400
/// `invalid_request`/`invalid_duration` for well-formed JSON of the wrong shape (unknown fields
/// included), 413 `payload_too_large` past [`MAX_BODY_BYTES`].
pub(crate) fn parse<T: DeserializeOwned>(body: Result<Bytes, BytesRejection>) -> ApiResult<T> {
    let body = body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                Code::PayloadTooLarge,
                format!("request body is larger than {MAX_BODY_BYTES} bytes"),
            )
        } else {
            ApiError::invalid(e.body_text())
        }
    })?;
    let body: &[u8] = if body.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        &body
    };
    if json_has_nul(body) {
        return Err(nul_error());
    }
    // Every body is a JSON object; serde would also read a struct from an array (`[]`).
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{')
        && serde_json::from_slice::<serde::de::IgnoredAny>(body).is_ok()
    {
        return Err(ApiError::invalid("the body must be a JSON object"));
    }
    serde_json::from_slice(body).map_err(|e| match e.classify() {
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
            ApiError::new(Code::InvalidJson, format!("malformed JSON: {e}"))
        }
        _ => ApiError::invalid(e.to_string()),
    })
}

/// 400 `invalid_text`: docket refuses NUL (U+0000) in every text it is sent, on every backend
/// alike, because PostgreSQL cannot store it in `text` or `jsonb`.
pub(crate) fn nul_error() -> ApiError {
    ApiError::new(
        Code::InvalidText,
        "text must not contain NUL characters (\\u0000 in JSON, %00 in URLs)",
    )
}

/// Whether JSON text holds the escape `\u0000` (the only way a NUL can be in valid JSON),
/// not counting an escaped backslash followed by `u0000`.
pub(crate) fn json_has_nul(b: &[u8]) -> bool {
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' {
            if b.get(i + 1) == Some(&b'u') && b.get(i + 2..i + 6) == Some(b"0000".as_slice()) {
                return true;
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    false
}

/// Turns the plain-text error answers of axum's own extractors (a path segment that is not
/// valid UTF-8 after percent-decoding, a malformed query, …) into docket's JSON error shape, so
/// every error a client sees is `{"error": {"code", "message"}}`.
pub(crate) async fn json_errors(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let resp = next.run(req).await;
    let status = resp.status();
    let plain = resp
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/plain"));
    if !(status.is_client_error() || status.is_server_error()) || !plain {
        return resp;
    }
    let text = match axum::body::to_bytes(resp.into_body(), 64 * 1024).await {
        Ok(b) => String::from_utf8_lossy(&b).trim().to_string(),
        Err(_) => String::new(),
    };
    let code = match status.as_u16() {
        404 => Code::NotFound,
        405 => Code::MethodNotAllowed,
        413 => Code::PayloadTooLarge,
        415 => Code::UnsupportedMediaType,
        s if s >= 500 => Code::Internal,
        _ => Code::InvalidRequest,
    };
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_string()
    } else {
        text
    };
    ApiError::new(code, message).into_response()
}

/// Refuses requests whose path or query holds a percent-encoded NUL (`%00`) with 400
/// `invalid_text`, before any handler or the database sees it.
pub(crate) async fn refuse_nul(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let uri = req.uri();
    let has = |s: &str| {
        s.as_bytes()
            .windows(3)
            .any(|w| w.eq_ignore_ascii_case(b"%00"))
    };
    if has(uri.path()) || uri.query().is_some_and(has) {
        return nul_error().into_response();
    }
    next.run(req).await
}

/// A claim's `lease` or a heartbeat's `extend`: 100 ms to 30 days.
pub(crate) fn check_lease(field: &str, d: Option<Duration>) -> ApiResult<()> {
    d.map_or(Ok(()), |d| {
        docket_core::duration::check_range(
            field,
            d,
            Duration::from_millis(100),
            docket_core::duration::MAX_TIMEOUT,
        )
        .map_err(ApiError::invalid)
    })
}

pub(crate) fn check_size(what: &str, v: &Value) -> ApiResult<()> {
    // Cheap upper bound first; serialise only when it may be large.
    let n = serde_json::to_vec(v).map(|b| b.len()).unwrap_or(0);
    if n > MAX_PAYLOAD_BYTES {
        return Err(ApiError::new(
            Code::PayloadTooLarge,
            format!("{what} is {n} bytes; the limit is {MAX_PAYLOAD_BYTES}"),
        ));
    }
    Ok(())
}

pub(crate) fn task_id(s: &str) -> ApiResult<i64> {
    s.parse::<i64>()
        .ok()
        .filter(|i| *i > 0)
        .ok_or_else(|| ApiError::invalid(format!("task id must be a positive integer, got {s:?}")))
}

pub(crate) fn check_name(what: &str, s: &str) -> ApiResult<()> {
    docket_core::task::check_name(what, s).map_err(ApiError::invalid)
}

/// A namespace in a path: 1 to 64 of `A-Z a-z 0-9 _ . -` ([`docket_core::process::check_namespace`],
/// the rule the engine applies when one is created).
pub(crate) fn check_namespace(ns: &str) -> ApiResult<()> {
    docket_core::process::check_namespace(ns).map_err(ApiError::invalid)
}

pub(crate) fn query<T>(q: Result<Query<T>, QueryRejection>) -> ApiResult<T> {
    q.map(|Query(q)| q)
        .map_err(|e| ApiError::invalid(e.body_text()))
}

/// The trace id of a request: W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`), else
/// `X-Trace-Id`.
pub(crate) fn request_trace_id(headers: &axum::http::HeaderMap) -> Option<String> {
    let tp = headers
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split('-').nth(1))
        .map(str::to_string);
    tp.or_else(|| {
        headers
            .get("x-trace-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    })
    .filter(|t| t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit()))
}
