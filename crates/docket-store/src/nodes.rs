//! Nodes and workers: registry, heartbeats, drain, worker reports ([`NodeStore`]).

use crate::Result;
use async_trait::async_trait;
pub use docket_core::api::NodeRecord;
use docket_core::Timestamp;
use serde_json::Value;

/// The node registry.
#[async_trait]
pub trait NodeStore: Send + Sync {
    /// Records a node's heartbeat (creating its row on first call).
    ///
    /// # Errors
    /// Database failure.
    async fn node_heartbeat(&self, node: &NodeRecord) -> Result<()>;

    /// Marks a node as stopped cleanly.
    ///
    /// # Errors
    /// Database failure.
    async fn node_stop(&self, p: NodeStopParams<'_>) -> Result<()>;

    /// Every known node.
    ///
    /// # Errors
    /// Database failure.
    async fn node_list(&self) -> Result<Vec<NodeRecord>>;

    /// Drains a node (`drain`: it claims nothing from now on, and its waiting tasks pinned to it
    /// move to `to`, or to any node) or ends a drain. `None` when no node has that name.
    ///
    /// # Errors
    /// Database failure.
    async fn node_drain(&self, p: NodeDrainParams<'_>) -> Result<Option<u64>>;

    /// Records worker `p.name`'s report (replacing its last one).
    ///
    /// # Errors
    /// Store failure.
    async fn worker_report(&self, p: WorkerReportParams<'_>) -> Result<()>;

    /// Every worker's last report, by name.
    ///
    /// # Errors
    /// Store failure.
    async fn worker_list(&self) -> Result<Vec<WorkerRecord>>;
}

/// Params of [`NodeStore::worker_report`].
#[derive(Debug, Clone)]
pub struct WorkerReportParams<'a> {
    /// The worker's name.
    pub name: &'a str,
    /// What it reported (`docket_core::api::WorkerReport` as JSON).
    pub report: &'a Value,
    /// How often it reports, ms.
    pub interval_ms: i64,
    /// When.
    pub now: Timestamp,
}

/// A worker's last report.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerRecord {
    /// The worker's name.
    pub name: String,
    /// What it reported.
    pub report: Value,
    /// When.
    pub reported_at: Timestamp,
    /// How often it reports, ms.
    pub interval_ms: i64,
}

/// Params of [`NodeStore::node_stop`].
#[derive(Debug, Clone)]
pub struct NodeStopParams<'a> {
    /// The node.
    pub name: &'a str,
    /// The current time (the engine's clock).
    pub now: Timestamp,
}

/// Params of [`NodeStore::node_drain`].
#[derive(Debug, Clone)]
pub struct NodeDrainParams<'a> {
    /// The node.
    pub name: &'a str,
    /// Drain (true) or end the drain (false).
    pub drain: bool,
    /// Where its pinned waiting tasks go (`None`: to any node).
    pub to: Option<&'a str>,
    /// The current time (the engine's clock).
    pub now: Timestamp,
}
