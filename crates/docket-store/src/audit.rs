//! The audit log of operator actions ([`AuditStore`]).

use crate::Result;
use async_trait::async_trait;
pub use docket_core::api::AuditEntry;
use docket_core::Timestamp;
use serde_json::Value;

/// The audit log of operator actions.
#[async_trait]
pub trait AuditStore: Send + Sync {
    /// Records an operator action.
    ///
    /// # Errors
    /// Database failure.
    async fn audit_add(&self, p: AuditAddParams<'_>) -> Result<()>;

    /// The newest `limit` audit entries, newest first.
    ///
    /// # Errors
    /// Database failure.
    async fn audit_list(&self, limit: i64) -> Result<Vec<AuditEntry>>;
}

/// Params of [`AuditStore::audit_add`].
#[derive(Debug, Clone)]
pub struct AuditAddParams<'a> {
    /// Who acted (`token:NAME`, `cli:USER`, `dashboard`, …).
    pub actor: &'a str,
    /// What was done (`task.cancel`, `queue.pause`, …).
    pub action: &'a str,
    /// What it was done to (`task:17`, `queue:emails`, …).
    pub target: &'a str,
    /// Details of the action, if any.
    pub detail: Option<Value>,
    /// The current time (the engine's clock).
    pub now: Timestamp,
}
