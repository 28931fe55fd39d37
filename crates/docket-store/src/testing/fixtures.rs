//! What the conformance cases share: the store a case gets, fixed times, and the small steps
//! (insert, claim, complete, fail, rescue) they are written in.

pub(super) use crate::{
    AuditAddParams, AuxPruneParams, Backend, BatchAddParams, BatchCreateParams, BatchListParams,
    BatchSettleParams, BatchSettleRule, CountsStepParams, LeaseOutcome, NamespacePutParams,
    NodeDrainParams, NodeRecord, NodeStopParams, NotificationBacklogParams, NotificationListParams,
    ProcessBreak, ProcessCollectZombiesParams, ProcessCommit, ProcessCreateParams,
    ProcessEnqueueParams, ProcessFail, ProcessGetParams, ProcessImport, ProcessListParams,
    ProcessRemoveParams, ProcessSimpleRepairParams, ProcessWithHistory, QueueHistoryParams,
    QueueOldest, QueuePutParams, QueueSetPausedParams, Release, Released, Result, Rotation,
    ScheduleDeferParams, ScheduleDueParams, ScheduleFireParams, ScheduleFired, SchedulePauseParams,
    SchedulePutParams, SinkAdvanceParams, SinkLeaseParams, Store, StoreError, TaskCancelParams,
    TaskClaimParams, TaskComplete, TaskCompleteManyParams, TaskDebounceParams, TaskEventListParams,
    TaskExpireParams, TaskFail, TaskFailManyParams, TaskHeartbeatParams, TaskInsertManyParams,
    TaskLabels, TaskListParams, TaskPromoteParams, TaskPruneParams, TaskReleaseParams,
    TaskRescueListParams, TaskRescueManyParams, TaskRetryParams, TaskRotateParams,
    TaskRunNowParams, TaskUpdateParams, TokenCreate, TokenRevoke, TokenTouch, Wake,
    WorkerReportParams, WorkflowApplied, WorkflowApplyParams, WorkflowRetried, WorkflowRetryParams,
};
pub(super) use chrono::TimeZone;
pub(super) use docket_core::task::ResolvedTask;
pub(super) use docket_core::{NewTask, QueueSettings, TaskDefaults, TaskState, Timestamp};
pub(super) use serde_json::json;
pub(super) use std::sync::Arc;
pub(super) use std::time::Duration;

/// What a case gets: the (recording) store.
pub(super) struct Bundle {
    pub(super) store: Arc<dyn Store>,
}

pub(super) fn t0() -> Timestamp {
    chrono::Utc.with_ymd_and_hms(2030, 1, 1, 12, 0, 0).unwrap()
}

pub(super) fn secs(s: i64) -> chrono::Duration {
    chrono::TimeDelta::try_seconds(s).expect("small")
}

pub(super) fn resolve(n: NewTask, now: Timestamp) -> ResolvedTask {
    n.resolve(None, &TaskDefaults::default(), now).unwrap()
}

pub(super) async fn insert(
    s: &dyn Store,
    tasks: Vec<NewTask>,
    now: Timestamp,
) -> Vec<docket_core::Task> {
    let names: Vec<String> = tasks.iter().map(|t| t.queue_name().to_string()).collect();
    let qs = s.queue_settings_many(&names).await.unwrap();
    let tasks = tasks
        .into_iter()
        .map(|n| {
            let q = qs.get(n.queue_name()).cloned();
            n.resolve(q.as_ref(), &TaskDefaults::default(), now)
                .unwrap()
        })
        .collect();
    s.task_insert_many(TaskInsertManyParams { tasks, now })
        .await
        .unwrap()
}

pub(super) fn nt(kind: &str) -> NewTask {
    NewTask::new(kind, json!({"k": kind}))
}

pub(super) async fn claim(
    s: &dyn Store,
    queue: &str,
    limit: i64,
    now: Timestamp,
) -> Vec<docket_core::Task> {
    s.task_claim(TaskClaimParams {
        labels: Default::default(),
        kinds: None,
        stages: None,
        queue: queue.into(),
        worker: "w1".into(),
        node: "n1".into(),
        limit,
        lease: None,
        now,
        nonce: None,
    })
    .await
    .unwrap()
}

pub(super) fn done(token: &docket_core::Task, result: serde_json::Value) -> TaskComplete {
    TaskComplete {
        id: token.id,
        token: token.lease.as_ref().unwrap().token.clone(),
        result,
        next: None,
    }
}

pub(super) fn fail(t: &docket_core::Task, msg: &str) -> TaskFail {
    TaskFail {
        id: t.id,
        token: t.lease.as_ref().unwrap().token.clone(),
        error: msg.into(),
        retry_in: None,
        permanent: false,
    }
}

/// Fails `t`'s attempt for good (`discarded`) with `msg` at `now`.
pub(super) async fn discard(s: &dyn Store, t: &docket_core::Task, msg: &str, now: Timestamp) {
    let mut f = fail(t, msg);
    f.permanent = true;
    s.task_fail_many(TaskFailManyParams {
        fail_rule: docket_core::task::standard_fail_rule,
        items: &[f],
        worker: None,
        now,
    })
    .await
    .unwrap();
}

/// A rescue as the engine's rescuer runs it: list the expired leases, decide each with
/// [`docket_core::lease::Failure::rescue`] and `rule`, apply.
pub(super) async fn rescue(
    s: &dyn Store,
    rule: docket_core::task::FailRule,
    now: Timestamp,
    limit: i64,
) -> Result<Vec<TaskLabels>> {
    let stuck = s
        .task_rescue_list(TaskRescueListParams { now, limit })
        .await?;
    let items = stuck
        .iter()
        .map(|t| docket_core::lease::Failure::rescue(t, rule, now))
        .collect();
    s.task_rescue_many(TaskRescueManyParams { items, now })
        .await
}

pub(super) fn state_run_at(o: &LeaseOutcome) -> (TaskState, docket_core::Timestamp) {
    match o {
        LeaseOutcome::Ok { state, run_at, .. } => (*state, *run_at),
        other => panic!("not applied: {other:?}"),
    }
}
