//! docket's HTTP API. JSON in and out; times RFC 3339 UTC; durations humantime strings.
//! The OpenAPI document (`/openapi.json`) is generated from the handlers and the types of
//! `docket_core::api` (see [`openapi`]).

pub mod actions;
pub mod auth;
pub mod compat;
pub mod dashboard;
pub mod error;
pub mod events;
mod extract;
pub mod openapi;
mod routes;
pub mod tls;

use axum::extract::{DefaultBodyLimit, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use docket_engine::process::ProcessService;
use docket_engine::Engine;
use error::{ApiError, Code};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub(crate) use extract::*;
pub(crate) use routes::{
    events::*, leases::*, namespaces::*, processes::*, queues::*, schedules::*, system::*,
    tasks::*, tokens::*, workers::*,
};

/// What every handler file uses (`use crate::prelude::*`).
mod prelude {
    pub(crate) use crate::error::{ApiError, Code};
    pub(crate) use crate::extract::*;
    pub(crate) use crate::{
        actions, auth, openapi, ApiResult, AppState, Disconnect, MAX_BATCH, MAX_BODY_BYTES,
        MAX_PAYLOAD_BYTES, MAX_WAIT,
    };
    pub(crate) use axum::body::Bytes;
    pub(crate) use axum::extract::rejection::{BytesRejection, QueryRejection};
    pub(crate) use axum::extract::{Path, Query, State};
    pub(crate) use axum::http::StatusCode;
    pub(crate) use axum::response::{IntoResponse, Response};
    pub(crate) use axum::Json;
    pub(crate) use docket_core::api::{
        BatchRequest, BatchResponse, ClaimRequest, ClaimResponse, CompleteRequest, FailRequest,
        Finished, HeartbeatRequest, ItemOutcome, NamespaceList, NamespaceView, NodeList, NodeView,
        ProcessCallRequest, ProcessImported, ProcessInitRequest, ProcessPage, ProcessRepaired,
        ProcessResponse, ProcessTrace, ProcessView, QueueList, ScheduleList, TaskPage,
    };
    pub(crate) use docket_core::process::{HistoryRange, NamespaceConfig};
    pub(crate) use docket_core::QueueStats;
    pub(crate) use docket_core::{NewTask, QueueSettings, Task};
    pub(crate) use docket_engine::process::{ProcessError, Request as ProcessRequest};
    pub(crate) use docket_store::{LeaseOutcome, TaskComplete, TaskFail, TaskListParams};
    pub(crate) use serde::de::DeserializeOwned;
    pub(crate) use serde::Deserialize;
    pub(crate) use serde_json::{json, Value};
    pub(crate) use std::sync::Arc;
    pub(crate) use std::time::Duration;
}

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
    /// Panels other crates add to the dashboard (docket-sql: the pg_task tables this node
    /// serves), shown on the schedules page by section.
    pub panels: Arc<Vec<Arc<dyn docket_engine::panels::Panel>>>,
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
    /// asyncflow's routes under `/api` are mounted (`docket serve --compat asyncflow`).
    pub compat_asyncflow: bool,
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
            panels: Arc::default(),
            events: Arc::default(),
            auth: auth::AuthMode::Off,
            allowed_hosts: None,
            tls: false,
            csrf_secret: docket_core::auth::new_token().into(),
            cors_origins: Arc::default(),
            limiters: Arc::new(auth::Limiters::new(auth::Limits::default())),
            compat_asyncflow: false,
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

    /// Mounts asyncflow's routes under `/api` (see [`compat`]).
    pub fn with_compat_asyncflow(mut self, on: bool) -> Self {
        self.compat_asyncflow = on;
        self
    }

    /// Shows these panels on the dashboard.
    pub fn with_panels(mut self, panels: Vec<Arc<dyn docket_engine::panels::Panel>>) -> Self {
        self.panels = Arc::new(panels);
        self
    }
}

pub(crate) type ApiResult<T> = Result<T, ApiError>;

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
        .route("/v1/tasks/{id}", get(task_get).patch(task_patch))
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
        .route("/v1/nodes/{name}/drain", post(node_drain))
        .route("/v1/nodes/{name}/resume", post(node_resume))
        .route("/v1/workers", get(worker_list))
        .route("/v1/workers/{name}/report", post(worker_report))
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
        .merge(if state.compat_asyncflow {
            compat::routes()
        } else {
            Router::new()
        })
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
