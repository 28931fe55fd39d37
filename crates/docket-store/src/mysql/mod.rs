//! MySQL 8.0+ / MariaDB 10.6+ backend: `FOR UPDATE SKIP LOCKED` claims, lock rows
//! (`docket_locks`) where PostgreSQL takes advisory locks, and in-process wake-ups (MySQL has no
//! LISTEN/NOTIFY: other nodes' changes are found by polling, see `EngineConfig::poll_interval`).
//!
//! Every connection runs `READ COMMITTED` (each statement sees what committed before it, as on
//! PostgreSQL; InnoDB's default `REPEATABLE READ` would make a count taken after waiting for a
//! lock read the transaction's older snapshot) with `time_zone = '+00:00'`. MySQL has no
//! `UPDATE … RETURNING`: changes lock the rows they read (`FOR UPDATE`), and rows are read back
//! in the same transaction.

mod maintenance;
mod notifications;
mod tasks;

use crate::driver::{args, stmt, Arg, Driver as _, StmtName};
use crate::local_wake::LocalTx;
use crate::row::{parse_json, task as decode, Cols};
use crate::{sql, Backend, ConnectOptions, DbErrorKind, PoolStats, Result, Store, StoreError};
use async_trait::async_trait;
use docket_core::process::Notice;
use docket_core::task::ResolvedTask;
use docket_core::{lease, Task, TaskState, Timestamp};
use serde_json::Value;
use sqlx::mysql::{MySqlConnectOptions, MySqlRow};
use sqlx::Connection as _;
use sqlx::{Executor, MySql, MySqlPool, Row, Transaction};
use std::str::FromStr;
use std::time::Duration;

use crate::sql::fill;

/// The oldest servers with `SKIP LOCKED`, JSON_TABLE and CHECK constraints.
const MIN_MYSQL: (u32, u32) = (8, 0);
const MIN_MARIADB: (u32, u32) = (10, 6);

/// A MySQL or MariaDB store.
#[derive(Debug, Clone)]
pub struct MySqlStore {
    pool: MySqlPool,
    /// A MariaDB Galera node (`wsrep_on`): reads wait for the cluster's commits, and claims,
    /// rivals of every other node's, go again more often.
    galera: bool,
    /// `auto_increment_increment` when a multi-row INSERT gets consecutive ids (InnoDB's
    /// `innodb_autoinc_lock_mode` 0 or 1, MariaDB's default): then a batch is one statement and
    /// its ids follow from `LAST_INSERT_ID()`. `None` (mode 2, MySQL 8's default): row by row.
    consecutive_ids: Option<i64>,
    /// Queues whose claimers should look again, fed after each commit of this process (no
    /// LISTEN/NOTIFY in MySQL; other nodes' changes are found by polling).
    wake: crate::local_wake::LocalWake,
}

/// `?, ?, …` for `n` values.
fn marks(n: usize) -> String {
    let mut s = String::with_capacity(n * 3);
    for i in 0..n {
        if i > 0 {
            s.push_str(", ");
        }
        s.push('?');
    }
    s
}

/// A time as MySQL's DATETIME. sqlx sends `DateTime<Utc>` typed TIMESTAMP, whose range ends
/// in 2038: a later value (a task due in 100 years) would arrive as NULL.
trait AsDatetime {
    type Out;
    fn datetime(self) -> Self::Out;
}

impl AsDatetime for Timestamp {
    type Out = chrono::NaiveDateTime;
    fn datetime(self) -> chrono::NaiveDateTime {
        self.naive_utc()
    }
}

impl AsDatetime for Option<Timestamp> {
    type Out = Option<chrono::NaiveDateTime>;
    fn datetime(self) -> Option<chrono::NaiveDateTime> {
        self.map(|t| t.naive_utc())
    }
}

fn dt<T: AsDatetime>(t: T) -> T::Out {
    t.datetime()
}

fn ms(d: Duration) -> i64 {
    d.as_millis().min(i64::MAX as u128) as i64
}

/// Text of a column. Read unchecked: MySQL marks `utf8mb4_bin` and JSON columns in ways sqlx's
/// `String` check refuses, though the bytes are UTF-8 text (checked while decoding).
fn text(row: &MySqlRow, c: &str) -> Result<String> {
    Ok(row.try_get_unchecked::<String, _>(c)?)
}

fn text_opt(row: &MySqlRow, c: &str) -> Result<Option<String>> {
    Ok(row.try_get_unchecked::<Option<String>, _>(c)?)
}

/// Parses `VERSION()`: MariaDB's "10.11.19-MariaDB-0+deb12u1", MySQL's "8.0.36".
fn version_ok(v: &str) -> std::result::Result<(), String> {
    let maria = v.to_ascii_lowercase().contains("mariadb");
    let mut nums = v
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<u32>().unwrap_or(0));
    let found = (nums.next().unwrap_or(0), nums.next().unwrap_or(0));
    let (name, need) = if maria {
        ("MariaDB", MIN_MARIADB)
    } else {
        ("MySQL", MIN_MYSQL)
    };
    if found < need {
        return Err(format!(
            "{name} {v} is too old: docket needs {name} {}.{} or later (FOR UPDATE SKIP LOCKED)",
            need.0, need.1
        ));
    }
    Ok(())
}

impl MySqlStore {
    /// Connects to `mysql://user:pass@host:port/db` (or `mariadb://…`) and checks the server's
    /// version.
    ///
    /// # Errors
    /// Bad URL, connection refused, wrong password ([`StoreError::Database`]); a server older
    /// than MySQL 8.0 / MariaDB 10.6 ([`StoreError::Invalid`], naming both versions).
    pub async fn connect(opts: &ConnectOptions) -> Result<Self> {
        if opts.schema.is_some() {
            return Err(StoreError::Invalid(
                "a schema is PostgreSQL's: on MySQL/MariaDB name the database in the URL \
                 (mysql://user@host:3306/db)"
                    .into(),
            ));
        }
        let all = match opts.url.strip_prefix("mariadb://") {
            Some(rest) => format!("mysql://{rest}"),
            None => opts.url.clone(),
        };
        // Several hosts (a Galera cluster's nodes): the first that takes writes, and a watcher
        // that moves the pool on when it stops (crate::failover).
        let hosts = crate::failover::Hosts::open(&all, Self::options, &Self::probe).await?;
        let url = hosts.urls[hosts.current()].clone();
        let base = hosts.options[hosts.current()].clone();
        // One connection first: a refused connection or a wrong password is reported as it
        // is, at once (the pool would retry until its acquire timeout and say only that), and
        // the version is checked before anything is created.
        // A database that does not exist yet is created (as SQLite creates its file and
        // PostgreSQL its schema), so `--database mysql://…/docket` works on a fresh server.
        let mut first = match sqlx::MySqlConnection::connect_with(&base).await {
            Err(sqlx::Error::Database(d))
                if d.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                    .map(|e| e.number())
                    == Some(1049) =>
            {
                let db = base.get_database().unwrap_or_default().to_string();
                Self::admin(
                    &url,
                    &db,
                    "CREATE DATABASE IF NOT EXISTS `{db}` CHARACTER SET utf8mb4",
                )
                .await?;
                sqlx::MySqlConnection::connect_with(&base).await?
            }
            r => r?,
        };
        let v: String = sqlx::query("SELECT VERSION() AS v")
            .fetch_one(&mut first)
            .await
            .map_err(StoreError::from)
            .and_then(|r| text(&r, "v"))?;
        // MariaDB Galera (wsrep_on): a node applies other nodes' commits a moment after they
        // were certified, so a read there could miss a write another docket node just made
        // through another Galera node (a batch it created, a task it enqueued). Each read waits
        // until this node has applied what the cluster committed before it (wsrep_sync_wait=1);
        // decisions are safe without it (they are guarded by writes certification checks).
        let galera = sqlx::query("SHOW VARIABLES LIKE 'wsrep_on'")
            .fetch_optional(&mut first)
            .await?
            .map(|r| text(&r, "Value"))
            .transpose()?
            .is_some_and(|v| v.eq_ignore_ascii_case("on"));
        let _ = sqlx::Connection::close(first).await;
        version_ok(&v).map_err(StoreError::Invalid)?;
        let pool = crate::driver::pool_options::<sqlx::MySql>(hosts.switch.clone())
            .max_connections(opts.max_connections.unwrap_or(10))
            .acquire_timeout(Duration::from_secs(10))
            .after_connect(move |conn, _| {
                Box::pin(async move {
                    conn.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
                        .await?;
                    if galera {
                        conn.execute("SET SESSION wsrep_sync_wait = 1").await?;
                        // See MySqlStore::begin: every statement runs in a transaction this
                        // store ends, so one the server rolled back without a word is never
                        // followed by statements committed one by one.
                        conn.execute("SET SESSION autocommit = 0").await?;
                        conn.execute(sql!(galera, tx_alive_table)).await?;
                    }
                    Ok(())
                })
            })
            .connect_with(base)
            .await?;
        let mut tx = pool.begin().await?;
        let r = sqlx::query(sql!(tasks, id_settings))
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        let (mode, inc): (i64, i64) = (r.try_get("m")?, r.try_get("i")?);
        let consecutive_ids = (mode <= 1 && inc >= 1).then_some(inc);
        if let Some(switch) = hosts.switch {
            let (apply_to, closed, options) = (pool.clone(), pool.clone(), hosts.options);
            crate::failover::watch(
                hosts.urls,
                switch,
                Self::probe,
                move |i| apply_to.set_connect_options(options[i].clone()),
                move || closed.is_closed(),
            );
        }
        let wake = crate::local_wake::LocalWake::default();
        Ok(MySqlStore {
            pool,
            consecutive_ids,
            wake,
            galera,
        })
    }

    /// The connection options of one host's URL.
    fn options(url: &str) -> Result<MySqlConnectOptions> {
        Ok(MySqlConnectOptions::from_str(url)?
            .charset("utf8mb4")
            .timezone(Some("+00:00".to_string())))
    }

    /// Whether the host of `url` takes writes now: not `read_only` (a replica), and on Galera
    /// in the primary component (a node cut off from it still answers `SELECT 1`, but refuses
    /// every table, 1047).
    async fn probe(url: String) -> Result<()> {
        // The server, not the database: a database not created yet is created on the host
        // chosen.
        let server = Self::url_with_database(&url, "");
        let mut c = sqlx::MySqlConnection::connect_with(&Self::options(&server)?).await?;
        let read_only: i64 = sqlx::query_scalar("SELECT @@read_only")
            .fetch_one(&mut c)
            .await?;
        let cluster = sqlx::query("SHOW STATUS LIKE 'wsrep_cluster_status'")
            .fetch_optional(&mut c)
            .await?
            .map(|r| text(&r, "Value"))
            .transpose()?;
        let _ = sqlx::Connection::close(c).await;
        let why = if read_only != 0 {
            "read_only"
        } else if cluster.as_deref().is_some_and(|s| s != "Primary") {
            "a Galera node outside the primary component"
        } else {
            return Ok(());
        };
        Err(StoreError::Database {
            kind: DbErrorKind::Unavailable,
            message: format!("{why}: it takes no writes"),
        })
    }

    /// `url` (`mysql://…/db?opts`) naming database `db` instead.
    pub fn url_with_database(url: &str, db: &str) -> String {
        let (head, tail) = url.split_at(url.find('?').unwrap_or(url.len()));
        let scheme = head.find("://").map_or(0, |i| i + 3);
        let server = match head[scheme..].find('/') {
            Some(i) => &head[..scheme + i],
            None => head,
        };
        format!("{server}/{db}{tail}")
    }

    /// Creates database `db` (utf8mb4) on the server of `url`, for benchmarks and tests; returns
    /// its URL.
    ///
    /// # Errors
    /// The server cannot be reached or refuses; `db` is not `[A-Za-z0-9_]+`.
    pub async fn create_database(url: &str, db: &str) -> Result<String> {
        Self::admin(
            url,
            db,
            "CREATE DATABASE IF NOT EXISTS `{db}` CHARACTER SET utf8mb4",
        )
        .await?;
        Ok(Self::url_with_database(url, db))
    }

    /// Drops database `db` on the server of `url` if it exists.
    ///
    /// # Errors
    /// As [`MySqlStore::create_database`].
    pub async fn drop_database(url: &str, db: &str) -> Result<()> {
        Self::admin(url, db, "DROP DATABASE IF EXISTS `{db}`").await
    }

    async fn admin(url: &str, db: &str, sql: &str) -> Result<()> {
        if db.is_empty() || !db.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(StoreError::Invalid(format!("bad database name {db:?}")));
        }
        let url = url.replacen("mariadb://", "mysql://", 1);
        // With several hosts, through the first (a database made there is everyone's).
        let url = crate::failover::hosts(&url)?.swap_remove(0);
        let mut c = sqlx::MySqlConnection::connect(&Self::url_with_database(&url, "")).await?;
        sqlx::query(&sql.replace("{db}", db))
            .execute(&mut c)
            .await?;
        let _ = c.close().await;
        Ok(())
    }

    fn wake_queues<'a>(&self, queues: impl IntoIterator<Item = &'a String>) {
        self.wake.queues(queues);
    }

    /// A transaction; on Galera one whose commit ([`MySqlStore::commit`]) first checks it was
    /// not lost meanwhile.
    ///
    /// Why: MariaDB Galera (seen on 10.11.19 through sqlx) can roll back a transaction that a
    /// conflicting write of another node aborts (a brute-force abort) without telling the
    /// client: the statements after it ran one by one in autocommit and `COMMIT` answered OK —
    /// a claim was answered with tasks another node's claim then held, and another claim's
    /// tasks were left running under a claim its caller never got (docket-engine's tests
    /// `two_nodes_claim_each_task_once`, about 1 run in 5, and
    /// `concurrent_fair_claims_on_two_nodes`, 1 in 15). So on Galera every connection runs
    /// with `autocommit = 0` (statements after such an abort wait in a new transaction instead
    /// of committing), lone statements run in transactions too ([`MySqlStore::lone`]), and each
    /// transaction that writes starts with a row in the connection's temporary table
    /// `docket_tx_alive` (not replicated), rolled back with the transaction if it is aborted:
    /// the commit deletes it first and goes on only when it was there.
    async fn begin(&self) -> Result<Transaction<'static, MySql>> {
        self.begin_guarded(self.galera).await
    }

    /// A transaction, with the row [`MySqlStore::alive`] checks when `guarded`.
    async fn begin_guarded(&self, guarded: bool) -> Result<Transaction<'static, MySql>> {
        let mut tx = self.pool.begin().await?;
        if guarded {
            sqlx::query(sql!(galera, tx_alive_mark))
                .execute(&mut *tx)
                .await?;
        }
        Ok(tx)
    }

    /// Commits a transaction of [`MySqlStore::begin`].
    ///
    /// # Errors
    /// The database failed, or (Galera) the transaction was aborted meanwhile: a retryable
    /// error, and nothing of it is kept (the caller's retry runs it whole again).
    async fn commit(&self, tx: Transaction<'static, MySql>) -> Result<()> {
        Self::commit_guarded(tx, self.galera).await
    }

    /// Commits `tx`, first checking [`MySqlStore::alive`] when it was begun `guarded`.
    async fn commit_guarded(mut tx: Transaction<'static, MySql>, guarded: bool) -> Result<()> {
        if guarded {
            Self::alive(&mut tx).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// A lone statement's transaction on Galera (where connections do not autocommit): a read
    /// (`SELECT`, `WITH`) takes no lock a brute-force abort could break, so it is not guarded.
    fn lone_guarded(text: &str) -> bool {
        let head = text.trim_start().get(..6).unwrap_or("");
        !(head.eq_ignore_ascii_case("select")
            || head
                .get(..4)
                .is_some_and(|h| h.eq_ignore_ascii_case("with")))
    }

    /// Deletes the row [`MySqlStore::begin`] wrote: a retryable error when it was gone, i.e.
    /// the transaction begun was rolled back and what ran since ran outside it (dropping `tx`
    /// rolls that back).
    async fn alive(tx: &mut sqlx::MySqlConnection) -> Result<()> {
        let n = sqlx::query(sql!(galera, tx_alive_check))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if n == 1 {
            Ok(())
        } else {
            Err(StoreError::Database {
                kind: crate::DbErrorKind::Retryable,
                message: "the transaction was aborted by a conflicting write of another Galera \
                          node without an error (wsrep brute-force abort)"
                    .into(),
            })
        }
    }

    /// Holds the lock row `name` until the transaction ends (PostgreSQL:
    /// `pg_advisory_xact_lock`). Callers take several in sorted order. The row is changed, not
    /// only locked: on MariaDB Galera only a write is certified across nodes, so two nodes
    /// taking the same lock conflict and one of them goes again (mysql 0015).
    async fn lock(tx: &mut sqlx::MySqlConnection, name: &str) -> Result<()> {
        sqlx::query("INSERT INTO docket_locks (name) VALUES (?) ON DUPLICATE KEY UPDATE n = n + 1")
            .bind(name)
            .execute(&mut *tx)
            .await?;
        Ok(())
    }

    /// Inserts one task; `None` when its unique_key is held by an unfinished task (InnoDB
    /// rolls back only the refused statement, not the transaction).
    async fn insert_row(
        tx: &mut sqlx::MySqlConnection,
        t: &ResolvedTask,
        now: Timestamp,
    ) -> Result<Option<i64>> {
        let r = sqlx::query(sql!(tasks, insert))
            .bind(&t.queue)
            .bind(&t.kind)
            .bind(t.payload.to_string())
            .bind(t.priority)
            .bind(t.state.as_str())
            .bind(dt(t.run_at))
            .bind(dt(t.expires_at))
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
            .bind(dt(now))
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
            .execute(&mut *tx)
            .await;
        match r {
            Ok(r) => Ok(Some(r.last_insert_id() as i64)),
            Err(sqlx::Error::Database(d)) if d.is_unique_violation() => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes the tags of tasks just inserted into the side table `docket_task_tags`
    /// (mysql 0018: no trigger does it); no statement when none of them has tags.
    ///
    /// # Errors
    /// The database failed.
    pub(super) async fn tag(
        tx: &mut sqlx::MySqlConnection,
        tasks: impl IntoIterator<Item = (i64, &[String])>,
    ) -> Result<()> {
        let tagged: Vec<Value> = tasks
            .into_iter()
            .filter(|(_, tags)| !tags.is_empty())
            .map(|(id, tags)| serde_json::json!({"id": id, "tags": tags}))
            .collect();
        if tagged.is_empty() {
            return Ok(());
        }
        sqlx::query(sql!(tasks, tags_add_many))
            .bind(Value::from(tagged).to_string())
            .execute(&mut *tx)
            .await?;
        Ok(())
    }

    /// Deletes the side-table rows (tags, a debounce key's waiting task) of tasks `ids`, just
    /// deleted from both task tables (mysql 0018: no trigger does it).
    ///
    /// # Errors
    /// The database failed.
    pub(super) async fn forget(tx: &mut sqlx::MySqlConnection, ids: &[i64]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        for sql in [sql!(tasks, forget_tags), sql!(tasks, forget_debounce)] {
            let sql = fill(sql, &[("ids", &marks(ids.len()))]);
            let mut q = sqlx::query(&sql);
            for id in ids {
                q = q.bind(id);
            }
            q.execute(&mut *tx).await?;
        }
        Ok(())
    }

    /// Inserts tasks without a unique key in one statement; their ids, in order, are
    /// `LAST_INSERT_ID() + i × increment` (only called when `consecutive_ids` says so).
    async fn insert_batch(
        tx: &mut sqlx::MySqlConnection,
        tasks: &[&ResolvedTask],
        now: Timestamp,
        increment: i64,
    ) -> Result<Vec<i64>> {
        if tasks.is_empty() {
            return Ok(vec![]);
        }
        let sql = fill(
            sql!(tasks, insert_many),
            &[(
                "rows",
                &vec![sql!(tasks, insert_values); tasks.len()].join(", "),
            )],
        );
        let mut q = sqlx::query(&sql);
        for t in tasks {
            q = q
                .bind(&t.queue)
                .bind(&t.kind)
                .bind(t.payload.to_string())
                .bind(t.priority)
                .bind(t.state.as_str())
                .bind(dt(t.run_at))
                .bind(dt(t.expires_at))
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
                .bind(dt(now))
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
                .bind(crate::row::affinity_json(t.affinity.as_ref()).map(|v| v.to_string()));
        }
        let r = q.execute(&mut *tx).await?;
        let first = r.last_insert_id() as i64;
        if r.rows_affected() != tasks.len() as u64 {
            return Err(StoreError::Corrupt(format!(
                "a batch insert of {} tasks wrote {}",
                tasks.len(),
                r.rows_affected()
            )));
        }
        Ok((0..tasks.len() as i64)
            .map(|i| first + i * increment)
            .collect())
    }

    /// Writes notifications of one process in the current transaction. The lock row makes
    /// `seq` order commit order, so a reader never passes a seq that commits later.
    async fn publish(
        tx: &mut sqlx::MySqlConnection,
        namespace: &str,
        id: &str,
        notices: &[Notice],
        now: Timestamp,
    ) -> Result<()> {
        if notices.is_empty() {
            return Ok(());
        }
        Self::lock(tx, "docket-notifications").await?;
        for n in notices {
            sqlx::query(sql!(notifications, publish))
                .bind(namespace)
                .bind(id)
                .bind(n.kind())
                .bind(n.event_id())
                .bind(n.data().to_string())
                .bind(dt(now))
                .execute(&mut *tx)
                .await?;
        }
        Ok(())
    }

    /// A task and its lease token, read without locks where it is: `docket_tasks` or, finished
    /// and moved, `docket_tasks_done` (0004).
    async fn get_in(
        tx: &mut sqlx::MySqlConnection,
        id: i64,
    ) -> Result<Option<(Task, Option<u128>)>> {
        let mut row = sqlx::query(sql!(tasks, get_live))
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        if row.is_none() {
            row = sqlx::query(sql!(tasks, get_done))
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
        }
        row.map(|r| Ok((decode(&r)?, r.nonce("lease_token")?)))
            .transpose()
    }

    /// Moves these tasks, where they are in `docket_tasks_done`, back to `docket_tasks`
    /// (locking them there), for a change to a finished task: retry, cancel, update.
    pub(super) async fn unarchive(tx: &mut sqlx::MySqlConnection, ids: &[i64]) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        // The live rows first: a rotation moving one of them now holds it, and this waits for
        // the move to commit, after which the task is in docket_tasks_done for sure. A look
        // there first missed a task whose move had not committed yet: a PATCH of a
        // just-finished task answered 404 instead of 409, a retry of a discarded one
        // "cannot be retried" (tests/archive_race.rs).
        let live = fill(sql!(tasks, lock_live), &[("ids", &marks(ids.len()))]);
        let mut q = sqlx::query(&live);
        for id in ids {
            q = q.bind(id);
        }
        q.execute(&mut *tx).await?;
        let sql = fill(sql!(tasks, lock_done), &[("ids", &marks(ids.len()))]);
        let mut q = sqlx::query_scalar::<_, i64>(&sql);
        for id in ids {
            q = q.bind(id);
        }
        let found = q.fetch_all(&mut *tx).await?;
        if found.is_empty() {
            return Ok(());
        }
        let m = marks(found.len());
        for sql in [sql!(tasks, unarchive), sql!(tasks, delete_done)] {
            let sql = fill(sql, &[("ids", &m)]);
            let mut q = sqlx::query(&sql);
            for id in &found {
                q = q.bind(id);
            }
            q.execute(&mut *tx).await?;
        }
        Ok(())
    }
}

#[async_trait]
impl Store for MySqlStore {
    fn backend(&self) -> Backend {
        Backend::MySql
    }

    fn supports_listen_notify(&self) -> bool {
        false
    }

    async fn migrate(&self) -> Result<()> {
        // sqlx's own lock asks GET_LOCK(name, -1), which MariaDB answers with NULL and no lock:
        // nodes started together on a fresh database then each applied 0001 (1062 on
        // _sqlx_migrations). GET_LOCK is also one server's: on Galera two nodes migrating
        // through different database nodes both got it. Our lock is a row of its own table,
        // taken by a write (certified cluster-wide), held at most 10 minutes.
        let mut conn = self.pool.acquire().await?;
        if self.galera {
            // Its statements and sqlx's migrator commit as they go (the lock must be seen by
            // the other nodes at once); the connection is not handed out again with it.
            sqlx::query("SET SESSION autocommit = 1")
                .execute(&mut *conn)
                .await?;
            conn.close_on_drop();
        }
        let me = uuid::Uuid::new_v4().simple().to_string();
        sqlx::query(MIGRATE_LOCK_TABLE).execute(&mut *conn).await?;
        let give_up = std::time::Instant::now() + Duration::from_secs(600);
        loop {
            match sqlx::query(MIGRATE_LOCK)
                .bind(&me)
                .execute(&mut *conn)
                .await
                .map_err(StoreError::from)
            {
                // Another node took it at the same moment (a certification conflict).
                Err(e) if e.db_kind() == Some(DbErrorKind::Retryable) => {}
                r => {
                    r?;
                }
            }
            let holder: Option<String> = sqlx::query_scalar(MIGRATE_LOCK_HOLDER)
                .fetch_optional(&mut *conn)
                .await?;
            if holder.as_deref() == Some(me.as_str()) {
                break;
            }
            if std::time::Instant::now() > give_up {
                return Err(StoreError::Migrate(
                    "another node held the migration lock for 10 minutes".into(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let mut m = sqlx::migrate!("./migrations/mysql");
        m.set_locking(false);
        let r = m.run_direct(&mut *conn).await;
        sqlx::query(MIGRATE_UNLOCK)
            .bind(&me)
            .execute(&mut *conn)
            .await?;
        r?;
        Ok(())
    }

    fn pool_connections(&self) -> PoolStats {
        let idle = self.pool.num_idle();
        let size = self.pool.size() as usize;
        PoolStats {
            in_use: size - idle.min(size),
            idle,
        }
    }

    async fn close(&self) {
        self.pool.close().await;
    }
}

/// The migration lock of this database: its one row names the holder until `until`; a holder
/// that died is replaced once its 10 minutes are over.
const MIGRATE_LOCK_TABLE: &str = "CREATE TABLE IF NOT EXISTS docket_migrate_lock (id TINYINT NOT NULL PRIMARY KEY, holder CHAR(32) NOT NULL, until DATETIME(6) NOT NULL)";
const MIGRATE_LOCK: &str = "INSERT INTO docket_migrate_lock (id, holder, until) VALUES (1, ?, NOW(6) + INTERVAL 600 SECOND) ON DUPLICATE KEY UPDATE holder = IF(until < NOW(6), VALUES(holder), holder), until = IF(until < NOW(6), VALUES(until), until)";
const MIGRATE_LOCK_HOLDER: &str = "SELECT holder FROM docket_migrate_lock WHERE id = 1";
const MIGRATE_UNLOCK: &str = "DELETE FROM docket_migrate_lock WHERE id = 1 AND holder = ?";

crate::sql::statements!("mysql": audit, batches, fragments, galera, leases, maintenance, nodes, notifications, processes, queues, rate_limits, runs, schedules, tasks, tokens);

#[async_trait]
impl crate::driver::Driver for MySqlStore {
    type Row = MySqlRow;
    type Tx = MySqlTx;

    fn contended_tries(&self) -> u32 {
        if self.galera {
            30
        } else {
            10
        }
    }

    async fn begin(&self) -> Result<MySqlTx> {
        let mut tx = LocalTx::new(MySqlStore::begin(self).await?, &self.wake);
        tx.guarded = self.galera;
        Ok(tx)
    }

    // A lone statement is its own transaction, rolled back whole when it fails: going again on
    // a deadlock or a certification conflict (Galera: a heartbeat's upsert meeting a drain of
    // the same node row through another node, 1213 even with wsrep_retry_autocommit) is safe.
    fn stmt(s: StmtName) -> &'static crate::sql::Stmt {
        STATEMENTS.stmt(s.0, s.1)
    }

    async fn fetch_stmt(&self, st: &crate::sql::Stmt, args: &[Arg<'_>]) -> Result<Vec<MySqlRow>> {
        let (text, args) = expand(st, args);
        let (text, args) = (&text, &args);
        crate::driver::again(|| async move {
            if !self.galera {
                return Ok(bind(sqlx::query(text), args).fetch_all(&self.pool).await?);
            }
            let guarded = Self::lone_guarded(text);
            let mut tx = self.begin_guarded(guarded).await?;
            let rows = bind(sqlx::query(text), args).fetch_all(&mut *tx).await?;
            Self::commit_guarded(tx, guarded).await?;
            Ok(rows)
        })
        .await
    }

    async fn execute_stmt(&self, st: &crate::sql::Stmt, args: &[Arg<'_>]) -> Result<u64> {
        let (text, args) = expand(st, args);
        let (text, args) = (&text, &args);
        crate::driver::again(|| async move {
            if !self.galera {
                return Ok(bind(sqlx::query(text), args)
                    .execute(&self.pool)
                    .await?
                    .rows_affected());
            }
            let guarded = Self::lone_guarded(text);
            let mut tx = self.begin_guarded(guarded).await?;
            let n = bind(sqlx::query(text), args)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            Self::commit_guarded(tx, guarded).await?;
            Ok(n)
        })
        .await
    }

    async fn execute_text(&self, s: StmtName) -> Result<()> {
        let st = STATEMENTS.stmt(s.0, s.1);
        // DDL (a trigger): it commits itself, before and after, also where connections do
        // not autocommit (Galera: MySqlStore::begin).
        sqlx::raw_sql(&st.text).execute(&self.pool).await?;
        Ok(())
    }
}

/// A MySQL transaction of the portable store code ([`crate::driver::DriverTx`]), and the queues to
/// wake after the commit.
pub(crate) type MySqlTx = LocalTx<MySql>;

#[async_trait]
impl crate::driver::DriverTx for MySqlTx {
    type Row = MySqlRow;

    async fn unarchive(&mut self, ids: &[i64]) -> Result<()> {
        MySqlStore::unarchive(&mut self.tx, ids).await
    }

    async fn retag(&mut self, id: i64, tags: &[String]) -> Result<()> {
        use crate::driver::{args, stmt};
        self.execute(stmt!(tasks, tags_clear), args![id]).await?;
        if let Some(v) = crate::row::tags_json(tags) {
            self.execute(stmt!(tasks, tags_add), args![id, &v]).await?;
        }
        Ok(())
    }

    async fn forget(&mut self, ids: &[i64]) -> Result<()> {
        MySqlStore::forget(&mut self.tx, ids).await
    }

    async fn debounce_own(&mut self, id: i64, key: &str) -> Result<()> {
        use crate::driver::{args, stmt};
        let Some(row) = self
            .fetch_one(stmt!(tasks, debounce_own_lock), args![key])
            .await?
        else {
            // A rival's add of the key, committed first, is a unique violation: a conflict.
            self.execute(stmt!(tasks, debounce_own_add), args![key, id])
                .await?;
            return Ok(());
        };
        if row.int("waiting")? != 0 {
            return Err(crate::StoreError::Conflict(format!(
                "task {} waits with the debounce key",
                row.int("task_id")?
            )));
        }
        self.execute(stmt!(tasks, debounce_own_move), args![key, id])
            .await?;
        Ok(())
    }

    async fn fetch_archived(&mut self, ids: &[i64]) -> Result<Vec<MySqlRow>> {
        self.fetch(
            crate::driver::stmt!(leases, archived),
            crate::driver::args![ids],
        )
        .await
    }

    async fn lock(&mut self, name: &str) -> Result<()> {
        MySqlStore::lock(&mut self.tx, name).await
    }

    async fn change_task(
        &mut self,
        s: StmtName,
        args: &[Arg<'_>],
        id: i64,
    ) -> Result<Option<MySqlRow>> {
        // No RETURNING: the change locked the row, read it back (the connection reports the
        // rows matched, CLIENT_FOUND_ROWS, so a change to the same values still counts).
        if self.execute(s, args).await? == 0 {
            return Ok(None);
        }
        self.fetch_one(crate::driver::stmt!(tasks, get), crate::driver::args![id])
            .await
    }

    async fn fetch(&mut self, s: StmtName, args: &[Arg<'_>]) -> Result<Vec<MySqlRow>> {
        let (text, args) = expand(MySqlStore::stmt(s), args);
        Ok(bind(sqlx::query(&text), &args)
            .fetch_all(&mut *self.tx)
            .await?)
    }

    async fn execute(&mut self, s: StmtName, args: &[Arg<'_>]) -> Result<u64> {
        let (text, args) = expand(MySqlStore::stmt(s), args);
        Ok(bind(sqlx::query(&text), &args)
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
        MySqlStore::publish(&mut self.tx, namespace, id, notices, now).await
    }

    async fn insert_task(&mut self, t: &ResolvedTask, now: Timestamp) -> Result<Option<Task>> {
        let Some(id) = MySqlStore::insert_row(&mut self.tx, t, now).await? else {
            return Ok(None);
        };
        MySqlStore::tag(&mut self.tx, [(id, t.tags.as_slice())]).await?;
        let task = MySqlStore::get_in(&mut self.tx, id).await?;
        Ok(task.map(|(mut task, _)| {
            task.inserted = Some(true);
            if task.state == TaskState::Available {
                self.wake_after([&task.queue]);
            }
            task
        }))
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

    async fn detach_archived(&mut self, key: &str) -> Result<()> {
        self.execute(stmt!(processes, detach_finished_done), args![key])
            .await?;
        Ok(())
    }

    async fn commit(mut self) -> Result<()> {
        if self.guarded {
            MySqlStore::alive(&mut self.tx).await?;
        }
        self.commit_and_wake().await
    }
}

/// The text of `st` and its arguments in the order its `?` take them
/// ([`crate::sql::Stmt::order`]), each list argument's `?` made one `?` per element (`NULL`
/// for an empty list: `IN (NULL)` holds nothing), as the `IN (…)` lists MySQL is fastest with.
fn expand<'s, 'a>(
    st: &'s crate::sql::Stmt,
    args: &[Arg<'a>],
) -> (std::borrow::Cow<'s, str>, Vec<Arg<'a>>) {
    let ordered: Vec<Arg<'a>> = crate::driver::ordered(st, args).collect();
    if ordered.iter().all(|a| a.elements().is_none()) {
        return (std::borrow::Cow::Borrowed(&st.text), ordered);
    }
    let mut text = String::with_capacity(st.text.len() + 64);
    let mut out = Vec::with_capacity(ordered.len());
    let mut parts = st.text.split('?');
    text.push_str(parts.next().unwrap_or_default());
    for (a, part) in ordered.into_iter().zip(parts) {
        match a.elements() {
            Some(e) if e.is_empty() => text.push_str("NULL"),
            Some(e) => {
                text.push_str(&marks(e.len()));
                out.extend(e);
            }
            None => {
                text.push('?');
                out.push(a);
            }
        }
        text.push_str(part);
    }
    (std::borrow::Cow::Owned(text), out)
}

/// Binds [`Arg`]s (as [`expand`] ordered them) as MySQL keeps them: `DATETIME(6)` in UTC,
/// JSON as text, a nonce as hex.
fn bind<'q>(
    mut q: sqlx::query::Query<'q, MySql, sqlx::mysql::MySqlArguments>,
    args: &[Arg<'q>],
) -> sqlx::query::Query<'q, MySql, sqlx::mysql::MySqlArguments> {
    for a in args {
        q = match *a {
            Arg::Text(v) => q.bind(v),
            Arg::Int(v) => q.bind(v),
            Arg::Int32(v) => q.bind(v),
            Arg::Float(v) => q.bind(v),
            Arg::Bool(v) => q.bind(v),
            Arg::Time(v) => q.bind(dt(v)),
            Arg::Json(v) => q.bind(v.map(Value::to_string)),
            Arg::Nonce(v) => q.bind(v.map(lease::nonce_hex)),
            Arg::Ints(_) | Arg::Texts(_) | Arg::Times(_) | Arg::Nonces(_) | Arg::Jsons(_) => {
                unreachable!("expanded")
            }
        };
    }
    q
}

/// MySQL keeps JSON as text (read unchecked, see [`text`]), times as `DATETIME(6)` in UTC and a
/// lease token's nonce as 32 hex digits.
impl Cols for MySqlRow {
    fn text(&self, c: &str) -> Result<String> {
        text(self, c)
    }
    fn text_opt(&self, c: &str) -> Result<Option<String>> {
        text_opt(self, c)
    }
    crate::row::try_get_cols!(
        int: i64,
        int_opt: Option<i64>,
        int32: i32,
        int32_opt: Option<i32>,
        float: f64,
    );
    fn flag(&self, c: &str) -> Result<bool> {
        // A BOOLEAN column is TINYINT(1); a test in the select list (`x IS NOT NULL`) a BIGINT.
        match self.try_get::<bool, _>(c) {
            Ok(b) => Ok(b),
            Err(_) => Ok(self.try_get::<i64, _>(c)? != 0),
        }
    }
    crate::row::try_get_cols!(time: Timestamp, time_opt: Option<Timestamp>);
    fn json(&self, c: &str) -> Result<Value> {
        parse_json(c, &text(self, c)?)
    }
    fn json_opt(&self, c: &str) -> Result<Option<Value>> {
        text_opt(self, c)?.map(|s| parse_json(c, &s)).transpose()
    }
    fn nonce(&self, c: &str) -> Result<Option<u128>> {
        Ok(text_opt(self, c)?
            .as_deref()
            .and_then(docket_core::lease::nonce_from_hex))
    }
}

/// MySQL has no `RETURNING`: a completion locks and checks in Rust, and reads again.
impl crate::driver::LeaseDriver for MySqlStore {
    fn returning(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store on a new database of `DOCKET_TEST_MYSQL_URL`'s server, migrated.
    async fn fresh() -> MySqlStore {
        let url = std::env::var("DOCKET_TEST_MYSQL_URL")
            .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into());
        let db = format!("t_{}", uuid::Uuid::new_v4().simple());
        let url = MySqlStore::create_database(&url, &db).await.unwrap();
        let store = MySqlStore::connect(&ConnectOptions {
            url,
            schema: None,
            max_connections: Some(2),
            strict_commit: false,
        })
        .await
        .unwrap();
        Store::migrate(&store).await.unwrap();
        store
    }

    /// Galera's silent brute-force abort (see `MySqlStore::begin`), played by a `ROLLBACK` the
    /// transaction's owner does not know of: the statement after it must not commit on its own,
    /// and the commit must refuse (retryable) and keep nothing. Runs where
    /// `DOCKET_TEST_MYSQL_URL` is a Galera node (scripts/test.sh's Galera pass); on one MariaDB
    /// it checks that nothing of this is done there.
    #[tokio::test]
    async fn galera_commit_refuses_a_transaction_lost_without_a_word() {
        let store = fresh().await;
        let mut tx = store.begin().await.unwrap();
        sqlx::query("ROLLBACK").execute(&mut *tx).await.unwrap();
        sqlx::query("INSERT INTO docket_locks (name) VALUES ('after-the-abort')")
            .execute(&mut *tx)
            .await
            .unwrap();
        let r = store.commit(tx).await;
        let kept: i64 =
            sqlx::query_scalar("SELECT count(*) FROM docket_locks WHERE name = 'after-the-abort'")
                .fetch_one(&mut *store.pool.begin().await.unwrap())
                .await
                .unwrap();
        if store.galera {
            assert!(
                matches!(&r, Err(e) if e.db_kind() == Some(DbErrorKind::Retryable)),
                "{r:?}"
            );
            assert_eq!(kept, 0, "a statement after the abort committed on its own");
        } else {
            eprintln!("not a Galera node: the guard is off");
            assert!(r.is_ok(), "{r:?}");
            assert_eq!(kept, 1);
        }
        store.pool.close().await;
    }

    /// The statements given a JSON list of ids find each row by its key: on tables of 10,000
    /// rows, EXPLAIN shows no full scan but of the list itself. (MariaDB 10.11 runs a
    /// single-table DELETE's or UPDATE's `id IN (SELECT … JSON_TABLE)` per row of a full scan:
    /// an operator's delete, a worker's release and every delivered batch of a sink read every
    /// row.)
    #[tokio::test]
    async fn id_lists_use_the_key() {
        let store = fresh().await;
        let mut c = store.pool.acquire().await.unwrap();
        let digits = "(SELECT 0 n UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 \
            UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 \
            UNION ALL SELECT 8 UNION ALL SELECT 9)";
        let rows = format!(
            "SELECT a.n + 10 * b.n + 100 * c.n + 1000 * d.n + 1 AS i \
             FROM {digits} a, {digits} b, {digits} c, {digits} d"
        );
        sqlx::raw_sql(&format!(
            "INSERT INTO docket_tasks (queue, kind, payload, priority, state, run_at, errors, \
                created_at) SELECT 'q', 'k', '{{}}', 0, 'running', NOW(6), '[]', NOW(6) \
                FROM ({rows}) r; \
             INSERT INTO docket_task_events (task_id, queue, kind, to_state, attempt, at) \
                SELECT i, 'q', 'k', 'running', 1, NOW(6) FROM ({rows}) r; \
             ANALYZE TABLE docket_tasks, docket_task_events"
        ))
        .execute(&mut *c)
        .await
        .unwrap();
        for sql in [
            sql!(tasks, delete),
            sql!(leases, release),
            sql!(notifications, task_event_delete),
        ] {
            let plan = sqlx::query(&format!("EXPLAIN {sql}"))
                .bind("[1, 2, 3]")
                .fetch_all(&mut *c)
                .await
                .unwrap();
            // Text or, by the server's collation, bytes.
            let col = |r: &MySqlRow, name: &str| -> String {
                match r.try_get::<Option<String>, _>(name) {
                    Ok(v) => v.unwrap_or_default(),
                    Err(_) => {
                        let v: Option<Vec<u8>> = r.try_get(name).unwrap();
                        String::from_utf8_lossy(&v.unwrap_or_default()).into_owned()
                    }
                }
            };
            let steps: Vec<(String, String, String)> = plan
                .iter()
                .map(|r| (col(r, "table"), col(r, "type"), col(r, "Extra")))
                .collect();
            assert!(
                steps
                    .iter()
                    .all(|(_, ty, extra)| ty != "ALL" || extra.contains("json_table")),
                "{sql}: {steps:?}"
            );
        }
        drop(c);
        store.pool.close().await;
    }

    #[test]
    fn versions() {
        assert!(version_ok("10.11.19-MariaDB-0+deb12u1").is_ok());
        assert!(version_ok("10.6.0-MariaDB").is_ok());
        assert!(version_ok("8.0.36").is_ok());
        assert!(version_ok("9.1.0").is_ok());
        let e = version_ok("10.5.23-MariaDB-log").unwrap_err();
        assert!(e.contains("MariaDB 10.5.23-MariaDB-log is too old"), "{e}");
        assert!(e.contains("10.6 or later"), "{e}");
        let e = version_ok("5.7.44").unwrap_err();
        assert!(
            e.contains("MySQL 5.7.44 is too old") && e.contains("8.0 or later"),
            "{e}"
        );
    }
}
