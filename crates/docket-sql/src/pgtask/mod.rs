//! pg_task's scheduler from outside the database: docket creates pg_task's `task` table in a
//! target database and runs its rows as pg_task would, without the extension.
//!
//! How it holds together with several docket nodes on one table:
//! - every look at the table (claim, finish, reset) runs in a transaction that first takes a
//!   transaction advisory lock of the table, so group limits (`max`) are counted exactly;
//! - a node holds a session advisory lock `(table oid, id)` on its control connection for each
//!   task it has in TAKE or WORK; the reset puts back to PLAN only TAKE/WORK rows whose lock
//!   nobody holds — the node died, or the task's connection did — so no task runs twice at once.
//!
//! Each task runs in a session of its own (pg_task's background worker), opened on the table's
//! database or on `remote`, unless `count`/`live` let one session run several tasks of its group.

mod runner;
mod schema;
mod view;

pub use runner::start;
pub use schema::{bootstrap, MIN_SERVER_VERSION};
pub use view::{RowBrief, TableSummary, TableView};

/// NOTIFY channel of the wake-up trigger; the payload is the table's oid.
pub const CHANNEL: &str = "docket_pg_task";

/// Errors of starting a pg_task table.
#[derive(Debug, thiserror::Error)]
pub enum PgTaskError {
    /// Bad options.
    #[error("{0}")]
    Config(String),
    /// The database failed.
    #[error("{0}")]
    Database(#[from] sqlx::Error),
}
