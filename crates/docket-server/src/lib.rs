//! docket's HTTP API. JSON in and out; times RFC 3339 UTC; durations humantime strings.
//! The OpenAPI document (`/openapi.json`) is generated from the handlers and the types of
//! `docket_core::api` (see [`openapi`]).

pub mod actions;
pub mod auth;
pub mod dashboard;
pub mod error;
pub mod events;
pub mod openapi;
pub mod tls;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use docket_core::api::{
    BatchRequest, BatchResponse, ClaimRequest, ClaimResponse, CompleteRequest, FailRequest,
    Finished, HeartbeatRequest, ItemOutcome, NamespaceList, NamespaceView, NodeList, NodeView,
    ProcessCallRequest, ProcessImported, ProcessInitRequest, ProcessPage, ProcessRepaired,
    ProcessResponse, ProcessTrace, ProcessView, QueueList, ScheduleList, TaskPage,
};
use docket_core::process::{HistoryRange, NamespaceConfig};
use docket_core::QueueStats;
use docket_core::{NewTask, QueueSettings, Task};
use docket_engine::process::{ProcessError, ProcessService, Request as ProcessRequest};
use docket_engine::Engine;
use docket_store::{LeaseOutcome, TaskComplete, TaskFail, TaskHeartbeatParams, TaskListParams};
use error::{ApiError, Code};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Largest request body (bytes): batches of tasks go in one request.
pub const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;
/// Largest payload/result/progress of one task (bytes of JSON).
pub const MAX_PAYLOAD_BYTES: usize = 1024 * 1024;
/// Most tasks in one claim or list answer, and in one batch request.
pub const MAX_BATCH: usize = 10_000;
/// Longest long-poll `wait` of a claim.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// Shared state of the handlers.
#[derive(Clone)]
pub struct AppState {
    /// The engine.
    pub engine: Engine,
    /// Fires when the server shuts down: long polls return at once.
    pub shutdown: CancellationToken,
    /// Durable processes.
    pub processes: ProcessService,
    /// Targets `sql` tasks may run on (none: `sql` tasks are refused).
    pub sql: Arc<docket_sql::SqlTargets>,
    /// pg_task tables this node serves (shown on the dashboard).
    pub pg_tasks: Arc<Vec<docket_sql::pgtask::TableView>>,
    /// The shared tail of process notifications behind `/v1/events`.
    pub events: Arc<events::Tail>,
    /// Whether requests need a token (README "Security").
    pub auth: auth::AuthMode,
    /// Served over TLS (the session cookie is then `Secure`).
    pub tls: bool,
    /// Secret of this process behind the dashboard's CSRF tokens when auth is off.
    pub(crate) csrf_secret: Arc<str>,
    /// Host names (without port) requests may be addressed to; `None`: any. A server on a
    /// loopback address allows only loopback names, so a DNS-rebinding page cannot reach it.
    pub allowed_hosts: Option<Arc<Vec<String>>>,
    /// Origins (`https://app.example`) whose pages may call the API from a browser (CORS);
    /// empty: none, and cross-site writes are refused.
    pub cors_origins: Arc<Vec<String>>,
    /// Per-token request limits and their state.
    pub(crate) limiters: Arc<auth::Limiters>,
}

impl AppState {
    /// State for `engine`; process runners start when namespaces are added (call
    /// `processes.start()` to also load the stored ones).
    pub fn new(engine: Engine, shutdown: CancellationToken) -> Self {
        docket_engine::metrics::prometheus();
        let processes = ProcessService::new(engine.clone(), shutdown.clone());
        AppState {
            engine,
            shutdown,
            processes,
            sql: Arc::default(),
            pg_tasks: Arc::default(),
            events: Arc::default(),
            auth: auth::AuthMode::Off,
            allowed_hosts: None,
            tls: false,
            csrf_secret: docket_core::auth::new_token().into(),
            cors_origins: Arc::default(),
            limiters: Arc::new(auth::Limiters::new(auth::Limits::default())),
        }
    }

    /// Lets pages of these origins (`scheme://host[:port]`) call the API from a browser.
    pub fn with_cors_origins(mut self, origins: Vec<String>) -> Self {
        self.cors_origins = Arc::new(origins);
        self
    }

    /// Per-token request limits (see [`auth::Limits`]; the default applies otherwise).
    pub fn with_limits(mut self, limits: auth::Limits) -> Self {
        self.limiters = Arc::new(auth::Limiters::new(limits));
        self
    }

    /// Limits a namespace's processor and webhook URLs to these hosts (see
    /// [`ProcessService::with_outbound_hosts`]).
    pub fn with_outbound_hosts(mut self, hosts: Vec<String>) -> Self {
        self.processes = self.processes.with_outbound_hosts(hosts);
        self
    }

    /// Accepts only requests whose `Host` is one of `hosts` (names or IPs, no port).
    pub fn with_allowed_hosts(mut self, hosts: Vec<String>) -> Self {
        self.allowed_hosts = Some(Arc::new(hosts));
        self
    }

    /// Requires a token on every request (see [`auth::AuthMode`]).
    pub fn with_auth(mut self, mode: auth::AuthMode) -> Self {
        self.auth = mode;
        self
    }

    /// Shows these pg_task tables on the dashboard.
    pub fn with_pg_tasks(mut self, views: Vec<docket_sql::pgtask::TableView>) -> Self {
        self.pg_tasks = Arc::new(views);
        self
    }

    /// Lets `sql` tasks run on `targets` (checked when they are enqueued).
    pub fn with_sql(mut self, targets: docket_sql::SqlTargets) -> Self {
        self.sql = Arc::new(targets);
        self
    }
}

/// Refuses a `sql` task this server would not run (opt-in targets, see README "SQL tasks")
/// and sends it to the `sql` queue when it names none.
pub fn check_sql_task(sql: &docket_sql::SqlTargets, t: &mut NewTask) -> Result<(), ApiError> {
    if t.kind != docket_sql::SQL_KIND {
        return Ok(());
    }
    if !sql.enabled() {
        return Err(ApiError::new(
            Code::SqlDisabled,
            "sql tasks are not enabled on this server: configure [sql] targets",
        ));
    }
    match sql.check(&t.payload) {
        Ok(_) => {}
        Err(e @ docket_sql::SqlRefusal::Payload(_)) => {
            return Err(ApiError::new(Code::InvalidSqlPayload, e.to_string()))
        }
        Err(e @ docket_sql::SqlRefusal::Target(_)) => {
            return Err(ApiError::new(Code::SqlTargetNotAllowed, e.to_string()))
        }
    }
    if t.queue.is_none() {
        t.queue = Some(docket_sql::SQL_QUEUE.into());
    }
    Ok(())
}

type ApiResult<T> = Result<T, ApiError>;

/// Builds the router.
pub fn router(state: AppState) -> Router {
    let cors = cors_layer(&state.cors_origins);
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/openapi.json", get(openapi))
        .route("/metrics", get(metrics_text))
        .route("/v1/tasks", post(task_add).get(task_list))
        .route("/v1/tasks/complete", post(task_complete_batch))
        .route("/v1/tasks/fail", post(task_fail_batch))
        .route("/v1/tasks/{id}", get(task_get))
        .route("/v1/tasks/{id}/cancel", post(task_cancel))
        .route("/v1/tasks/{id}/retry", post(task_retry))
        .route("/v1/tasks/{id}/run-now", post(task_run_now))
        .route("/v1/audit", get(audit_list))
        .route("/v1/status", get(status))
        .route("/v1/changes", get(dashboard::changes))
        .route("/v1/tasks/{id}/heartbeat", post(task_heartbeat))
        .route("/v1/tasks/{id}/complete", post(task_complete))
        .route("/v1/tasks/{id}/fail", post(task_fail))
        .route("/v1/queues", get(queue_list))
        .route("/v1/queues/{queue}", get(queue_get).put(queue_put))
        .route("/v1/queues/{queue}/pause", post(queue_pause))
        .route("/v1/queues/{queue}/resume", post(queue_resume))
        .route("/v1/queues/{queue}/claim", post(queue_claim))
        .route("/v1/nodes", get(node_list))
        .route("/v1/schedules", post(schedule_put).get(schedule_list))
        .route(
            "/v1/schedules/{name}",
            get(schedule_get).delete(schedule_delete),
        )
        .route("/v1/schedules/{name}/pause", post(schedule_pause))
        .route("/v1/schedules/{name}/resume", post(schedule_resume))
        .route("/v1/events", get(events_stream))
        .route("/v1/tokens", post(token_create).get(token_list))
        .route("/v1/tokens/{name}", axum::routing::delete(token_revoke))
        .route("/v1/namespaces", get(namespace_list))
        .route("/v1/namespaces/{ns}", get(namespace_get).put(namespace_put))
        .route(
            "/v1/namespaces/{ns}/processes",
            post(process_init).get(process_list),
        )
        .route(
            "/v1/namespaces/{ns}/processes/{id}/simple-repair",
            post(process_simple_repair),
        )
        .route(
            "/v1/namespaces/{ns}/processes/{id}/trace",
            get(process_trace),
        )
        .route(
            "/v1/namespaces/{ns}/processes/{id}",
            get(process_get).put(process_put),
        )
        .route(
            "/v1/namespaces/{ns}/processes/{id}/call",
            post(process_call),
        )
        .route(
            "/v1/namespaces/{ns}/processes/{id}/repair",
            post(process_repair),
        )
        .merge(dashboard::routes())
        .route_layer(axum::middleware::from_fn(http_metrics))
        .fallback(|| async {
            ApiError::new(Code::RouteNotFound, "no such route; see /openapi.json")
        })
        .method_not_allowed_fallback(|| async {
            ApiError::new(Code::MethodNotAllowed, "method not allowed on this route")
        })
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::authorize,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::api_guard,
        ))
        .layer(axum::middleware::from_fn_with_state(state.clone(), detach))
        .layer(axum::middleware::from_fn(refuse_nul))
        .layer(axum::middleware::from_fn(json_errors))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            panic_response,
        ));
    // Outermost, so a preflight is answered before auth asks it for a token.
    match cors {
        Some(c) => app.layer(c).with_state(state),
        None => app.with_state(state),
    }
}

/// CORS for the configured origins only; none configured: no CORS headers at all, so a
/// browser lets no other site read an answer.
fn cors_layer(origins: &[String]) -> Option<tower_http::cors::CorsLayer> {
    use axum::http::{header, HeaderName, HeaderValue, Method};
    use tower_http::cors::{AllowOrigin, CorsLayer};
    let list: Vec<HeaderValue> = origins
        .iter()
        .filter_map(|o| HeaderValue::from_str(o).ok())
        .collect();
    (!list.is_empty()).then(|| {
        CorsLayer::new()
            .allow_origin(AllowOrigin::list(list))
            .allow_methods([Method::GET, Method::POST, Method::PUT, Method::DELETE])
            .allow_headers([
                header::AUTHORIZATION,
                header::CONTENT_TYPE,
                HeaderName::from_static("x-docket-actor"),
                HeaderName::from_static("last-event-id"),
            ])
            .expose_headers([header::RETRY_AFTER])
            .max_age(Duration::from_secs(3600))
    })
}

/// Fires when the client of a request went away (or the server shuts down): long polls stop
/// waiting. The handler itself runs to completion either way (see [`detach`]).
#[derive(Clone)]
pub(crate) struct Disconnect(pub CancellationToken);

/// Runs every handler in its own task, so a client that disconnects mid-request cannot cancel
/// it halfway through a database transaction. (sqlx 0.8 leaves a pooled PostgreSQL connection
/// inside an open transaction when the future is dropped during `BEGIN`, transact-rs/sqlx#4393:
/// the next borrower's statements would run in a stale transaction.) The handler learns of the
/// disconnect through [`Disconnect`] and stops waiting, never mid-statement.
async fn detach(
    State(s): State<AppState>,
    mut req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let gone = s.shutdown.child_token();
    req.extensions_mut().insert(Disconnect(gone.clone()));
    let _on_drop = gone.drop_guard();
    match tokio::spawn(next.run(req)).await {
        Ok(r) => r,
        Err(e) if e.is_panic() => panic_response(e.into_panic()),
        Err(_) => ApiError::new(Code::Unavailable, "the server is shutting down").into_response(),
    }
}

/// A handler that panicked answers 500 `internal` (and the panic is logged) instead of
/// dropping the connection without an answer.
fn panic_response(p: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let msg = docket_engine::worker::panic_message(&*p);
    tracing::error!(panic = %msg, "request handler panicked");
    ApiError::new(Code::Internal, "internal error; the server logged it").into_response()
}

/// Times every request into `docket_http_request_duration_seconds` by the matched route
/// pattern (not the raw path, so ids do not explode the label set).
async fn http_metrics(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let route = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map_or("unmatched", |m| m.as_str())
        .to_string();
    let method = req.method().to_string();
    let t0 = std::time::Instant::now();
    let resp = next.run(req).await;
    // An SSE stream's "duration" is its first byte; the stream itself goes on.
    metrics::histogram!(
        docket_engine::metrics::HTTP_REQUEST,
        "route" => route,
        "method" => method,
        "status" => resp.status().as_u16().to_string()
    )
    .record(t0.elapsed().as_secs_f64());
    resp
}

/// Connection limits of [`serve_with`]: what keeps slow or silent clients from holding the
/// server's sockets.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    /// A connection that has not sent a whole request head this long after it opened, or after
    /// its previous response (an idle keep-alive), is closed [10 s].
    pub header_read_timeout: Duration,
    /// Most connections open at once; past it new ones are closed at accept [1024].
    pub max_connections: usize,
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            header_read_timeout: Duration::from_secs(10),
            max_connections: 1024,
        }
    }
}

/// [`serve_with`] with the default [`ConnLimits`].
///
/// # Errors
/// I/O errors of the listener.
pub async fn serve(listener: tokio::net::TcpListener, state: AppState) -> std::io::Result<()> {
    serve_with(listener, state, ConnLimits::default()).await
}

/// Serves the API on `listener` until `shutdown` fires, then finishes in-flight requests.
/// HTTP/1.1 with a header-read timeout and a cap on open connections (axum's own `serve` has
/// neither).
///
/// # Errors
/// I/O errors of the listener.
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    state: AppState,
    limits: ConnLimits,
) -> std::io::Result<()> {
    serve_inner(listener, state, limits, None).await
}

/// [`serve_with`] over TLS: every connection is a TLS handshake (bounded by the header-read
/// timeout) with the certificate [`tls::Tls`] holds when it arrives, so a reload reaches new
/// connections. The dashboard's session cookie is then `Secure`.
///
/// # Errors
/// I/O errors of the listener.
pub async fn serve_tls(
    listener: tokio::net::TcpListener,
    mut state: AppState,
    limits: ConnLimits,
    tls: Arc<tls::Tls>,
) -> std::io::Result<()> {
    state.tls = true;
    serve_inner(listener, state, limits, Some(tls)).await
}

async fn serve_inner(
    listener: tokio::net::TcpListener,
    state: AppState,
    limits: ConnLimits,
    tls: Option<Arc<tls::Tls>>,
) -> std::io::Result<()> {
    use hyper_util::rt::{TokioIo, TokioTimer};
    let shutdown = state.shutdown.clone();
    let app = router(state);
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    // HTTP/1.1 only: hyper-util's auto (h1/h2) connection first waits, untimed, for bytes to
    // tell the versions apart, so a silent client would hold its socket forever.
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    loop {
        let (tcp, _) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // Out of file descriptors and the like: wait, do not spin or die.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = shutdown.cancelled() => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            metrics::counter!(docket_engine::metrics::HTTP_CONNECTIONS_REFUSED).increment(1);
            drop(tcp);
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let svc = hyper_util::service::TowerToHyperService::new(app.clone());
        match &tls {
            None => {
                let conn = graceful.watch(builder.serve_connection(TokioIo::new(tcp), svc));
                tokio::spawn(async move {
                    let _ = conn.await;
                    drop(slot);
                });
            }
            Some(t) => {
                let (acceptor, watcher, builder) =
                    (t.acceptor(), graceful.watcher(), builder.clone());
                let handshake = limits.header_read_timeout;
                tokio::spawn(async move {
                    // Bounded like a request head: a client that never finishes the handshake
                    // cannot hold its slot.
                    if let Ok(Ok(stream)) =
                        tokio::time::timeout(handshake, acceptor.accept(tcp)).await
                    {
                        let conn = builder.serve_connection(TokioIo::new(stream), svc);
                        let _ = watcher.watch(conn).await;
                    }
                    drop(slot);
                });
            }
        }
    }
    graceful.shutdown().await;
    Ok(())
}

/// Parses a JSON body with our error shape: 400 `invalid_json` for malformed JSON, 400
/// `invalid_request`/`invalid_duration` for well-formed JSON of the wrong shape (unknown fields
/// included), 413 `payload_too_large` past [`MAX_BODY_BYTES`].
fn parse<T: DeserializeOwned>(body: Result<Bytes, BytesRejection>) -> ApiResult<T> {
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
fn nul_error() -> ApiError {
    ApiError::new(
        Code::InvalidText,
        "text must not contain NUL characters (\\u0000 in JSON, %00 in URLs)",
    )
}

/// Whether JSON text holds the escape `\u0000` (the only way a NUL can be in valid JSON),
/// not counting an escaped backslash followed by `u0000`.
fn json_has_nul(b: &[u8]) -> bool {
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
async fn json_errors(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
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
async fn refuse_nul(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
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
fn check_lease(field: &str, d: Option<Duration>) -> ApiResult<()> {
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

fn check_size(what: &str, v: &Value) -> ApiResult<()> {
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

fn task_id(s: &str) -> ApiResult<i64> {
    s.parse::<i64>()
        .ok()
        .filter(|i| *i > 0)
        .ok_or_else(|| ApiError::invalid(format!("task id must be a positive integer, got {s:?}")))
}

pub(crate) fn check_name(what: &str, s: &str) -> ApiResult<()> {
    docket_core::task::check_name(what, s).map_err(ApiError::invalid)
}

fn query<T>(q: Result<Query<T>, QueryRejection>) -> ApiResult<T> {
    q.map(|Query(q)| q)
        .map_err(|e| ApiError::invalid(e.body_text()))
}

/// `{"status": "ok"}` when the database answers and this node's maintenance loop finished a
/// pass recently; 503 `maintenance_stalled` when it has not for `maintenance_stall_after`.
#[utoipa::path(
    get, path = "/healthz",
    tag = "service",
    responses((status = 200, description = "ok", body = crate::openapi::Health)),
    summary = "Liveness: the database answers and maintenance finished a pass in the last 120 s (else 503 maintenance_stalled)"
)]
async fn healthz(State(s): State<AppState>) -> Response {
    if let Err(e) = s.engine.ping().await {
        return ApiError::from(e).into_response();
    }
    let last = s.engine.last_maintenance_pass().map(|d| d.as_secs_f64());
    if s.engine.maintenance_stalled() {
        let mut e = ApiError::new(Code::MaintenanceStalled, "the maintenance loop (promote, rescue, schedules, prune) has not finished a pass recently",
        );
        e.details = Some(json!({"last_pass_seconds_ago": last}));
        return e.into_response();
    }
    Json(openapi::Health {
        status: "ok".into(),
        node: s.engine.config.node.clone(),
        maintenance_last_pass_seconds_ago: last,
    })
    .into_response()
}

/// Prometheus text format.
#[utoipa::path(
    get, path = "/metrics",
    tag = "service",
    responses((status = 200, description = "metrics", content_type = "text/plain", body = String)),
    summary = "Prometheus text format (progressor's eight histograms, in ms)"
)]
async fn metrics_text(State(s): State<AppState>) -> Response {
    // Queue gauges are read from the database at scrape time: every node reports the same
    // cluster-wide numbers (aggregate them with max, not sum).
    if let (Ok(queues), Ok(oldest)) = (
        s.engine.queue_list().await,
        s.engine.queue_oldest_available().await,
    ) {
        let now = s.engine.clock.now();
        let ages: Vec<(String, f64)> = oldest
            .into_iter()
            .map(|o| {
                let age = (now - o.run_at).num_milliseconds().max(0) as f64 / 1000.0;
                (o.queue, age)
            })
            .collect();
        docket_engine::metrics::record_queues(&queues, &ages);
    }
    let pool = s.engine.pool_connections();
    metrics::gauge!(docket_engine::metrics::DB_CONNECTIONS, "state" => "in_use")
        .set(pool.in_use as f64);
    metrics::gauge!(docket_engine::metrics::DB_CONNECTIONS, "state" => "idle")
        .set(pool.idle as f64);
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        docket_engine::metrics::prometheus().render(),
    )
        .into_response()
}

#[utoipa::path(
    get, path = "/openapi.json",
    tag = "service",
    responses((status = 200, description = "OpenAPI document", body = Object)),
    summary = "This document (generated from the server code with utoipa)"
)]
async fn openapi() -> Response {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        openapi::document(),
    )
        .into_response()
}

/// The trace id of a request: W3C `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`), else
/// `X-Trace-Id`.
fn request_trace_id(headers: &axum::http::HeaderMap) -> Option<String> {
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

#[utoipa::path(
    post, path = "/v1/tasks",
    tag = "tasks",
    request_body = crate::openapi::TaskOrBatch,
    responses((status = 201, description = "the task, or {tasks: [...]} for a batch", body = crate::openapi::TaskOrBatchAnswer), (status = 413, description = "payload_too_large", body = crate::error::ErrorBody), (status = 422, description = "invalid_task", body = crate::error::ErrorBody)),
    summary = "Enqueue one task, or many in one transaction"
)]
async fn task_add(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    caller: Option<axum::Extension<docket_engine::auth::Caller>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let trace = request_trace_id(&headers);
    let raw: Value = parse(body)?;
    let (specs, many) = match raw {
        Value::Object(mut m) if m.contains_key("tasks") && m.len() == 1 => {
            match m.remove("tasks") {
                Some(Value::Array(tasks)) => (tasks, true),
                _ => return Err(ApiError::invalid("tasks must be an array of task objects")),
            }
        }
        raw @ Value::Object(_) => (vec![raw], false),
        _ => {
            return Err(ApiError::invalid(
                "body must be a task object or {\"tasks\": [...]}",
            ))
        }
    };
    if specs.is_empty() {
        return Err(ApiError::invalid("tasks must not be empty"));
    }
    if specs.len() > MAX_BATCH {
        return Err(ApiError::invalid(format!(
            "at most {MAX_BATCH} tasks per request"
        )));
    }
    let mut tasks = Vec::with_capacity(specs.len());
    for (i, v) in specs.into_iter().enumerate() {
        let mut t: NewTask = serde_json::from_value(v).map_err(|e| {
            let mut err = ApiError::invalid(format!("task {i}: {e}"));
            err.details = Some(json!({"index": i}));
            err
        })?;
        auth::check_sql_scope(caller.as_ref().map(|c| &c.0), &[&t])?;
        check_size("payload", &t.payload)?;
        if t.trace_id.is_none() {
            t.trace_id = trace.clone();
        }
        check_sql_task(&s.sql, &mut t).map_err(|mut e| {
            e.message = format!("task {i}: {}", e.message);
            e.details = Some(json!({"index": i}));
            e
        })?;
        tasks.push(t);
    }
    let out = s.engine.enqueue_many(tasks).await?;
    Ok(if many {
        (
            StatusCode::CREATED,
            Json(docket_core::api::TaskBatch { tasks: out }),
        )
            .into_response()
    } else {
        (StatusCode::CREATED, Json(&out[0])).into_response()
    })
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    /// Only this queue.
    queue: Option<String>,
    /// Only tasks with this concurrency key.
    concurrency_key: Option<String>,
    /// One state, or several comma-separated (`running,retryable`); a filter naming no known
    /// state matches nothing.
    state: Option<String>,
    /// Only this kind.
    kind: Option<String>,
    /// Page size [100].
    #[param(minimum = 1, maximum = 10000)]
    limit: Option<i64>,
    /// Keyset cursor: tasks after this id (in `order`).
    after: Option<i64>,
    /// `asc` (default) or `desc` by id.
    #[param(pattern = "^(asc|desc)$")]
    order: Option<String>,
    /// Only tasks whose payload or errors contain this text (case-insensitive).
    text: Option<String>,
}

#[utoipa::path(
    get, path = "/v1/tasks",
    tag = "tasks",
    params(crate::ListQuery),
    responses((status = 200, description = "a page", body = docket_core::api::TaskPage)),
    summary = "List tasks (keyset paging by id)"
)]
async fn task_list(
    State(s): State<AppState>,
    caller: Option<axum::Extension<docket_engine::auth::Caller>>,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> ApiResult<Json<TaskPage>> {
    let q = query(q)?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=MAX_BATCH as i64).contains(&limit) {
        return Err(ApiError::invalid(format!(
            "limit must be within 1..={MAX_BATCH}, got {limit}"
        )));
    }
    // `state=running,retryable`: several states; a filter with no known state matches nothing
    // (answered below, once every other parameter has been checked).
    let states = q.state.as_deref().map(docket_core::state::parse_filter);
    let descending = match q.order.as_deref() {
        None | Some("asc") => false,
        Some("desc") => true,
        Some(o) => {
            return Err(ApiError::invalid(format!(
                "order must be asc or desc, got {o:?}"
            )))
        }
    };
    let states = match states {
        None => vec![],
        Some(Some(v)) => v,
        Some(None) => {
            return Ok(Json(TaskPage {
                tasks: vec![],
                next_after: None,
            }))
        }
    };
    let tasks = s
        .engine
        .task_list(TaskListParams {
            queue: q.queue,
            concurrency_key: q.concurrency_key,
            states,
            kind: q.kind,
            after: q.after,
            descending,
            limit,
            text: q.text.filter(|t| !t.is_empty()),
        })
        .await?;
    let next = if tasks.len() as i64 == limit {
        tasks.last().map(|t| t.id)
    } else {
        None
    };
    let mut tasks = tasks;
    if auth::masks_for(caller.as_ref().map(|c| &c.0)) {
        auth::mask_tasks(&s, tasks.iter_mut()).await?;
    }
    Ok(Json(TaskPage {
        tasks,
        next_after: next,
    }))
}

#[utoipa::path(
    get, path = "/v1/tasks/{id}",
    tag = "tasks",
    params(("id" = i64, Path, minimum = 1, description = "task id")),
    responses((status = 200, description = "the task", body = docket_core::Task), (status = 404, description = "not_found", body = crate::error::ErrorBody)),
    summary = "One task"
)]
async fn task_get(
    State(s): State<AppState>,
    caller: Option<axum::Extension<docket_engine::auth::Caller>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Task>> {
    let id = task_id(&id)?;
    match s.engine.task_get(id).await? {
        Some(mut t) => {
            if auth::masks_for(caller.as_ref().map(|c| &c.0)) {
                auth::mask_tasks(&s, [&mut t]).await?;
            }
            Ok(Json(t))
        }
        None => Err(ApiError::not_found(format!("task {id} not found"))),
    }
}

async fn task_by_hand(
    s: AppState,
    headers: &axum::http::HeaderMap,
    id: &str,
    action: actions::TaskAction,
) -> ApiResult<Json<Task>> {
    let id = task_id(id)?;
    let who = actions::actor(headers, "api");
    Ok(Json(actions::task(&s, &who, id, action).await?))
}

#[utoipa::path(
    post, path = "/v1/tasks/{id}/cancel",
    tag = "tasks",
    params(("id" = i64, Path, minimum = 1, description = "task id")),
    responses((status = 200, description = "the task", body = docket_core::Task), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "invalid_state", body = crate::error::ErrorBody), (status = 422, description = "invalid_task", body = crate::error::ErrorBody)),
    summary = "Cancel a task that is not finished (a running one stops at its next heartbeat/complete)"
)]
async fn task_cancel(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    Path(id): Path<String>,
) -> ApiResult<Json<Task>> {
    task_by_hand(s, &headers, &id, actions::TaskAction::Cancel).await
}

#[utoipa::path(
    post, path = "/v1/tasks/{id}/retry",
    tag = "tasks",
    params(("id" = i64, Path, minimum = 1, description = "task id")),
    responses((status = 200, description = "the task", body = docket_core::Task), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "invalid_state", body = crate::error::ErrorBody), (status = 422, description = "invalid_task", body = crate::error::ErrorBody)),
    summary = "Make a discarded or cancelled task available again"
)]
async fn task_retry(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    Path(id): Path<String>,
) -> ApiResult<Json<Task>> {
    task_by_hand(s, &headers, &id, actions::TaskAction::Retry).await
}

#[utoipa::path(
    post, path = "/v1/tasks/{id}/run-now",
    tag = "tasks",
    params(("id" = i64, Path, minimum = 1, description = "task id")),
    responses((status = 200, description = "the task", body = docket_core::Task), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "invalid_state", body = crate::error::ErrorBody)),
    summary = "Make a scheduled or retryable task available now (recorded in the audit log)"
)]
async fn task_run_now(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    Path(id): Path<String>,
) -> ApiResult<Json<Task>> {
    task_by_hand(s, &headers, &id, actions::TaskAction::RunNow).await
}

/// One look at the whole cluster (`docket status`, the dashboard's overview as JSON).
#[utoipa::path(
    get, path = "/v1/status",
    tag = "status",
    responses((status = 200, description = "status", body = crate::openapi::StatusView)),
    summary = "The cluster at a glance: queues with counts and oldest available task, nodes, schedules, last hour's throughput"
)]
async fn status(State(s): State<AppState>) -> ApiResult<Json<openapi::StatusView>> {
    let now = s.engine.clock.now();
    let engine = &s.engine;
    let oldest = engine.queue_oldest_available().await?;
    let queues = engine
        .queue_list()
        .await?
        .into_iter()
        .map(|queue| openapi::QueueStatus {
            oldest_available_at: oldest
                .iter()
                .find(|o| o.queue == queue.name)
                .map(|o| o.run_at),
            queue,
        })
        .collect();
    let schedules = engine.schedule_list().await?;
    let throughput = engine
        .task_throughput(docket_core::time::sub(now, Duration::from_secs(3600)))
        .await?;
    let (completed, failed) = throughput
        .iter()
        .fold((0, 0), |(c, f), t| (c + t.completed, f + t.failed));
    Ok(Json(openapi::StatusView {
        now,
        queues,
        nodes: nodes_with_state(&s).await?,
        schedules: openapi::ScheduleCounts {
            total: schedules.len(),
            paused: schedules.iter().filter(|s| s.paused).count(),
        },
        last_hour: openapi::LastHour {
            completed,
            failed,
            per_minute: throughput,
        },
    }))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct AuditQuery {
    /// Most entries [100].
    #[param(minimum = 1, maximum = 10000)]
    limit: Option<i64>,
}

#[utoipa::path(
    get, path = "/v1/audit",
    tag = "status",
    params(crate::AuditQuery),
    responses((status = 200, description = "entries", body = crate::openapi::AuditPage)),
    summary = "Operator actions (cancel, retry, run now, pause/resume, repair, schedule changes), newest first"
)]
async fn audit_list(
    State(s): State<AppState>,
    q: Result<Query<AuditQuery>, QueryRejection>,
) -> ApiResult<Json<openapi::AuditPage>> {
    let limit = query(q)?.limit.unwrap_or(100);
    if !(1..=MAX_BATCH as i64).contains(&limit) {
        return Err(ApiError::invalid(format!(
            "limit must be within 1..={MAX_BATCH}, got {limit}"
        )));
    }
    Ok(Json(openapi::AuditPage {
        entries: s.engine.audit_list(limit).await?,
    }))
}

#[utoipa::path(
    post, path = "/v1/tasks/{id}/heartbeat",
    tag = "tasks",
    params(("id" = i64, Path, minimum = 1, description = "task id")),
    request_body = docket_core::api::HeartbeatRequest,
    responses((status = 200, description = "the task", body = docket_core::Task), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "lease_lost, cancelled, timed_out", body = crate::error::ErrorBody), (status = 413, description = "payload_too_large", body = crate::error::ErrorBody)),
    summary = "Extend the lease (never past attempted_at + timeout) and report progress; 409 lease_lost, cancelled or timed_out"
)]
async fn task_heartbeat(
    State(s): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Task>> {
    let id = task_id(&id)?;
    let b: HeartbeatRequest = parse(body)?;
    if let Some(p) = &b.progress {
        check_size("progress", p)?;
    }
    check_lease("extend", b.extend)?;
    Ok(Json(
        s.engine
            .heartbeat(TaskHeartbeatParams {
                id,
                token: b.lease,
                progress: b.progress,
                lease: b.extend,
                now: s.engine.clock.now(),
            })
            .await?,
    ))
}

/// A single-item outcome as a response: 200 with the new state, or the lease/cancel error.
fn single(id: i64, o: LeaseOutcome) -> ApiResult<Json<Finished>> {
    match o {
        LeaseOutcome::Ok { state, run_at, .. } => Ok(Json(Finished { id, state, run_at })),
        LeaseOutcome::LeaseLost => Err(docket_store::StoreError::LeaseLost.into()),
        LeaseOutcome::Cancelled => Err(docket_store::StoreError::Cancelled.into()),
        LeaseOutcome::TimedOut => Err(docket_store::StoreError::TimedOut.into()),
        LeaseOutcome::NotFound => Err(ApiError::not_found(format!("task {id} not found"))),
    }
}

/// One item of a batch answer.
fn item_outcome(id: i64, o: LeaseOutcome) -> ItemOutcome {
    let (outcome, state, run_at) = match o {
        LeaseOutcome::Ok { state, run_at, .. } => ("ok", Some(state), Some(run_at)),
        LeaseOutcome::LeaseLost => ("lease_lost", None, None),
        LeaseOutcome::Cancelled => ("cancelled", None, None),
        LeaseOutcome::TimedOut => ("timed_out", None, None),
        LeaseOutcome::NotFound => ("not_found", None, None),
    };
    ItemOutcome {
        id,
        outcome: outcome.to_string(),
        state,
        run_at,
    }
}

#[utoipa::path(
    post, path = "/v1/tasks/{id}/complete",
    tag = "tasks",
    params(("id" = i64, Path, minimum = 1, description = "task id")),
    request_body = docket_core::api::CompleteRequest,
    responses((status = 200, description = "new state", body = docket_core::api::Finished), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "lease_lost, cancelled, timed_out", body = crate::error::ErrorBody), (status = 413, description = "payload_too_large", body = crate::error::ErrorBody)),
    summary = "Complete the attempt; 409 lease_lost, cancelled or timed_out"
)]
async fn task_complete(
    State(s): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Finished>> {
    let id = task_id(&id)?;
    let b: CompleteRequest = parse(body)?;
    check_size("result", &b.result)?;
    let o = s
        .engine
        .complete_many(&[TaskComplete {
            id,
            token: b.lease,
            result: b.result,
        }])
        .await?;
    single(id, o[0].clone())
}

#[utoipa::path(
    post, path = "/v1/tasks/{id}/fail",
    tag = "tasks",
    params(("id" = i64, Path, minimum = 1, description = "task id")),
    request_body = docket_core::api::FailRequest,
    responses((status = 200, description = "new state", body = docket_core::api::Finished), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "lease_lost, cancelled, timed_out", body = crate::error::ErrorBody)),
    summary = "Fail the attempt: retried after backoff or retry_in, or discarded"
)]
async fn task_fail(
    State(s): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Finished>> {
    let id = task_id(&id)?;
    let b: FailRequest = parse(body)?;
    if let Some(w) = &b.worker {
        check_name("worker", w)?;
    }
    let item = TaskFail {
        id,
        token: b.lease,
        error: b.error,
        retry_in: b.retry_in,
        permanent: b.permanent,
    };
    let o = s.engine.fail_many(&[item], b.worker.as_deref()).await?;
    single(id, o[0].clone())
}

fn batch_ids<T>(items: &[T], id: impl Fn(&T) -> Option<i64>) -> ApiResult<Vec<i64>> {
    if items.is_empty() || items.len() > MAX_BATCH {
        return Err(ApiError::invalid(format!(
            "items must hold 1..={MAX_BATCH} entries"
        )));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, it)| {
            id(it)
                .filter(|x| *x > 0)
                .ok_or_else(|| ApiError::invalid(format!("items[{i}].id is required")))
        })
        .collect()
}

#[utoipa::path(
    post, path = "/v1/tasks/complete",
    tag = "tasks",
    request_body = docket_core::api::BatchRequest<docket_core::api::CompleteRequest>,
    responses((status = 200, description = "one result per item, in order", body = docket_core::api::BatchResponse), (status = 413, description = "payload_too_large", body = crate::error::ErrorBody)),
    summary = "Complete many tasks in one statement"
)]
async fn task_complete_batch(
    State(s): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<BatchResponse>> {
    let b: BatchRequest<CompleteRequest> = parse(body)?;
    let ids = batch_ids(&b.items, |i| i.id)?;
    let mut items = Vec::with_capacity(ids.len());
    for (it, id) in b.items.into_iter().zip(ids) {
        check_size("result", &it.result)?;
        items.push(TaskComplete {
            id,
            token: it.lease,
            result: it.result,
        });
    }
    let outs = s.engine.complete_many(&items).await?;
    let results = items
        .iter()
        .zip(outs)
        .map(|(i, o)| item_outcome(i.id, o))
        .collect();
    Ok(Json(BatchResponse { results }))
}

#[utoipa::path(
    post, path = "/v1/tasks/fail",
    tag = "tasks",
    request_body = docket_core::api::BatchRequest<docket_core::api::FailRequest>,
    responses((status = 200, description = "one result per item, in order", body = docket_core::api::BatchResponse), (status = 413, description = "payload_too_large", body = crate::error::ErrorBody)),
    summary = "Fail many attempts in one transaction"
)]
async fn task_fail_batch(
    State(s): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<BatchResponse>> {
    let b: BatchRequest<FailRequest> = parse(body)?;
    for (i, it) in b.items.iter().enumerate() {
        if let Some(w) = &it.worker {
            check_name(&format!("items[{i}].worker"), w)?;
        }
    }
    let ids = batch_ids(&b.items, |i| i.id)?;
    let worker = b.items.first().and_then(|i| i.worker.clone());
    let items: Vec<TaskFail> = b
        .items
        .into_iter()
        .zip(ids)
        .map(|(it, id)| TaskFail {
            id,
            token: it.lease,
            error: it.error,
            retry_in: it.retry_in,
            permanent: it.permanent,
        })
        .collect();
    let outs = s.engine.fail_many(&items, worker.as_deref()).await?;
    let results = items
        .iter()
        .zip(outs)
        .map(|(i, o)| item_outcome(i.id, o))
        .collect();
    Ok(Json(BatchResponse { results }))
}

#[utoipa::path(
    post, path = "/v1/queues/{queue}/claim",
    tag = "queues",
    params(("queue" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "queue name")),
    request_body = docket_core::api::ClaimRequest,
    responses((status = 200, description = "claimed tasks, each with its lease", body = docket_core::api::ClaimResponse)),
    summary = "Claim tasks under a lease; `wait` long-polls"
)]
async fn queue_claim(
    State(s): State<AppState>,
    Path(queue): Path<String>,
    gone: Option<axum::Extension<Disconnect>>,
    caller: Option<axum::Extension<docket_engine::auth::Caller>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<ClaimResponse>> {
    let cancel = gone.map_or_else(|| s.shutdown.clone(), |g| g.0 .0.clone());
    check_name("queue", &queue)?;
    auth::check_queue(caller.as_ref().map(|c| &c.0), &queue)?;
    let b: ClaimRequest = parse(body)?;
    check_name("worker", &b.worker)?;
    let limit = b.limit.unwrap_or(1);
    if !(1..=MAX_BATCH as i64).contains(&limit) {
        return Err(ApiError::invalid(format!(
            "limit must be within 1..={MAX_BATCH}, got {limit}"
        )));
    }
    check_lease("lease", b.lease)?;
    if let Some(k) = &b.kinds {
        if k.is_empty() || k.len() > 100 {
            return Err(ApiError::invalid("kinds must hold 1..=100 kind names"));
        }
        for (i, kind) in k.iter().enumerate() {
            check_name(&format!("kinds[{i}]"), kind)?;
        }
    }
    let wait = b.wait.unwrap_or(Duration::ZERO);
    if wait > MAX_WAIT {
        return Err(ApiError::invalid(format!(
            "wait must be at most {}",
            docket_core::duration::format(MAX_WAIT)
        )));
    }
    // Held until the claim answers; a claim that does not wait takes no slot.
    let _slot = if wait.is_zero() {
        None
    } else {
        auth::long_poll(&s, caller.as_ref().map(|c| &c.0))?
    };
    let tasks = s
        .engine
        .claim_kinds(
            &queue,
            &b.worker,
            b.kinds.as_deref(),
            limit,
            b.lease,
            wait,
            &cancel,
        )
        .await?;
    Ok(Json(ClaimResponse { tasks }))
}

#[utoipa::path(
    get, path = "/v1/queues",
    tag = "queues",
    responses((status = 200, description = "queues", body = docket_core::api::QueueList)),
    summary = "Every queue with counts by state"
)]
async fn queue_list(State(s): State<AppState>) -> ApiResult<Json<QueueList>> {
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
async fn queue_get(
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
async fn queue_put(
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
    settings.validate().map_err(ApiError::invalid)?;
    let who = actions::actor(&headers, "api");
    Ok(Json(s.engine.queue_put(&who, &queue, &settings).await?))
}

async fn set_paused(
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
async fn queue_pause(
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
async fn queue_resume(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    Path(queue): Path<String>,
) -> ApiResult<Json<QueueStats>> {
    set_paused(s, &headers, queue, false).await
}

#[utoipa::path(
    get, path = "/v1/nodes",
    tag = "status",
    responses((status = 200, description = "nodes", body = docket_core::api::NodeList)),
    summary = "Nodes of the cluster with state active/lost/stopped"
)]
async fn node_list(State(s): State<AppState>) -> ApiResult<Json<NodeList>> {
    Ok(Json(NodeList {
        nodes: nodes_with_state(&s).await?,
    }))
}

/// A node's state: `stopped` (it said so), `lost` (silent for 3 heartbeats) or `active`.
pub(crate) fn node_state(s: &AppState, n: &docket_store::NodeRecord) -> &'static str {
    let lost_after = s.engine.config.heartbeat_interval.saturating_mul(3);
    if n.stopped_at.is_some() {
        "stopped"
    } else if docket_core::time::since(s.engine.clock.now(), n.heartbeat_at) > lost_after {
        "lost"
    } else {
        "active"
    }
}

/// Nodes with their `state` (see [`node_state`]).
async fn nodes_with_state(s: &AppState) -> ApiResult<Vec<NodeView>> {
    Ok(s.engine
        .node_list()
        .await?
        .into_iter()
        .map(|n| NodeView {
            state: node_state(s, &n).to_string(),
            name: n.name,
            started_at: n.started_at,
            heartbeat_at: n.heartbeat_at,
            stopped_at: n.stopped_at,
            version: n.version,
            info: n.info,
        })
        .collect())
}

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
async fn namespace_list(State(s): State<AppState>) -> ApiResult<Json<NamespaceList>> {
    let namespaces = s
        .processes
        .namespaces()
        .into_iter()
        .map(|(name, config)| NamespaceView { name, config })
        .collect();
    Ok(Json(NamespaceList { namespaces }))
}

#[utoipa::path(
    post, path = "/v1/schedules",
    tag = "schedules",
    request_body = docket_core::ScheduleSpec,
    responses((status = 200, description = "replaced", body = docket_core::Schedule), (status = 201, description = "created", body = docket_core::Schedule)),
    summary = "Create or replace a schedule (repeat interval or cron) of a task template"
)]
async fn schedule_put(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    caller: Option<axum::Extension<docket_engine::auth::Caller>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let mut spec: docket_core::ScheduleSpec = parse(body)?;
    auth::check_sql_scope(caller.as_ref().map(|c| &c.0), &[&spec.task])?;
    check_size("payload", &spec.task.payload)?;
    check_sql_task(&s.sql, &mut spec.task)?;
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
async fn schedule_list(State(s): State<AppState>) -> ApiResult<Json<ScheduleList>> {
    Ok(Json(ScheduleList {
        schedules: s.engine.schedule_list().await?,
    }))
}

fn schedule_missing(name: &str) -> ApiError {
    ApiError::not_found(format!("no schedule named {name:?}"))
}

#[utoipa::path(
    get, path = "/v1/schedules/{name}",
    tag = "schedules",
    params(("name" = String, Path, min_length = 1, max_length = 200, pattern = "^[A-Za-z0-9_.:-]+$", description = "schedule name")),
    responses((status = 200, description = "the schedule", body = docket_core::Schedule), (status = 404, description = "not_found", body = crate::error::ErrorBody)),
    summary = "One schedule"
)]
async fn schedule_get(
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
async fn schedule_delete(
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

async fn schedule_set_paused(
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
async fn schedule_pause(
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
async fn schedule_resume(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    Path(name): Path<String>,
) -> ApiResult<Json<docket_core::Schedule>> {
    schedule_set_paused(s, &headers, name, false).await
}

#[utoipa::path(
    get, path = "/v1/namespaces/{ns}",
    tag = "processes",
    params(("ns" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "namespace")),
    responses((status = 200, description = "the namespace", body = docket_core::api::NamespaceView), (status = 404, description = "not_found", body = crate::error::ErrorBody)),
    summary = "One namespace"
)]
async fn namespace_get(
    State(s): State<AppState>,
    Path(ns): Path<String>,
) -> ApiResult<Json<NamespaceView>> {
    check_name("namespace", &ns)?;
    s.processes
        .namespaces()
        .into_iter()
        .find(|(n, _)| *n == ns)
        .map(|(name, config)| Json(NamespaceView { name, config }))
        .ok_or_else(|| ProcessError::NamespaceNotFound(ns).into())
}

#[utoipa::path(
    put, path = "/v1/namespaces/{ns}",
    tag = "processes",
    params(("ns" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "namespace")),
    request_body = docket_core::process::NamespaceConfig,
    responses((status = 200, description = "the namespace", body = docket_core::api::NamespaceView)),
    summary = "Create or replace a namespace (omitted fields take progressor's defaults)"
)]
async fn namespace_put(
    State(s): State<AppState>,
    Path(ns): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<NamespaceView>> {
    check_name("namespace", &ns)?;
    let config: NamespaceConfig = parse(body)?;
    s.processes.namespace_put(&ns, config.clone()).await?;
    Ok(Json(NamespaceView { name: ns, config }))
}

#[utoipa::path(
    post, path = "/v1/namespaces/{ns}/processes",
    tag = "processes",
    params(("ns" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "namespace")),
    request_body = docket_core::api::ProcessInitRequest,
    responses((status = 200, description = "the processor's response", body = docket_core::api::ProcessResponse), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "process_exists, cancelled", body = crate::error::ErrorBody), (status = 413, description = "payload_too_large", body = crate::error::ErrorBody), (status = 422, description = "processor_error", body = crate::error::ErrorBody), (status = 504, description = "timeout: no answer within process_step_timeout", body = crate::error::ErrorBody)),
    summary = "init: create a process and run its init task (synchronous)"
)]
async fn process_init(
    State(s): State<AppState>,
    Path(ns): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<ProcessResponse>> {
    check_name("namespace", &ns)?;
    let b: ProcessInitRequest = parse(body)?;
    check_size("args", &b.args)?;
    let req = ProcessRequest {
        args: b.args,
        context: b.context,
        idempotency_key: b.idempotency_key,
        range: HistoryRange::default(),
    };
    Ok(Json(ProcessResponse {
        response: s.processes.init(&ns, &b.id, req).await?,
    }))
}

async fn call_like(
    s: AppState,
    ns: String,
    id: String,
    body: Result<Bytes, BytesRejection>,
    repair: bool,
) -> ApiResult<Json<ProcessResponse>> {
    let b: ProcessCallRequest = parse(body)?;
    check_size("args", &b.args)?;
    let req = ProcessRequest {
        args: b.args,
        context: b.context,
        idempotency_key: b.idempotency_key,
        range: b.range,
    };
    let r = if repair {
        s.processes.repair(&ns, &id, req).await?
    } else {
        s.processes.call(&ns, &id, req).await?
    };
    Ok(Json(ProcessResponse { response: r }))
}

#[utoipa::path(
    post, path = "/v1/namespaces/{ns}/processes/{id}/call",
    tag = "processes",
    params(("ns" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "namespace"), ("id" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "process id")),
    request_body = docket_core::api::ProcessCallRequest,
    responses((status = 200, description = "the processor's response", body = docket_core::api::ProcessResponse), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "process_not_running, cancelled", body = crate::error::ErrorBody), (status = 413, description = "payload_too_large", body = crate::error::ErrorBody), (status = 422, description = "processor_error", body = crate::error::ErrorBody), (status = 504, description = "timeout: no answer within process_step_timeout", body = crate::error::ErrorBody)),
    summary = "call (synchronous; queued FIFO behind the process's running task)"
)]
async fn process_call(
    State(s): State<AppState>,
    Path((ns, id)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<ProcessResponse>> {
    check_name("namespace", &ns)?;
    check_name("process id", &id)?;
    call_like(s, ns, id, body, false).await
}

#[utoipa::path(
    post, path = "/v1/namespaces/{ns}/processes/{id}/repair",
    tag = "processes",
    params(("ns" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "namespace"), ("id" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "process id")),
    request_body = docket_core::api::ProcessCallRequest,
    responses((status = 200, description = "the processor's response", body = docket_core::api::ProcessResponse), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "process_is_running, cancelled", body = crate::error::ErrorBody), (status = 413, description = "payload_too_large", body = crate::error::ErrorBody), (status = 422, description = "processor_error", body = crate::error::ErrorBody), (status = 504, description = "timeout: no answer within process_step_timeout", body = crate::error::ErrorBody)),
    summary = "repair a process in error (synchronous)"
)]
async fn process_repair(
    State(s): State<AppState>,
    Path((ns, id)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<ProcessResponse>> {
    check_name("namespace", &ns)?;
    check_name("process id", &id)?;
    call_like(s, ns, id, body, true).await
}

#[utoipa::path(
    get, path = "/v1/namespaces/{ns}/processes/{id}",
    tag = "processes",
    params(("ns" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "namespace"), ("id" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "process id"), docket_core::process::HistoryRange),
    responses((status = 200, description = "process, history, last_event_id", body = docket_core::api::ProcessView), (status = 404, description = "not_found", body = crate::error::ErrorBody)),
    summary = "The process with a range of its history"
)]
async fn process_get(
    State(s): State<AppState>,
    Path((ns, id)): Path<(String, String)>,
    q: Result<Query<HistoryRange>, QueryRejection>,
) -> ApiResult<Json<ProcessView>> {
    check_name("namespace", &ns)?;
    check_name("process id", &id)?;
    let range = query(q)?;
    let (process, history) = s.processes.get(&ns, &id, range).await?;
    Ok(Json(ProcessView {
        last_event_id: process.last_event_id,
        process,
        history,
    }))
}

#[utoipa::path(
    post, path = "/v1/namespaces/{ns}/processes/{id}/simple-repair",
    tag = "processes",
    params(("ns" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "namespace"), ("id" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "process id")),
    responses((status = 200, description = "the process", body = docket_core::api::ProcessRepaired), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "process_is_running", body = crate::error::ErrorBody)),
    summary = "simple-repair: an error process back to running without calling the processor"
)]
async fn process_simple_repair(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    Path((ns, id)): Path<(String, String)>,
) -> ApiResult<Json<ProcessRepaired>> {
    check_name("namespace", &ns)?;
    check_name("process id", &id)?;
    actions::process_repair(&s, &actions::actor(&headers, "api"), &ns, &id).await?;
    let (process, _) = s
        .processes
        .get(
            &ns,
            &id,
            HistoryRange {
                limit: Some(0),
                ..Default::default()
            },
        )
        .await?;
    Ok(Json(ProcessRepaired { process }))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct ProcessListQuery {
    /// Only processes in this status.
    #[param(pattern = "^(init|running|error)$")]
    status: Option<String>,
    /// Page size [100].
    #[param(minimum = 1, maximum = 10000)]
    limit: Option<i64>,
    /// Keyset cursor: processes whose id sorts after this one.
    after: Option<String>,
}

#[utoipa::path(
    get, path = "/v1/namespaces/{ns}/processes",
    tag = "processes",
    params(("ns" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "namespace"), crate::ProcessListQuery),
    responses((status = 200, description = "a page", body = docket_core::api::ProcessPage)),
    summary = "Processes of a namespace by id (keyset paging)"
)]
async fn process_list(
    State(s): State<AppState>,
    Path(ns): Path<String>,
    q: Result<Query<ProcessListQuery>, QueryRejection>,
) -> ApiResult<Json<ProcessPage>> {
    check_name("namespace", &ns)?;
    let q = query(q)?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=MAX_BATCH as i64).contains(&limit) {
        return Err(ApiError::invalid(format!(
            "limit must be within 1..={MAX_BATCH}, got {limit}"
        )));
    }
    let status = match q.status.as_deref() {
        None => None,
        Some(st) => Some(
            docket_core::process::ProcessStatus::parse(st).ok_or_else(|| {
                ApiError::invalid(format!("status must be init, running or error, got {st:?}"))
            })?,
        ),
    };
    let ps = s
        .processes
        .list(&ns, status, q.after.as_deref(), limit)
        .await?;
    let next = if ps.len() as i64 == limit {
        ps.last().map(|p| p.id.clone())
    } else {
        None
    };
    Ok(Json(ProcessPage {
        processes: ps,
        next_after: next,
    }))
}

#[utoipa::path(
    get, path = "/v1/namespaces/{ns}/processes/{id}/trace",
    tag = "processes",
    params(("ns" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "namespace"), ("id" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "process id")),
    responses((status = 200, description = "tasks", body = docket_core::api::ProcessTrace), (status = 404, description = "not_found", body = crate::error::ErrorBody)),
    summary = "Every task of the process, oldest first, each with the events it produced"
)]
async fn process_trace(
    State(s): State<AppState>,
    caller: Option<axum::Extension<docket_engine::auth::Caller>>,
    Path((ns, id)): Path<(String, String)>,
) -> ApiResult<Json<ProcessTrace>> {
    check_name("namespace", &ns)?;
    check_name("process id", &id)?;
    let mut tasks = s.processes.trace(&ns, &id).await?;
    if auth::masks_for(caller.as_ref().map(|c| &c.0)) {
        let refs: Vec<&mut Task> = tasks.iter_mut().map(|t| &mut t.task).collect();
        auth::mask_tasks(&s, refs).await?;
    }
    Ok(Json(ProcessTrace { tasks }))
}

#[utoipa::path(
    put, path = "/v1/namespaces/{ns}/processes/{id}",
    tag = "processes",
    params(("ns" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "namespace"), ("id" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "process id")),
    request_body = docket_core::process::ProcessImportSpec,
    responses((status = 200, description = "the process", body = docket_core::api::ProcessImported), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "process_exists", body = crate::error::ErrorBody)),
    summary = "put: import a whole process (progressor's migration path)"
)]
async fn process_put(
    State(s): State<AppState>,
    Path((ns, id)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<ProcessImported>> {
    check_name("namespace", &ns)?;
    check_name("process id", &id)?;
    let spec: docket_core::process::ProcessImportSpec = parse(body)?;
    let process = s.processes.put(&ns, &id, spec).await?;
    Ok(Json(ProcessImported {
        last_event_id: process.last_event_id,
        process,
    }))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
struct EventsQuery {
    /// Only this namespace's notifications.
    namespace: Option<String>,
    /// Resume after this seq (else the `Last-Event-ID` header, else from the start).
    after: Option<i64>,
}

/// One `/v1/events` subscriber: its position, what it has to send, and whether it follows the
/// shared tail (`live`) or catches up from the database.
struct EventsState {
    cursor: i64,
    buf: std::collections::VecDeque<Arc<docket_store::Notification>>,
    live: bool,
    rx: tokio::sync::broadcast::Receiver<Arc<docket_store::Notification>>,
    s: AppState,
    ns: Option<String>,
    /// The stream's long-poll slot, released when the client goes away.
    _slot: Option<auth::LongPoll>,
}

/// Server-sent events of process notifications (events and lifecycle changes), in commit order,
/// resumable with `after` or the `Last-Event-ID` header (the SSE `id` is the notification's seq).
#[utoipa::path(
    get, path = "/v1/events",
    tag = "processes",
    params(crate::EventsQuery),
    responses((status = 200, description = "text/event-stream; each data is a Notification {seq, namespace, process_id, kind, event_id, data, created_at}", content_type = "text/event-stream", body = crate::openapi::SseEvent)),
    summary = "Server-sent events of process notifications (event, created, failed, repaired, removed) in commit order; resumable with `after` or Last-Event-ID (the SSE id is the seq)"
)]
async fn events_stream(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    caller: Option<axum::Extension<docket_engine::auth::Caller>>,
    q: Result<Query<EventsQuery>, QueryRejection>,
) -> ApiResult<Response> {
    use axum::response::sse::{Event, KeepAlive, Sse};
    let q = query(q)?;
    let slot = auth::long_poll(&s, caller.as_ref().map(|c| &c.0))?;
    let last_id = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i64>().ok());
    let after = q.after.or(last_id).unwrap_or(0);
    // Subscribe before catching up, so nothing falls between the two (see events.rs).
    let rx = s.events.subscribe(&s.engine, &s.shutdown).await?;
    let st = EventsState {
        cursor: after,
        buf: std::collections::VecDeque::new(),
        live: false,
        rx,
        s,
        ns: q.namespace,
        _slot: slot,
    };
    let stream = futures::stream::unfold(st, |mut st| async move {
        loop {
            if let Some(n) = st.buf.pop_front() {
                let ev = Event::default()
                    .id(n.seq.to_string())
                    .event(n.kind.clone())
                    .json_data(&*n)
                    .expect("notification serialises");
                return Some((Ok::<_, std::convert::Infallible>(ev), st));
            }
            if st.s.shutdown.is_cancelled() {
                return None;
            }
            if !st.live {
                // Catching up from the database, from this subscriber's own position.
                match st
                    .s
                    .engine
                    .notification_list(st.ns.as_deref(), st.cursor, 500)
                    .await
                {
                    Ok(v) if !v.is_empty() => {
                        st.cursor = v.last().map_or(st.cursor, |n| n.seq);
                        st.buf.extend(v.into_iter().map(Arc::new));
                    }
                    Ok(_) => st.live = true,
                    Err(e) => {
                        tracing::warn!(error = %e, "reading notifications failed");
                        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    }
                }
                continue;
            }
            let got = tokio::select! {
                r = st.rx.recv() => r,
                _ = st.s.shutdown.cancelled() => return None,
            };
            match got {
                Ok(n) if n.seq <= st.cursor => {}
                Ok(n) => {
                    st.cursor = n.seq;
                    if st.ns.as_deref().is_none_or(|ns| ns == n.namespace) {
                        st.buf.push_back(n);
                    }
                }
                // Fell behind the shared buffer: read the database again from here.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => st.live = false,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}

fn token_view(t: docket_store::TokenRecord) -> docket_core::api::TokenView {
    docket_core::api::TokenView {
        name: t.name,
        scopes: t.scopes,
        queues: t.queues,
        created_at: t.created_at,
        expires_at: t.expires_at,
        revoked_at: t.revoked_at,
        last_used_at: t.last_used_at,
    }
}

#[utoipa::path(
    post, path = "/v1/tokens",
    tag = "tokens",
    request_body = docket_core::api::TokenCreateRequest,
    responses((status = 201, description = "the token, shown this once", body = docket_core::api::TokenCreated), (status = 401, description = "unauthenticated", body = crate::error::ErrorBody), (status = 403, description = "forbidden: needs admin", body = crate::error::ErrorBody), (status = 409, description = "conflict: a live token has the name", body = crate::error::ErrorBody)),
    summary = "Create an API token (admin); only its SHA-256 is stored"
)]
async fn token_create(
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
        .await
        .map_err(|e| match e {
            docket_engine::auth::TokenError::Invalid(m) => ApiError::invalid(m),
            docket_engine::auth::TokenError::Store(e) => e.into(),
        })?;
    actions::token_changed(&s, &actions::actor(&headers, "api"), "create", &rec.name).await;
    Ok((
        StatusCode::CREATED,
        Json(docket_core::api::TokenCreated {
            token,
            info: token_view(rec),
        }),
    )
        .into_response())
}

#[utoipa::path(
    get, path = "/v1/tokens",
    tag = "tokens",
    responses((status = 200, description = "every token, revoked ones included", body = docket_core::api::TokenList), (status = 401, description = "unauthenticated", body = crate::error::ErrorBody), (status = 403, description = "forbidden: needs admin", body = crate::error::ErrorBody)),
    summary = "List API tokens (admin); never the tokens themselves"
)]
async fn token_list(State(s): State<AppState>) -> ApiResult<Json<docket_core::api::TokenList>> {
    let tokens = s.engine.token_list().await?;
    Ok(Json(docket_core::api::TokenList {
        tokens: tokens.into_iter().map(token_view).collect(),
    }))
}

#[utoipa::path(
    delete, path = "/v1/tokens/{name}",
    tag = "tokens",
    params(("name" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "token name")),
    responses((status = 204, description = "revoked: it stops working at once on every node"), (status = 401, description = "unauthenticated", body = crate::error::ErrorBody), (status = 403, description = "forbidden: needs admin", body = crate::error::ErrorBody), (status = 404, description = "no live token has the name", body = crate::error::ErrorBody)),
    summary = "Revoke an API token (admin)"
)]
async fn token_revoke(
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
