//! What every file of `portable/` uses (instead of a glob of its parent, which would make the
//! parent and its files use each other).

#![allow(unused_imports)]

pub(crate) use crate::driver::{
    again, again_up_to, args, stmt, Arg, Broken, Driver, DriverTx, LeaseDriver, Listen,
    MaintenanceDriver, TaskDriver,
};
pub(crate) use crate::row::Cols;
pub(crate) use crate::{
    claim_keys, claim_pick, claimed, decode, empty_counts, merge_queues, row, AuditAddParams,
    AuditStore, AuxPruneParams, AuxPruned, BatchAddParams, BatchCreateParams, BatchListParams,
    BatchSettleParams, BatchStore, ClaimCandidate, ClaimColumns, CountsStepParams, CountsStepped,
    DbErrorKind, Fairness, LeaseOutcome, LeaseStore, MaintenanceStore, NamespacePutParams,
    NamespaceRecord, NodeDrainParams, NodeRecord, NodeStopParams, NodeStore,
    NotificationBacklogParams, NotificationListParams, NotificationStore, ProcessBreak,
    ProcessCollectZombiesParams, ProcessCommit, ProcessCreateParams, ProcessEnqueueParams,
    ProcessFail, ProcessGetParams, ProcessImport, ProcessListParams, ProcessRemoveParams,
    ProcessSimpleRepairParams, ProcessStore, ProcessWithHistory, Promoted, QueueHistoryParams,
    QueueOldest, QueuePutParams, QueueStore, Release, Released, Result, Rotation,
    ScheduleDeferParams, ScheduleDueParams, ScheduleFireParams, ScheduleFired, SchedulePauseParams,
    SchedulePutParams, ScheduleStore, SinkAdvanceParams, SinkLeaseParams, StoreError,
    TaskCancelParams, TaskClaimParams, TaskComplete, TaskCompleteManyParams, TaskDebounceParams,
    TaskEventListParams, TaskExpireParams, TaskFailManyParams, TaskHeartbeatParams,
    TaskInsertManyParams, TaskLabels, TaskListParams, TaskPromoteParams, TaskPruneParams,
    TaskReleaseParams, TaskRescueListParams, TaskRescueManyParams, TaskRetryParams,
    TaskRotateParams, TaskRunNowParams, TaskStore, TaskTransition, TaskUpdateParams, Throughput,
    TokenCreate, TokenRecord, TokenRevoke, TokenStore, TokenTouch, WaitingTask, Wake, WorkerRecord,
    WorkerReportParams, WorkflowApplied, WorkflowApplyParams, WorkflowRetried, WorkflowRetryParams,
};
pub(crate) use async_trait::async_trait;
pub(crate) use docket_core::api::AuditEntry;
pub(crate) use docket_core::batch::Batch;
pub(crate) use docket_core::lease::{Failure, LeaseCheck};
pub(crate) use docket_core::process::{Event, Notice, Notification, Process};
pub(crate) use docket_core::task::ResolvedTask;
pub(crate) use docket_core::{
    FailDecision, QueueSettings, QueueStats, Schedule, Task, TaskState, Timestamp,
};
pub(crate) use std::collections::HashMap;
