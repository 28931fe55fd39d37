//! The [`Store`] trait and its backends: PostgreSQL ([`postgres::PgStore`]), SQLite
//! ([`sqlite::SqliteStore`], the embedded default) and MySQL/MariaDB ([`mysql::MySqlStore`]).
//!
//! Methods are named `noun_verb` and take plain params, so fields can be added. The store applies
//! decisions made by `docket-core` (defaults, backoff, fail rules, `docket_core::lease`) and the
//! engine atomically; it does not make policy of its own. `tests/conformance.rs` runs one suite
//! (`testing::exercise`) against every backend.
//!
//! Layout: a file per noun holds its trait and params (`tasks.rs`: [`TaskStore`], `leases.rs`:
//! [`LeaseStore`], `maintenance.rs`, `queues.rs`, `nodes.rs`, `processes.rs`,
//! `notifications.rs`, `schedules.rs`, `audit.rs`, `tokens.rs`), and each backend folder
//! (`postgres/`, `sqlite/`, `mysql/`) a file of the same name implementing it. This file keeps
//! the [`Store`] umbrella and [`connect`].

use async_trait::async_trait;
pub use docket_core::api::Backend;
pub use docket_core::api::PoolStats;

mod audit;
mod batches;
mod decode;
mod driver;
mod error;
pub mod failover;
mod leases;
mod local_wake;
mod maintenance;
pub mod mysql;
mod nodes;
mod notifications;
mod open;
mod portable;
pub mod postgres;
mod processes;
mod queues;
mod rate_limits;
mod row;
mod runs;
mod schedules;
mod sql;
pub mod sqlite;
mod tasks;
#[cfg(feature = "testing")]
pub mod testing;
mod tokens;

pub use audit::*;
pub use batches::*;
pub use error::*;
pub use leases::*;
pub(crate) use leases::{claim_keys, claim_pick, claimed, ClaimCandidate, ClaimColumns};
pub use maintenance::*;
pub use nodes::*;
pub use notifications::*;
pub use open::*;
pub use processes::*;
pub use queues::*;
pub(crate) use queues::{empty_counts, merge_queues, QueueTimes};
pub use rate_limits::RateLimitStore;
pub use runs::*;
pub use schedules::*;
pub(crate) use sql::sql;
pub use tasks::*;
pub(crate) use tokens::decode_grant;
pub use tokens::*;

/// The storage interface of docket: a trait per noun, plus the backend's identity, migrations
/// and pool. Every method is atomic. River's driver interface is the model; the conformance suite
/// (`testing::exercise`, feature `testing`) calls every method on every backend.
#[async_trait]
pub trait Store:
    TaskStore
    + BatchStore
    + RateLimitStore
    + LeaseStore
    + MaintenanceStore
    + QueueStore
    + NodeStore
    + ProcessStore
    + NotificationStore
    + ScheduleStore
    + AuditStore
    + TokenStore
    + RunStore
    + Send
    + Sync
    + std::fmt::Debug
{
    /// Which backend this is.
    fn backend(&self) -> Backend;

    /// True where other processes' changes can wake us (PostgreSQL LISTEN/NOTIFY); else poll.
    fn supports_listen_notify(&self) -> bool;

    /// Connections of this node's pool(s): (in use, idle).
    fn pool_connections(&self) -> PoolStats;

    /// How many claims this store answered with PostgreSQL's one-statement claim
    /// (`claim_fast`, one round trip) since it was opened; the others took the transaction
    /// that counts running tasks under locks (a candidate with a concurrency key or a rate
    /// limit, a queue with a limit or fair claims). 0 on SQLite and MySQL, whose claims are
    /// always that transaction.
    fn claims_in_one_statement(&self) -> u64 {
        0
    }

    /// Applies the embedded migrations (idempotent; safe with several nodes at once).
    ///
    /// # Errors
    /// Database or migration failure.
    async fn migrate(&self) -> Result<()>;

    /// Closes the pool.
    async fn close(&self);
}
