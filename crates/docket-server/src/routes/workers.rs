//! Workers' reports (node-daemons' worker states IDLE/WORK/STOP and the tasks in hand) and the
//! list of workers.

use crate::prelude::*;
use docket_core::api::{WorkerList, WorkerReport, WorkerView};

#[utoipa::path(
    post, path = "/v1/workers/{name}/report",
    tag = "workers",
    params(("name" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "worker name")),
    request_body = docket_core::api::WorkerReport,
    responses((status = 200, description = "the worker as listed", body = docket_core::api::WorkerView), (status = 400, description = "invalid_request", body = crate::error::ErrorBody)),
    summary = "A worker reports its state and the tasks in hand (docket worker does it every 5 s)"
)]
pub(crate) async fn worker_report(
    State(s): State<AppState>,
    caller: Option<axum::Extension<docket_engine::auth::Caller>>,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<WorkerView>> {
    check_name("name", &name)?;
    let r: WorkerReport = parse(body)?;
    if let Some(q) = &r.queue {
        auth::check_queue(caller.as_ref().map(|c| &c.0), q)?;
    }
    // The view of what was just stored: a report does not read every worker back.
    Ok(Json(s.engine.worker_report(&name, &r).await?))
}

#[utoipa::path(
    get, path = "/v1/workers",
    tag = "workers",
    responses((status = 200, description = "every worker by name; `lost` after three missed reports", body = docket_core::api::WorkerList)),
    summary = "Workers and their state"
)]
pub(crate) async fn worker_list(State(s): State<AppState>) -> ApiResult<Json<WorkerList>> {
    Ok(Json(WorkerList {
        workers: s.engine.worker_list().await?,
    }))
}
