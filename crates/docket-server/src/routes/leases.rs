//! Work under a lease: claim (long-poll), heartbeat, complete and fail, one or many.

use crate::prelude::*;

#[utoipa::path(
    post, path = "/v1/tasks/{id}/heartbeat",
    tag = "tasks",
    params(("id" = i64, Path, minimum = 1, description = "task id")),
    request_body = docket_core::api::HeartbeatRequest,
    responses((status = 200, description = "the task", body = docket_core::Task), (status = 404, description = "not_found", body = crate::error::ErrorBody), (status = 409, description = "lease_lost, cancelled, timed_out", body = crate::error::ErrorBody), (status = 413, description = "payload_too_large", body = crate::error::ErrorBody)),
    summary = "Extend the lease (never past attempted_at + timeout) and report progress; 409 lease_lost, cancelled or timed_out"
)]
pub(crate) async fn task_heartbeat(
    State(s): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Task>> {
    let id = task_id(&id)?;
    let b: HeartbeatRequest = parse(body)?;
    b.validate().map_err(ApiError::invalid)?;
    if let Some(p) = &b.progress {
        check_size("progress", p)?;
    }
    check_lease("extend", b.extend)?;
    Ok(Json(
        s.engine
            .heartbeat(id, b.lease, b.progress, b.extend)
            .await?,
    ))
}

/// A single-item outcome as a response: 200 with the new state, or the lease/cancel error.
pub(crate) fn single(id: i64, o: LeaseOutcome) -> ApiResult<Json<Finished>> {
    match o {
        LeaseOutcome::Ok { state, run_at, .. } => Ok(Json(Finished { id, state, run_at })),
        LeaseOutcome::LeaseLost => Err(docket_engine::EngineError::LeaseLost.into()),
        LeaseOutcome::Cancelled => Err(docket_engine::EngineError::Cancelled.into()),
        LeaseOutcome::TimedOut => Err(docket_engine::EngineError::TimedOut.into()),
        LeaseOutcome::NotFound => Err(ApiError::not_found(format!("task {id} not found"))),
    }
}

/// One item of a batch answer.
pub(crate) fn item_outcome(id: i64, o: LeaseOutcome) -> ItemOutcome {
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
pub(crate) async fn task_complete(
    State(s): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Finished>> {
    let id = task_id(&id)?;
    let b: CompleteRequest = parse(body)?;
    check_size("result", &b.result)?;
    if let Some(p) = &b.payload {
        check_size("payload", p)?;
    }
    let next = b.next(s.engine.clock.now()).map_err(ApiError::invalid)?;
    let o = s
        .engine
        .complete_many(&[TaskComplete {
            id,
            token: b.lease,
            result: b.result,
            next,
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
pub(crate) async fn task_fail(
    State(s): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Finished>> {
    let id = task_id(&id)?;
    let b: FailRequest = parse(body)?;
    b.validate().map_err(ApiError::invalid)?;
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

pub(crate) fn batch_ids<T>(items: &[T], id: impl Fn(&T) -> Option<i64>) -> ApiResult<Vec<i64>> {
    if items.is_empty() || items.len() > MAX_BATCH {
        return Err(ApiError::invalid(format!(
            "items must hold 1..={MAX_BATCH} entries"
        )));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, it)| {
            id(it).filter(|x| *x > 0).ok_or_else(|| {
                ApiError::invalid(format!("items[{i}].id is required: a task id, at least 1"))
            })
        })
        .collect()
}

/// The items of a batch complete (`POST /v1/tasks/complete`, a claim's `complete`), checked:
/// ids present and at least 1, results and payloads within bounds, stage hand-offs resolved
/// at `now`. Any bad item refuses them all (400 or 413, naming `items[i]`).
pub(crate) fn complete_items(
    items: Vec<CompleteRequest>,
    now: docket_core::Timestamp,
) -> ApiResult<Vec<TaskComplete>> {
    let mut out = Vec::with_capacity(items.len());
    for (i, it) in items.into_iter().enumerate() {
        let id = item_id(i, it.id)?;
        check_size("result", &it.result)?;
        if let Some(p) = &it.payload {
            check_size("payload", p)?;
        }
        let next = it
            .next(now)
            .map_err(|e| ApiError::invalid(format!("items[{i}]: {e}")))?;
        out.push(TaskComplete {
            id,
            token: it.lease,
            result: it.result,
            next,
        });
    }
    Ok(out)
}

/// The items of a batch fail (`POST /v1/tasks/fail`, a claim's `fail`), checked; any bad
/// item refuses them all (400, naming `items[i]`).
pub(crate) fn fail_items(items: Vec<FailRequest>) -> ApiResult<Vec<TaskFail>> {
    items
        .into_iter()
        .enumerate()
        .map(|(i, it)| {
            it.validate()
                .map_err(|e| ApiError::invalid(format!("items[{i}].{e}")))?;
            Ok(TaskFail {
                id: item_id(i, it.id)?,
                token: it.lease,
                error: it.error,
                retry_in: it.retry_in,
                permanent: it.permanent,
            })
        })
        .collect()
}

/// Completes `items` (a batch route's, a claim's); one outcome per item, in order.
async fn complete_outcomes(s: &AppState, items: &[TaskComplete]) -> ApiResult<Vec<ItemOutcome>> {
    let outs = s.engine.complete_many(items).await?;
    Ok(items
        .iter()
        .zip(outs)
        .map(|(i, o)| item_outcome(i.id, o))
        .collect())
}

/// Fails `items` as `worker` (a batch route's, a claim's); one outcome per item, in order.
async fn fail_outcomes(
    s: &AppState,
    items: &[TaskFail],
    worker: Option<&str>,
) -> ApiResult<Vec<ItemOutcome>> {
    let outs = s.engine.fail_many(items, worker).await?;
    Ok(items
        .iter()
        .zip(outs)
        .map(|(i, o)| item_outcome(i.id, o))
        .collect())
}

fn item_id(i: usize, id: Option<i64>) -> ApiResult<i64> {
    id.filter(|x| *x > 0).ok_or_else(|| {
        ApiError::invalid(format!("items[{i}].id is required: a task id, at least 1"))
    })
}

#[utoipa::path(
    post, path = "/v1/tasks/complete",
    tag = "tasks",
    request_body = docket_core::api::BatchRequest<docket_core::api::CompleteRequest>,
    responses((status = 200, description = "one result per item, in order", body = docket_core::api::BatchResponse), (status = 413, description = "payload_too_large", body = crate::error::ErrorBody)),
    summary = "Complete many tasks in one statement"
)]
pub(crate) async fn task_complete_batch(
    State(s): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<BatchResponse>> {
    let b: BatchRequest<CompleteRequest> = parse(body)?;
    batch_ids(&b.items, |i| i.id)?;
    let items = complete_items(b.items, s.engine.clock.now())?;
    Ok(Json(BatchResponse {
        results: complete_outcomes(&s, &items).await?,
    }))
}

#[utoipa::path(
    post, path = "/v1/tasks/fail",
    tag = "tasks",
    request_body = docket_core::api::BatchRequest<docket_core::api::FailRequest>,
    responses((status = 200, description = "one result per item, in order", body = docket_core::api::BatchResponse), (status = 413, description = "payload_too_large", body = crate::error::ErrorBody)),
    summary = "Fail many attempts in one transaction"
)]
pub(crate) async fn task_fail_batch(
    State(s): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<BatchResponse>> {
    let b: BatchRequest<FailRequest> = parse(body)?;
    let worker = b.items.first().and_then(|i| i.worker.clone());
    let items = fail_items(b.items)?;
    batch_ids(&items, |i| Some(i.id))?;
    Ok(Json(BatchResponse {
        results: fail_outcomes(&s, &items, worker.as_deref()).await?,
    }))
}

#[utoipa::path(
    post, path = "/v1/queues/{queue}/claim",
    tag = "queues",
    params(("queue" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "queue name")),
    request_body = docket_core::api::ClaimRequest,
    responses((status = 200, description = "claimed tasks, each with its lease", body = docket_core::api::ClaimResponse)),
    summary = "Claim tasks under a lease; `wait` long-polls"
)]
pub(crate) async fn queue_claim(
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
    for (field, names) in [("kinds", &b.kinds), ("stages", &b.stages)] {
        if let Some(k) = names {
            if k.is_empty() || k.len() > 100 {
                return Err(ApiError::invalid(format!(
                    "{field} must hold 1..=100 names"
                )));
            }
            for (i, name) in k.iter().enumerate() {
                check_name(&format!("{field}[{i}]"), name)?;
            }
        }
    }
    let labels = b.labels.unwrap_or_default();
    docket_core::labels::check_labels("labels", &labels).map_err(ApiError::invalid)?;
    let wait = b.wait.unwrap_or(Duration::ZERO);
    if wait > MAX_WAIT {
        return Err(ApiError::invalid(format!(
            "wait must be at most {}",
            docket_core::duration::format(MAX_WAIT)
        )));
    }
    let claim_id = b
        .claim_id
        .as_deref()
        .map(|c| {
            LeaseToken::claim_nonce(c).ok_or_else(|| {
                ApiError::invalid("claim_id must be a UUID or 32 hex digits".to_string())
            })
        })
        .transpose()?;
    // The reports ride along: checked with the claim, so that a bad one refuses the request
    // before anything is written.
    let reports = (b.complete.unwrap_or_default(), b.fail.unwrap_or_default());
    let fail_worker = reports
        .1
        .first()
        .and_then(|i| i.worker.clone())
        .unwrap_or_else(|| b.worker.clone());
    for (field, n) in [("complete", reports.0.len()), ("fail", reports.1.len())] {
        if n > MAX_BATCH {
            return Err(ApiError::invalid(format!(
                "{field} must hold at most {MAX_BATCH} items"
            )));
        }
    }
    let completes = complete_items(reports.0, s.engine.clock.now())?;
    let fails = fail_items(reports.1)?;
    // Held until the claim answers; a claim that does not wait takes no slot.
    let _slot = if wait.is_zero() {
        None
    } else {
        auth::long_poll(&s, caller.as_ref().map(|c| &c.0))?
    };
    // Reported first and committed whatever the claim finds (as two requests would), so a
    // worker's slots free before it asks for more.
    let mut out = ClaimResponse::default();
    if !completes.is_empty() {
        out.completed = Some(complete_outcomes(&s, &completes).await?);
    }
    if !fails.is_empty() {
        out.failed = Some(fail_outcomes(&s, &fails, Some(fail_worker.as_str())).await?);
    }
    let claim = docket_engine::Claim {
        queue,
        worker: b.worker,
        kinds: b.kinds,
        stages: b.stages,
        labels,
        limit,
        lease: b.lease,
        wait,
        poll: None,
        claim_id,
    };
    let tasks = s.engine.claim(&claim, &cancel).await?;
    if !tasks.is_empty() && cancel.is_cancelled() && !s.shutdown.is_cancelled() {
        // The client went away while the claim ran: the answer cannot reach it. Hand the
        // tasks back now rather than let their leases run out (a client that hung up just
        // after this look releases them by claim_id).
        let held: Vec<(i64, String)> = tasks
            .iter()
            .filter_map(|t| t.lease.as_ref().map(|l| (t.id, l.token.clone())))
            .collect();
        s.engine.release_tasks(&held).await?;
        return Ok(Json(out));
    }
    if b.lean {
        out.lean = Some(tasks.into_iter().filter_map(LeanTask::of).collect());
    } else {
        out.tasks = tasks;
    }
    Ok(Json(out))
}

#[utoipa::path(
    post, path = "/v1/queues/{queue}/claims/{claim_id}/release",
    tag = "queues",
    params(
        ("queue" = String, Path, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$", description = "queue name"),
        ("claim_id" = String, Path, pattern = "^([0-9a-fA-F]{32}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$", description = "the claim_id the claim was sent with")
    ),
    responses((status = 200, description = "the tasks handed back", body = docket_core::api::ClaimReleased)),
    summary = "Hand back what a claim took whose answer never arrived (a stop mid-claim): available at once, no attempt counted, even when this arrives before the claim commits"
)]
pub(crate) async fn claim_release(
    State(s): State<AppState>,
    Path((queue, claim_id)): Path<(String, String)>,
    caller: Option<axum::Extension<docket_engine::auth::Caller>>,
) -> ApiResult<Json<ClaimReleased>> {
    check_name("queue", &queue)?;
    auth::check_queue(caller.as_ref().map(|c| &c.0), &queue)?;
    let nonce = LeaseToken::claim_nonce(&claim_id)
        .ok_or_else(|| ApiError::invalid("claim_id must be a UUID or 32 hex digits".to_string()))?;
    let released = s.engine.release_claim(&queue, nonce).await?;
    Ok(Json(ClaimReleased { released }))
}

#[utoipa::path(
    post, path = "/v1/tasks/release",
    tag = "tasks",
    request_body = docket_core::api::BatchRequest<docket_core::api::ReleaseItem>,
    responses((status = 200, description = "one result per item, in order: ok (state available) or lease_lost", body = docket_core::api::BatchResponse)),
    summary = "Hand back tasks held but not started (a worker's prefetched tasks at its stop): available at once, no attempt counted"
)]
pub(crate) async fn task_release_batch(
    State(s): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<BatchResponse>> {
    let b: BatchRequest<ReleaseItem> = parse(body)?;
    for (i, it) in b.items.iter().enumerate() {
        it.validate()
            .map_err(|e| ApiError::invalid(format!("items[{i}].{e}")))?;
    }
    let ids = batch_ids(&b.items, |i| Some(i.id))?;
    let items: Vec<(i64, String)> = b
        .items
        .into_iter()
        .zip(ids)
        .map(|(i, id)| (id, i.lease))
        .collect();
    let back = s.engine.release_tasks(&items).await?;
    let now = s.engine.clock.now();
    let results = items
        .iter()
        .zip(back)
        .map(|((id, _), ok)| ItemOutcome {
            id: *id,
            outcome: if ok { "ok" } else { "lease_lost" }.to_string(),
            state: ok.then_some(docket_core::TaskState::Available),
            run_at: ok.then_some(now),
        })
        .collect();
    Ok(Json(BatchResponse { results }))
}
