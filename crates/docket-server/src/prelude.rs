//! What every handler file uses (`use crate::prelude::*`).

pub(crate) use crate::error::ApiResult;
pub(crate) use crate::error::{ApiError, Code};
pub(crate) use crate::extract::*;
pub(crate) use crate::state::{AppState, Disconnect, MAX_BATCH, MAX_WAIT};
pub(crate) use crate::{actions, auth, schemas};
pub(crate) use axum::body::Bytes;
pub(crate) use axum::extract::rejection::{BytesRejection, QueryRejection};
pub(crate) use axum::extract::{Path, Query, State};
pub(crate) use axum::http::StatusCode;
pub(crate) use axum::response::{IntoResponse, Response};
pub(crate) use axum::Json;
pub(crate) use docket_core::api::TaskListParams;
pub(crate) use docket_core::api::{
    BatchRequest, BatchResponse, ClaimReleased, ClaimRequest, ClaimResponse, CompleteRequest,
    FailRequest, Finished, HeartbeatRequest, ItemOutcome, LeanTask, NamespaceList, NamespaceView,
    NodeList, NodeView, ProcessCallRequest, ProcessImported, ProcessInitRequest, ProcessPage,
    ProcessRepaired, ProcessResponse, ProcessTrace, ProcessView, QueueList, ReleaseItem,
    ScheduleList, TaskPage,
};
pub(crate) use docket_core::lease::{LeaseOutcome, LeaseToken, TaskComplete, TaskFail};
pub(crate) use docket_core::process::{HistoryRange, NamespaceConfig};
pub(crate) use docket_core::QueueStats;
pub(crate) use docket_core::{NewTask, QueueSettings, Task};
pub(crate) use docket_engine::process::{ProcessError, Request as ProcessRequest};
pub(crate) use serde::Deserialize;
pub(crate) use serde_json::{json, Value};
pub(crate) use std::sync::Arc;
pub(crate) use std::time::Duration;
