//! SQLite backend (the embedded default): WAL mode, one writer connection (SQLite allows one
//! writer at a time; queueing in the pool beats busy-waiting on the file lock) and a reader pool.
//! Every write transaction starts with `BEGIN IMMEDIATE`, so it never has to upgrade a read lock.

mod maintenance;
mod notifications;
mod tasks;

use crate::driver::{stmt, Arg, Driver as _, StmtName};
use crate::local_wake::LocalTx;
use crate::row::{parse_json, Cols};
use crate::{sql, Backend, ConnectOptions, PoolStats, Result, Store, StoreError};
use async_trait::async_trait;
use docket_core::process::Notice;
use docket_core::task::ResolvedTask;
use docket_core::{lease, Task, TaskState, Timestamp};
use serde_json::Value;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};
use sqlx::{Row, Sqlite, SqlitePool, Transaction};
use std::str::FromStr;
use std::time::Duration;

/// A SQLite store.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    writer: SqlitePool,
    reader: SqlitePool,
    /// Queues whose claimers should look again (a slot was freed, a task was retried or came
    /// due). SQLite has no LISTEN: this is the in-process equivalent, fed after each commit.
    wake: crate::local_wake::LocalWake,
    /// The database file (empty or `:memory:` for an in-memory database).
    file: std::path::PathBuf,
}

/// An exclusive `flock` on `FILE.lock` beside the database file `FILE` (created when missing);
/// `None` for an in-memory database. Never the database file itself: closing any descriptor of
/// a file drops every POSIX lock the process holds on it, SQLite's own included, and another
/// process could then take the database for unused (seen here: "database disk image is
/// malformed" after a lock on the file itself was let go).
async fn file_lock(path: &std::path::Path) -> Result<Option<nix::fcntl::Flock<std::fs::File>>> {
    let s = path.as_os_str();
    if s.is_empty() || s == ":memory:" {
        return Ok(None);
    }
    let mut lock_path = path.as_os_str().to_owned();
    lock_path.push(".lock");
    let path = std::path::PathBuf::from(lock_path);
    let lock = tokio::task::spawn_blocking(move || {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
        nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| std::io::Error::from(e))
    })
    .await
    .map_err(|e| StoreError::Migrate(format!("database file lock: {e}")))?
    .map_err(|e| StoreError::Migrate(format!("database file lock: {e}")))?;
    Ok(Some(lock))
}

fn us(t: Timestamp) -> i64 {
    t.timestamp_micros()
}

fn from_us(v: i64) -> Timestamp {
    chrono::DateTime::from_timestamp_micros(v).unwrap_or_default()
}

fn ms(d: Duration) -> i64 {
    d.as_millis().min(i64::MAX as u128) as i64
}

impl SqliteStore {
    /// Opens (creating) the database file.
    ///
    /// # Errors
    /// Bad URL, file cannot be opened.
    pub async fn connect(opts: &ConnectOptions) -> Result<Self> {
        let base = SqliteConnectOptions::from_str(&opts.url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        let file = base.get_filename().to_path_buf();
        // Opening runs PRAGMAs that a migration in another process can break (sqlx's worker
        // panics on a statement whose columns changed under it): open under the migration lock.
        let lock = file_lock(&file).await?;
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(base.clone())
            .await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(opts.max_connections.unwrap_or(4))
            .connect_with(base.read_only(false))
            .await?;
        drop(lock);
        let wake = crate::local_wake::LocalWake::default();
        Ok(SqliteStore {
            writer,
            reader,
            wake,
            file,
        })
    }

    /// Holds an exclusive `flock` on `FILE.lock` while `f` runs: processes migrating the same
    /// database take turns (SQLite has no lock to take before a migration, and sqlx's is a
    /// no-op). Readers and writers of the database are not held up. An in-memory database has
    /// nothing to lock.
    async fn with_file_lock<T>(
        &self,
        f: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        let lock = file_lock(&self.file).await?;
        let r = f.await;
        drop(lock);
        r
    }

    /// Inserts one task; `None` when its unique_key is held by an unfinished task.
    async fn insert_row(
        tx: &mut sqlx::SqliteConnection,
        t: &ResolvedTask,
        now: Timestamp,
    ) -> Result<Option<i64>> {
        sqlx::query_scalar(sql!(tasks, insert))
            .bind(&t.queue)
            .bind(&t.kind)
            .bind(t.payload.to_string())
            .bind(t.priority)
            .bind(t.state.as_str())
            .bind(us(t.run_at))
            .bind(t.expires_at.map(us))
            .bind(t.max_attempts)
            .bind(ms(t.backoff.initial))
            .bind(t.backoff.coefficient)
            .bind(ms(t.backoff.max))
            .bind(t.backoff.jitter)
            .bind(t.timeout_ms)
            .bind(&t.unique_key)
            .bind(&t.concurrency_key)
            .bind(t.concurrency_limit)
            .bind(&t.node)
            .bind(us(now))
            .bind(&t.trace_id)
            .bind(t.process.as_ref().map(|p| &p.namespace))
            .bind(t.process.as_ref().map(|p| &p.id))
            .bind(t.backoff.kind.as_str())
            .bind(&t.user_id)
            .bind(&t.stage)
            .bind(t.progress.as_ref().map(Value::to_string))
            .bind(t.batch_id)
            .bind(&t.rate_limit)
            .bind(&t.partition_key)
            .bind(crate::row::tags_json(&t.tags).map(|v| v.to_string()))
            .bind(crate::row::affinity_json(t.affinity.as_ref()).map(|v| v.to_string()))
            .fetch_optional(&mut *tx)
            .await
            .map_err(StoreError::from)
    }

    /// Writes notifications of one process in the current transaction (the single writer makes
    /// seq order commit order).
    async fn publish(
        tx: &mut sqlx::SqliteConnection,
        namespace: &str,
        id: &str,
        notices: &[Notice],
        now: Timestamp,
    ) -> Result<()> {
        for n in notices {
            sqlx::query(sql!(notifications, publish))
                .bind(namespace)
                .bind(id)
                .bind(n.kind())
                .bind(n.event_id())
                .bind(n.data().to_string())
                .bind(us(now))
                .execute(&mut *tx)
                .await?;
        }
        Ok(())
    }

    async fn begin(&self) -> Result<Transaction<'static, Sqlite>> {
        Ok(self.writer.begin_with("BEGIN IMMEDIATE").await?)
    }
}

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> Backend {
        Backend::Sqlite
    }

    fn supports_listen_notify(&self) -> bool {
        false
    }

    async fn migrate(&self) -> Result<()> {
        self.with_file_lock(async {
            sqlx::migrate!("./migrations/sqlite")
                .run(&self.writer)
                .await?;
            Ok(())
        })
        .await
    }

    fn pool_connections(&self) -> PoolStats {
        // Saturating: a clean-clone CI run overflowed the plain sum of these sqlx counters. They
        // feed metrics only, so a momentarily odd value must not panic.
        let idle = self
            .writer
            .num_idle()
            .saturating_add(self.reader.num_idle());
        let size = (self.writer.size() as usize).saturating_add(self.reader.size() as usize);
        PoolStats {
            in_use: size - idle.min(size),
            idle: idle.min(size),
        }
    }

    async fn close(&self) {
        self.writer.close().await;
        self.reader.close().await;
    }
}

crate::sql::statements!("sqlite": audit, batches, fragments, leases, maintenance, nodes, notifications, processes, queues, rate_limits, runs, schedules, tasks, tokens);

#[async_trait]
impl crate::driver::Driver for SqliteStore {
    type Row = SqliteRow;
    type Tx = SqliteTx;

    async fn begin(&self) -> Result<SqliteTx> {
        Ok(LocalTx::new(SqliteStore::begin(self).await?, &self.wake))
    }

    fn stmt(s: StmtName) -> &'static crate::sql::Stmt {
        STATEMENTS.stmt(s.0, s.1)
    }

    async fn fetch_stmt(&self, st: &crate::sql::Stmt, args: &[Arg<'_>]) -> Result<Vec<SqliteRow>> {
        let q = bind(sqlx::query(&st.text), st, args);
        // Reads go to the reader pool; a statement that changes rows to the one writer.
        Ok(if st.read {
            q.fetch_all(&self.reader).await?
        } else {
            q.fetch_all(&self.writer).await?
        })
    }

    async fn execute_stmt(&self, st: &crate::sql::Stmt, args: &[Arg<'_>]) -> Result<u64> {
        Ok(bind(sqlx::query(&st.text), st, args)
            .execute(&self.writer)
            .await?
            .rows_affected())
    }

    async fn execute_text(&self, s: StmtName) -> Result<()> {
        let st = STATEMENTS.stmt(s.0, s.1);
        sqlx::raw_sql(&st.text).execute(&self.writer).await?;
        Ok(())
    }
}

/// A SQLite transaction of the portable store code ([`crate::driver::DriverTx`]): the writer, and the
/// queues to wake after the commit.
pub(crate) type SqliteTx = LocalTx<Sqlite>;

#[async_trait]
impl crate::driver::DriverTx for SqliteTx {
    type Row = SqliteRow;

    async fn fetch(&mut self, s: StmtName, args: &[Arg<'_>]) -> Result<Vec<SqliteRow>> {
        let st = SqliteStore::stmt(s);
        Ok(bind(sqlx::query(&st.text), st, args)
            .fetch_all(&mut *self.tx)
            .await?)
    }

    async fn execute(&mut self, s: StmtName, args: &[Arg<'_>]) -> Result<u64> {
        let st = SqliteStore::stmt(s);
        Ok(bind(sqlx::query(&st.text), st, args)
            .execute(&mut *self.tx)
            .await?
            .rows_affected())
    }

    async fn wake(&mut self, queues: &[String]) -> Result<()> {
        self.wake_after(queues);
        Ok(())
    }

    async fn publish(
        &mut self,
        namespace: &str,
        id: &str,
        notices: &[Notice],
        now: Timestamp,
    ) -> Result<()> {
        SqliteStore::publish(&mut self.tx, namespace, id, notices, now).await
    }

    async fn insert_task(&mut self, t: &ResolvedTask, now: Timestamp) -> Result<Option<Task>> {
        let Some(id) = SqliteStore::insert_row(&mut self.tx, t, now).await? else {
            return Ok(None);
        };
        if t.state == TaskState::Available {
            self.wake_after([&t.queue]);
        }
        Ok(Some(t.clone().into_task(id, from_us(us(now)))))
    }

    async fn insert_events(
        &mut self,
        namespace: &str,
        id: &str,
        events: &[docket_core::process::Event],
    ) -> Result<()> {
        crate::portable::insert_each_event(
            self,
            stmt!(processes, insert_event),
            namespace,
            id,
            events,
        )
        .await
    }

    async fn commit(self) -> Result<()> {
        self.commit_and_wake().await
    }
}

/// Binds [`Arg`]s as SQLite keeps them: times as µs, JSON as text.
fn bind<'q>(
    mut q: sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments<'q>>,
    st: &crate::sql::Stmt,
    args: &[Arg<'q>],
) -> sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments<'q>> {
    for a in crate::driver::ordered(st, args) {
        q = match a {
            Arg::Text(v) => q.bind(v),
            Arg::Int(v) => q.bind(v),
            Arg::Int32(v) => q.bind(v),
            Arg::Float(v) => q.bind(v),
            Arg::Bool(v) => q.bind(v),
            Arg::Time(v) => q.bind(v.map(us)),
            Arg::Json(v) => q.bind(v.map(Value::to_string)),
            Arg::Nonce(v) => q.bind(v.map(lease::nonce_hex)),
            Arg::Ints(_) | Arg::Texts(_) | Arg::Times(_) | Arg::Nonces(_) | Arg::Jsons(_) => {
                q.bind(a.json_list())
            }
        };
    }
    q
}

/// SQLite keeps times as integer µs since the epoch, JSON as text, flags as 0/1 and a lease
/// token's nonce as 32 hex digits.
impl Cols for SqliteRow {
    crate::row::try_get_cols!(
        text: String,
        text_opt: Option<String>,
        int: i64,
        int_opt: Option<i64>,
        int32: i32,
        int32_opt: Option<i32>,
        float: f64,
    );
    fn flag(&self, c: &str) -> Result<bool> {
        Ok(self.try_get::<i64, _>(c)? != 0)
    }
    fn time(&self, c: &str) -> Result<Timestamp> {
        crate::decode::micros("row", c, self.try_get(c)?)
    }
    fn time_opt(&self, c: &str) -> Result<Option<Timestamp>> {
        self.try_get::<Option<i64>, _>(c)?
            .map(|v| crate::decode::micros("row", c, v))
            .transpose()
    }
    fn json(&self, c: &str) -> Result<Value> {
        parse_json(c, &self.try_get::<String, _>(c)?)
    }
    fn json_opt(&self, c: &str) -> Result<Option<Value>> {
        self.try_get::<Option<String>, _>(c)?
            .map(|s| parse_json(c, &s))
            .transpose()
    }
    fn nonce(&self, c: &str) -> Result<Option<u128>> {
        Ok(self
            .try_get::<Option<String>, _>(c)?
            .as_deref()
            .and_then(docket_core::lease::nonce_from_hex))
    }
}

/// SQLite's statements return what they change; its writer lock serialises every claim.
impl crate::driver::LeaseDriver for SqliteStore {}
