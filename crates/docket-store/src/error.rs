//! Errors of the store, normalised across backends: one mapping of driver errors into kinds.

/// Errors of the store, normalised across backends.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// No such task/queue/row.
    #[error("{0} not found")]
    NotFound(String),
    /// The lease token is stale: the task was rescued, re-claimed, or never held by this lease.
    #[error("lease lost: the task is no longer held by this lease")]
    LeaseLost,
    /// The task was cancelled while this lease held it.
    #[error("task was cancelled")]
    Cancelled,
    /// The attempt ran past `attempted_at + timeout`: it was failed with `timeout` (retried
    /// per backoff, or discarded when its attempts are spent) and this lease is void.
    #[error("attempt timed out: it ran longer than the task's timeout and was failed")]
    TimedOut,
    /// The operation does not apply to the task's current state.
    #[error("{0}")]
    InvalidState(String),
    /// A unique constraint refused the change.
    #[error("conflict: {0}")]
    Conflict(String),
    /// A durable function's replay asked for another call than its journal holds
    /// (`docket_core::durable::replay_conflict`'s message).
    #[error("{0}")]
    Nondeterministic(String),
    /// Bad input detected by the store (for example a value out of range).
    #[error("{0}")]
    Invalid(String),
    /// A conditional change found the row at another version than the caller read
    /// (`If-Match`).
    #[error("{0}")]
    PreconditionFailed(String),
    /// The database failed; `kind` says how (see [`DbErrorKind`]), `message` is the driver's
    /// text, for logs. Every query's error reaches callers through one mapping
    /// (`From<sqlx::Error>`): a unique violation is [`StoreError::Conflict`], a missing row
    /// [`StoreError::NotFound`], anything else this with its kind.
    #[error("database error ({kind:?}): {message}")]
    Database {
        /// What kind of failure.
        kind: DbErrorKind,
        /// The driver's message.
        message: String,
    },
    /// A stored value does not decode (names the row and column): data written by something
    /// else, or a bug; never replaced by a default.
    #[error("stored data does not decode: {0}")]
    Corrupt(String),
    /// Migrations failed.
    #[error("migration error: {0}")]
    Migrate(String),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        match &e {
            sqlx::Error::RowNotFound => return StoreError::NotFound("row".into()),
            sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => {
                return StoreError::Corrupt(e.to_string())
            }
            sqlx::Error::Database(d) if d.is_unique_violation() => {
                return StoreError::Conflict(d.message().to_string())
            }
            _ => {}
        }
        StoreError::Database {
            kind: classify(&e),
            message: e.to_string(),
        }
    }
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        StoreError::Migrate(e.to_string())
    }
}

/// The kind of a driver error: SQLSTATE class on PostgreSQL and MySQL (a deadlock is 40001, an
/// out-of-range value 22003), result code on SQLite.
fn classify(e: &sqlx::Error) -> DbErrorKind {
    let Some(d) = e.as_database_error() else {
        return DbErrorKind::Unavailable;
    };
    if d.is_unique_violation() || d.is_foreign_key_violation() || d.is_check_violation() {
        return DbErrorKind::Conflict;
    }
    let code = d.code().map(|c| c.to_string()).unwrap_or_default();
    match code.as_str() {
        // SQLite: SQLITE_BUSY, SQLITE_LOCKED and their extended codes.
        "5" | "6" | "261" | "262" | "517" => return DbErrorKind::Retryable,
        _ => {}
    }
    match code.get(..2) {
        Some("22") => DbErrorKind::InvalidData,
        Some("23") => DbErrorKind::Conflict,
        Some("40") => DbErrorKind::Retryable,
        _ => DbErrorKind::Unavailable,
    }
}

/// What kind of failure a [`StoreError::Database`] is, from its SQLSTATE class (PostgreSQL) or
/// error kind (SQLite): what the edges need to answer it without reading driver types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DbErrorKind {
    /// The database refused a value (class 22: out of range, bad encoding, …): the request's
    /// fault.
    InvalidData,
    /// A constraint refused the change (class 23).
    Conflict,
    /// Serialization failure or deadlock (class 40): trying again may succeed.
    Retryable,
    /// Anything else: the database cannot serve now (connection lost, pool exhausted, …).
    Unavailable,
}

impl StoreError {
    /// The kind of a database failure; `None` for the store's own errors.
    pub fn db_kind(&self) -> Option<DbErrorKind> {
        match self {
            StoreError::Database { kind, .. } => Some(*kind),
            _ => None,
        }
    }
}

/// Result alias of the store.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
