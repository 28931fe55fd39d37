//! The dashboard, served at `/`: server-rendered HTML (maud), readable with JavaScript off.
//! With JavaScript, the vendored htmx and its SSE extension (embedded in the binary) refresh
//! the live part of a page whenever the engine's change feed ticks — one server-sent event
//! stream per browser, no polling of the database while nothing changes.
//!
//! Actions (cancel, retry, run now, pause/resume a queue, repair a process) go through a
//! confirmation page and then the same code as the API ([`crate::actions`]), which records
//! them in the audit log.

mod audit;
mod batches;
mod bulk;
mod charts;
mod dead_letters;
mod layout;
mod login;
mod overview;
mod prelude;
mod processes;
mod rate_limits;
mod runs;
mod schedules;
mod sinks;
mod tasks;
mod timeline;
mod workers;

use audit::*;
use batches::*;
use bulk::*;
use charts::*;
use dead_letters::*;
use overview::*;
use processes::*;
use rate_limits::*;
use runs::*;
use schedules::*;
use sinks::*;
use tasks::*;
use workers::*;

use crate::state::AppState;
use axum::extract::Path;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use prelude::{CLOSE_ON_LEAVE, COPY};

const HTMX: &[u8] = include_bytes!("../../assets/htmx-2.0.11.min.js");
const HTMX_SSE: &[u8] = include_bytes!("../../assets/htmx-ext-sse-2.2.4.min.js");

/// The dashboard's routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(overview))
        .route("/ui/tasks", get(tasks))
        .route("/ui/tasks/{id}", get(task))
        .route("/ui/tasks/{id}/{action}", get(task_confirm).post(task_act))
        .route("/ui/queues/{queue}", get(queue_page))
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
        .route("/ui/sinks", get(sinks))
        .route("/ui/dead-letters", get(dead_letters))
        .route("/ui/batches", get(batches))
        .route("/ui/batches/{id}", get(batch))
        .route(
            "/ui/batches/{id}/{action}",
            get(workflow_confirm).post(workflow_act),
        )
        .route("/ui/runs", get(runs))
        .route("/ui/runs/{id}", get(run))
        .route("/ui/runs/{id}/{action}", get(run_confirm).post(run_act))
        .route("/ui/bulk", get(bulk_confirm).post(bulk_act))
        .route("/ui/bulk/{id}", get(bulk_page))
        .route("/ui/rate-limits", get(rate_limits))
        .route("/ui/events", get(crate::routes::changes::changes))
        .route("/ui/assets/{file}", get(asset))
        .route("/ui/login", get(login::login_page).post(login::login))
        .route("/ui/logout", get(login::logout))
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

async fn asset(Path(file): Path<String>) -> Response {
    let body = match file.as_str() {
        "htmx.min.js" => HTMX,
        "sse.min.js" => HTMX_SSE,
        "close.js" => CLOSE_ON_LEAVE.as_bytes(),
        "copy.js" => COPY.as_bytes(),
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
