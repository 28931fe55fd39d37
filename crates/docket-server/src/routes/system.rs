//! Health, metrics, the OpenAPI document, status, the audit log and nodes.

use crate::prelude::*;

/// `{"status": "ok"}` when the database answers and this node's maintenance loop finished a
/// pass recently; 503 `maintenance_stalled` when it has not for `maintenance_stall_after`.
#[utoipa::path(
    get, path = "/healthz",
    tag = "service",
    responses((status = 200, description = "ok", body = crate::schemas::Health)),
    summary = "Liveness: the database answers and maintenance finished a pass in the last 120 s (else 503 maintenance_stalled)"
)]
pub(crate) async fn healthz(State(s): State<AppState>) -> Response {
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
    Json(schemas::Health {
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
pub(crate) async fn metrics_text(State(s): State<AppState>) -> Response {
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
    // Rate limit totals too (cluster-wide, like the queue gauges).
    if let Err(e) = s.engine.record_rate_limits().await {
        tracing::warn!(error = %e, "rate limit metrics not read");
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

/// One look at the whole cluster (`docket status`, the dashboard's overview as JSON).
#[utoipa::path(
    get, path = "/v1/status",
    tag = "status",
    responses((status = 200, description = "status", body = crate::schemas::StatusView)),
    summary = "The cluster at a glance: queues with counts and oldest available task, nodes, schedules, last hour's throughput"
)]
pub(crate) async fn status(State(s): State<AppState>) -> ApiResult<Json<schemas::StatusView>> {
    let now = s.engine.clock.now();
    let engine = &s.engine;
    let oldest = engine.queue_oldest_available().await?;
    let queues = engine
        .queue_list()
        .await?
        .into_iter()
        .map(|queue| schemas::QueueStatus {
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
    Ok(Json(schemas::StatusView {
        now,
        queues,
        nodes: nodes_with_state(&s).await?,
        schedules: schemas::ScheduleCounts {
            total: schedules.len(),
            paused: schedules.iter().filter(|s| s.paused).count(),
        },
        last_hour: schemas::LastHour {
            completed,
            failed,
            per_minute: throughput,
        },
    }))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct AuditQuery {
    /// Most entries [100].
    #[param(minimum = 1, maximum = 10000)]
    limit: Option<i64>,
}

#[utoipa::path(
    get, path = "/v1/audit",
    tag = "status",
    params(AuditQuery),
    responses((status = 200, description = "entries", body = crate::schemas::AuditPage)),
    summary = "Operator actions (cancel, retry, run now, pause/resume, repair, schedule changes), newest first"
)]
pub(crate) async fn audit_list(
    State(s): State<AppState>,
    q: Result<Query<AuditQuery>, QueryRejection>,
) -> ApiResult<Json<schemas::AuditPage>> {
    let limit = query(q)?.limit.unwrap_or(100);
    if !(1..=MAX_BATCH as i64).contains(&limit) {
        return Err(ApiError::invalid(format!(
            "limit must be within 1..={MAX_BATCH}, got {limit}"
        )));
    }
    Ok(Json(schemas::AuditPage {
        entries: s.engine.audit_list(limit).await?,
    }))
}

#[utoipa::path(
    get, path = "/v1/nodes",
    tag = "status",
    responses((status = 200, description = "nodes", body = docket_core::api::NodeList)),
    summary = "Nodes of the cluster with state active/lost/stopped"
)]
pub(crate) async fn node_list(State(s): State<AppState>) -> ApiResult<Json<NodeList>> {
    Ok(Json(NodeList {
        nodes: nodes_with_state(&s).await?,
    }))
}

/// Nodes with their `state` (see [`docket_engine::Engine::node_state`]).
pub(crate) async fn nodes_with_state(s: &AppState) -> ApiResult<Vec<NodeView>> {
    Ok(s.engine
        .node_list()
        .await?
        .into_iter()
        .map(|n| NodeView {
            state: s.engine.node_state(&n).to_string(),
            name: n.name,
            started_at: n.started_at,
            heartbeat_at: n.heartbeat_at,
            stopped_at: n.stopped_at,
            version: n.version,
            info: n.info,
        })
        .collect())
}

/// Body of `POST /v1/nodes/{name}/drain` (may be empty).
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct DrainRequest {
    /// The node that gets the drained node's waiting tasks pinned to it [any node].
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$"
    )]
    to: Option<String>,
}

/// Answer of a drain or resume.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(crate) struct DrainAnswer {
    /// The node.
    node: String,
    /// Whether it is drained now.
    draining: bool,
    /// Waiting tasks that moved off it.
    moved: u64,
}

async fn drain(
    s: &AppState,
    headers: &axum::http::HeaderMap,
    name: &str,
    drain: bool,
    to: Option<String>,
) -> ApiResult<Json<DrainAnswer>> {
    check_name("node", name)?;
    if let Some(t) = &to {
        check_name("to", t)?;
        if t == name {
            return Err(ApiError::invalid(
                "to must name another node than the one drained",
            ));
        }
    }
    let who = actions::actor(headers, "api");
    match s
        .engine
        .node_drain(&who, name, drain, to.as_deref())
        .await?
    {
        Some(moved) => Ok(Json(DrainAnswer {
            node: name.to_string(),
            draining: drain,
            moved,
        })),
        None => Err(ApiError::new(
            Code::NotFound,
            format!("node {name} not found"),
        )),
    }
}

#[utoipa::path(
    post, path = "/v1/nodes/{name}/drain",
    tag = "status",
    params(("name" = String, Path, min_length = 1, max_length = 256, description = "node name")),
    request_body(content = Option<DrainRequest>, description = "optional: an empty body drains to any node"),
    responses((status = 200, description = "drained", body = DrainAnswer), (status = 404, description = "not_found", body = crate::error::ErrorBody)),
    summary = "Drain a node (node-daemons' move tasks to another node): it claims nothing, its running tasks finish, its waiting tasks pinned to it move to `to` (or to any node)"
)]
pub(crate) async fn node_drain(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    Path(name): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<DrainAnswer>> {
    let b: DrainRequest = parse(body)?;
    drain(&s, &headers, &name, true, b.to).await
}

#[utoipa::path(
    post, path = "/v1/nodes/{name}/resume",
    tag = "status",
    params(("name" = String, Path, min_length = 1, max_length = 256, description = "node name")),
    responses((status = 200, description = "claiming again", body = DrainAnswer), (status = 404, description = "not_found", body = crate::error::ErrorBody)),
    summary = "End a node's drain: it claims again"
)]
pub(crate) async fn node_resume(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    Path(name): Path<String>,
) -> ApiResult<Json<DrainAnswer>> {
    drain(&s, &headers, &name, false, None).await
}
