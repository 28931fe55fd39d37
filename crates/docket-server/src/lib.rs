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
mod prelude;
mod routes;
mod schemas;
mod state;
pub mod tls;

use axum::extract::{DefaultBodyLimit, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use error::{ApiError, Code};
use std::sync::Arc;
use std::time::Duration;

pub use state::{AppState, MAX_BATCH, MAX_BODY_BYTES, MAX_PAYLOAD_BYTES, MAX_WAIT};

use extract::{json_errors, refuse_nul};
use routes::{
    batches::*, changes::*, events::*, leases::*, namespaces::*, processes::*, queues::*,
    rate_limits::*, schedules::*, system::*, tasks::*, tokens::*, workers::*, workflow_runs::*,
    workflows::*,
};
use state::Disconnect;

/// Builds the router.
pub fn router(state: AppState) -> Router {
    let cors = cors_layer(&state.cors_origins);
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/openapi.json", get(openapi::openapi))
        .route("/metrics", get(metrics_text))
        .route("/v1/tasks", post(task_add).get(task_list))
        .route("/v1/tasks/complete", post(task_complete_batch))
        .route("/v1/tasks/fail", post(task_fail_batch))
        .route("/v1/tasks/release", post(task_release_batch))
        .route("/v1/tasks/bulk", post(task_bulk))
        .route("/v1/tasks/bulk/{id}", get(task_bulk_get))
        .route("/v1/tasks/{id}", get(task_get).patch(task_patch))
        .route("/v1/tasks/{id}/cancel", post(task_cancel))
        .route("/v1/tasks/{id}/retry", post(task_retry))
        .route("/v1/tasks/{id}/run-now", post(task_run_now))
        .route("/v1/audit", get(audit_list))
        .route("/v1/status", get(status))
        .route("/v1/changes", get(changes))
        .route("/v1/tasks/{id}/heartbeat", post(task_heartbeat))
        .route("/v1/tasks/{id}/complete", post(task_complete))
        .route("/v1/tasks/{id}/fail", post(task_fail))
        .route("/v1/queues", get(queue_list))
        .route("/v1/queues/{queue}", get(queue_get).put(queue_put))
        .route("/v1/queues/{queue}/pause", post(queue_pause))
        .route("/v1/queues/{queue}/resume", post(queue_resume))
        .route("/v1/queues/{queue}/claim", post(queue_claim))
        .route(
            "/v1/queues/{queue}/claims/{claim_id}/release",
            post(claim_release),
        )
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
        .route("/v1/batches", post(batch_create).get(batch_list))
        .route("/v1/batches/{id}", get(batch_get))
        .route("/v1/batches/{id}/tasks", post(batch_add))
        .route("/v1/batches/{id}/seal", post(batch_seal))
        .route("/v1/rate-limits", get(rate_limit_list))
        .route(
            "/v1/rate-limits/{name}",
            get(rate_limit_get)
                .put(rate_limit_put)
                .delete(rate_limit_delete),
        )
        .route("/v1/workflows", post(workflow_create))
        .route("/v1/workflows/{id}", get(workflow_get))
        .route("/v1/workflows/{id}/cancel", post(workflow_cancel))
        .route("/v1/workflows/{id}/retry", post(workflow_retry))
        .route("/v1/workflows/{id}/tasks", post(workflow_add))
        .route("/v1/workflow-runs", post(run_start).get(run_list))
        .route("/v1/workflow-runs/{id}", get(run_get))
        .route(
            "/v1/workflow-runs/{id}/steps",
            get(run_steps).post(run_record),
        )
        .route("/v1/workflow-runs/{id}/result", get(run_result))
        .route("/v1/workflow-runs/{id}/events", post(run_send))
        .route("/v1/workflow-runs/{id}/cancel", post(run_cancel))
        .route("/v1/workflow-runs/{id}/retry", post(run_retry))
        .route("/v1/workflow-runs/{id}/suspend", post(run_suspend))
        .route("/v1/workflow-runs/{id}/finish", post(run_finish))
        .route("/v1/workflow-runs/{id}/resume", post(run_resume))
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
    // asyncflow's envelope on every error under /api, whichever layer above wrote it.
    let app = if state.compat_asyncflow {
        app.layer(axum::middleware::from_fn(compat::envelope))
    } else {
        app
    };
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
