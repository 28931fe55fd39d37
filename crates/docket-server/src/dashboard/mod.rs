//! The dashboard, served at `/`: server-rendered HTML (maud), readable with JavaScript off.
//! With JavaScript, the vendored htmx and its SSE extension (embedded in the binary) refresh
//! the live part of a page whenever the engine's change feed ticks — one server-sent event
//! stream per browser, no polling of the database while nothing changes.
//!
//! Actions (cancel, retry, run now, pause/resume a queue, repair a process) go through a
//! confirmation page and then the same code as the API ([`crate::actions`]), which records
//! them in the audit log.

mod audit;
mod layout;
mod overview;
mod processes;
mod schedules;
mod tasks;
mod workers;

use audit::*;
use layout::*;
use overview::*;
use processes::*;
use schedules::*;
use tasks::*;
use workers::*;

use crate::actions::{self, TaskAction};
use crate::auth::{CanAct, Csrf, CSRF_FIELD};
use crate::error::ApiError;
use crate::AppState;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Extension, Router};
use docket_core::process::{Direction, HistoryRange, ProcessStatus};
use docket_core::{Task, TaskState, Timestamp};
use docket_store::TaskListParams;
use maud::{html, Markup, DOCTYPE};
use serde::Deserialize;
use serde_json::Value;

const HTMX: &[u8] = include_bytes!("../../assets/htmx-2.0.11.min.js");
const HTMX_SSE: &[u8] = include_bytes!("../../assets/htmx-ext-sse-2.2.4.min.js");

/// Rows per list page.
const PAGE: i64 = 50;

/// The dashboard's routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(overview))
        .route("/ui/tasks", get(tasks))
        .route("/ui/tasks/{id}", get(task))
        .route("/ui/tasks/{id}/{action}", get(task_confirm).post(task_act))
        .route(
            "/ui/queues/{queue}/{action}",
            get(queue_confirm).post(queue_act),
        )
        .route("/ui/processes", get(processes))
        .route("/ui/processes/{ns}/{id}", get(process))
        .route(
            "/ui/processes/{ns}/{id}/repair",
            get(repair_confirm).post(repair_act),
        )
        .route("/ui/schedules", get(schedules))
        .route("/ui/audit", get(audit))
        .route("/ui/workers", get(workers))
        .route("/ui/events", get(events))
        .route("/ui/assets/{file}", get(asset))
        .route(
            "/ui/login",
            get(crate::auth::login_page).post(crate::auth::login),
        )
        .route("/ui/logout", get(crate::auth::logout))
        .layer(axum::middleware::map_response(no_store))
        .layer(axum::middleware::map_response(
            crate::auth::security_headers,
        ))
}

/// Live pages must not go to the back/forward cache: a cached page keeps its event stream
/// open, and a browser has only six connections per host.
async fn no_store(mut r: Response) -> Response {
    let h = r.headers_mut();
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(
            header::CACHE_CONTROL,
            header::HeaderValue::from_static("no-store"),
        );
    }
    r
}

const CLOSE_ON_LEAVE: &str = "addEventListener('pagehide',function(){htmx.trigger(document.body,'htmx:beforeCleanupElement')})";

const STYLE: &str = "
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:.6em 1.2em;display:flex;gap:1.4em;align-items:center}
header a{color:#cfd6e4;text-decoration:none}header a:hover{color:#fff}header b{font-size:1.1em;color:#fff}
main{padding:1em 1.2em}h1{font-size:1.3em;margin:.2em 0 .6em}h2{font-size:1.05em;margin:1.2em 0 .4em}
table{border-collapse:collapse;background:#fff;min-width:40%}th,td{padding:.3em .7em;border-bottom:1px solid #e3e6eb;text-align:left;vertical-align:top}
th{background:#eef0f4;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
.st{padding:.05em .45em;border-radius:.3em;font-size:.9em;background:#e3e6eb}
.st-completed,.st-running_{background:#d3f2dc}.st-running{background:#d6e6ff}.st-available{background:#fff2c7}
.st-discarded,.st-error{background:#ffd9d6}.st-cancelled{background:#e9e3f7}.st-retryable{background:#ffe6c7}
pre{background:#fff;border:1px solid #e3e6eb;padding:.6em;overflow:auto;max-height:24em}
form.f{display:flex;gap:.5em;align-items:end;margin-bottom:.8em;flex-wrap:wrap}label{display:flex;flex-direction:column;font-size:.85em}
input,select,button{font:inherit;padding:.25em .4em}button,.btn{background:#1d2330;color:#fff;border:0;border-radius:.3em;padding:.35em .8em;text-decoration:none;cursor:pointer}
.btn.warn,button.warn{background:#b3261e}dl{display:grid;grid-template-columns:max-content 1fr;gap:.2em 1em;background:#fff;padding:.8em;border:1px solid #e3e6eb}
dt{color:#5b6476}dd{margin:0}.muted{color:#5b6476}.err{color:#b3261e}.actions{display:flex;gap:.5em;margin:.6em 0}
";

/// One `changed` event per burst of engine changes (at most about 3 a second), for htmx to
/// refresh the page's live part; also served as `GET /v1/changes` for other clients
/// (`docket task watch`).
#[utoipa::path(
    get, path = "/v1/changes",
    tag = "status",
    responses((status = 200, description = "text/event-stream", content_type = "text/event-stream", body = crate::openapi::SseEvent)),
    summary = "Server-sent events: `changed` whenever tasks changed (debounced, no payload)"
)]
pub async fn changes(
    State(s): State<AppState>,
    caller: Option<axum::Extension<docket_engine::auth::Caller>>,
) -> Response {
    events(State(s), caller).await
}

async fn events(
    State(s): State<AppState>,
    caller: Option<axum::Extension<docket_engine::auth::Caller>>,
) -> Response {
    use axum::response::sse::{Event, KeepAlive, Sse};
    let slot = match crate::auth::long_poll(&s, caller.as_ref().map(|c| &c.0)) {
        Ok(slot) => slot,
        Err(e) => return e.into_response(),
    };
    let rx = s.engine.waker.changes();
    let stop = s.shutdown.clone();
    let stream = futures::stream::unfold((rx, stop, slot), |(mut rx, stop, slot)| async move {
        use tokio::sync::broadcast::error::RecvError;
        tokio::select! {
            _ = stop.cancelled() => return None,
            r = rx.recv() => if let Err(RecvError::Closed) = r { return None },
        }
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        while let Ok(()) | Err(tokio::sync::broadcast::error::TryRecvError::Lagged(_)) =
            rx.try_recv()
        {}
        Some((
            Ok::<_, std::convert::Infallible>(Event::default().event("changed").data("1")),
            (rx, stop, slot),
        ))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

async fn asset(Path(file): Path<String>) -> Response {
    let body = match file.as_str() {
        "htmx.min.js" => HTMX,
        "sse.min.js" => HTMX_SSE,
        "close.js" => CLOSE_ON_LEAVE.as_bytes(),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    (
        [
            (header::CONTENT_TYPE, "application/javascript"),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        body,
    )
        .into_response()
}

/// The login page (auth required): a token field; `error` says why the last try failed.
pub(crate) fn login_form(error: Option<&str>) -> Response {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "Log in — docket" }
                style { (maud::PreEscaped(STYLE)) }
            }
            body {
                header { b { "docket" } }
                main {
                    h1 { "Log in" }
                    @if let Some(e) = error { p class="err" id="login-error" { (e) } }
                    p { "Paste an API token (" code { "docket token create NAME --scope read" } "). A "
                        code { "read" } " token shows everything; actions need " code { "admin" } "." }
                    form method="post" action="/ui/login" class="f" {
                        input type="password" name="token" id="token" autocomplete="off" placeholder="dkt_…" required;
                        button type="submit" id="login" { "Log in" }
                    }
                }
            }
        }
    }
    .into_response()
}
