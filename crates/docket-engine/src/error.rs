//! The engine's one error type: what the edges (HTTP API, CLI, clients) answer, without naming
//! the store's types. A store error becomes one of these at the engine's boundary
//! ([`From<StoreError>`]); the server gives each a stable code and status.

use docket_store::{DbErrorKind, StoreError};

/// Errors of the engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// A task spec was invalid; `index` is its position in the batch.
    #[error("task {index}: {message}")]
    InvalidTask {
        /// Position in the batch (0-based).
        index: usize,
        /// What is wrong.
        message: String,
    },
    /// A schedule spec was invalid.
    #[error("{0}")]
    InvalidSchedule(String),
    /// A kind hook refused a task (`index`: its position in a batch; `None` for a schedule's
    /// task).
    #[error("{refusal}")]
    Refused {
        /// Position in the batch.
        index: Option<usize>,
        /// The hook's refusal.
        refusal: crate::kinds::KindRefusal,
    },
    /// Bad input (a token's name or scopes, a value out of range).
    #[error("{0}")]
    Invalid(String),
    /// No such task, queue, process, token… (names what).
    #[error("{0} not found")]
    NotFound(String),
    /// The lease is stale: the task was rescued, re-claimed, or never held by this lease.
    #[error("lease lost: the task is no longer held by this lease")]
    LeaseLost,
    /// The task was cancelled while this lease held it.
    #[error("task was cancelled")]
    Cancelled,
    /// The attempt ran past its deadline and was failed with `timeout`; the lease is void.
    #[error("attempt timed out: it ran longer than the task's timeout and was failed")]
    TimedOut,
    /// The change does not apply to the current state (retrying a running task…).
    #[error("{0}")]
    InvalidState(String),
    /// A durable function's replay asked for another call than its journal holds (the
    /// message names both).
    #[error("{0}")]
    Nondeterministic(String),
    /// A unique name or key is taken (a live token's name, an unfinished task's unique key…).
    #[error("conflict: {0}")]
    Conflict(String),
    /// A conditional change found another version than the caller read (`If-Match`).
    #[error("{0}")]
    PreconditionFailed(String),
    /// The database refused a value of the request (out of range, badly encoded): the
    /// request's fault. The message is the driver's, for logs.
    #[error("the database refused a value: {0}")]
    BadValue(String),
    /// A constraint of the database refused the change (the driver's message, for logs).
    #[error("a constraint refused the change: {0}")]
    Constraint(String),
    /// A stored value does not decode (names the row and column): data written by something
    /// else, or a bug.
    #[error("stored data does not decode: {0}")]
    Corrupt(String),
    /// The database cannot serve now (connection lost, pool exhausted, migrations failed…);
    /// trying again may succeed. The driver's message, for logs.
    #[error("database unavailable: {0}")]
    Unavailable(String),
}

impl From<StoreError> for EngineError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(w) => EngineError::NotFound(w),
            StoreError::LeaseLost => EngineError::LeaseLost,
            StoreError::Cancelled => EngineError::Cancelled,
            StoreError::TimedOut => EngineError::TimedOut,
            StoreError::InvalidState(m) => EngineError::InvalidState(m),
            StoreError::Conflict(m) => EngineError::Conflict(m),
            StoreError::Nondeterministic(m) => EngineError::Nondeterministic(m),
            StoreError::Invalid(m) => EngineError::Invalid(m),
            StoreError::PreconditionFailed(m) => EngineError::PreconditionFailed(m),
            StoreError::Corrupt(m) => EngineError::Corrupt(m),
            StoreError::Database { kind, message } => match kind {
                DbErrorKind::InvalidData => EngineError::BadValue(message),
                DbErrorKind::Conflict => EngineError::Constraint(message),
                _ => EngineError::Unavailable(message),
            },
            other => EngineError::Unavailable(other.to_string()),
        }
    }
}
