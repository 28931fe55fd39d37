//! PostgreSQL backend: `FOR UPDATE SKIP LOCKED` claims, batch statements over `unnest` arrays,
//! advisory locks for concurrency keys, LISTEN/NOTIFY wake-ups.

mod maintenance;
mod notifications;
mod tasks;

use crate::driver::{Arg, Driver as _, StmtName};
use crate::row::{task as decode, Cols};
use crate::{
    sql, Backend, ConnectOptions, DbErrorKind, PoolStats, Result, Store, StoreError,
    TaskClaimParams,
};
use async_trait::async_trait;
use docket_core::process::Notice;
use docket_core::task::ResolvedTask;
use docket_core::{Task, Timestamp};
use serde_json::Value;
use sqlx::postgres::{PgConnectOptions, PgListener, PgRow};
use sqlx::{ConnectOptions as _, Connection, PgPool, Postgres, Row, Transaction};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

/// The LISTEN/NOTIFY channel; payload `schema|queue`.
pub const CHANNEL: &str = "docket_available";
/// The channel of finished process steps; payload `schema|task id`.
pub const DONE_CHANNEL: &str = "docket_done";

/// Planner settings of the hot path's transactions (claims and completions), which address
/// tasks by the claim index's order or by id. The ring's slots (0021) have autovacuum, and so
/// auto-analyze, off, and are truncated every turn: the planner never knows how many tasks a
/// slot holds, and plans made when a slot was nearly empty (cached, or after a manual
/// `ANALYZE` saw it empty) read a whole slot where an index finds the rows. Measured: a claim
/// that sorted all 50,000 waiting tasks to take 1,000 (28 ms instead of 0.8 ms; `docket bench
/// --preload-finished 1000000 --settle` at 30–35k tasks/s instead of 57–59k), and a claim
/// `UPDATE … id = ANY(…)` that scanned a slot still full of a burst's dead rows (37–90 ms
/// each; 1M right after the preload at 20–43k instead of 54–57k). Without Sort and sequential
/// scans the plans are the ordered Merge Append of the slots' claim indexes and primary-key
/// lookups, whatever the statistics say.
pub const HOT_PATH_SETTINGS: &str = hot_path_settings!();

macro_rules! hot_path_settings {
    () => {
        "SET LOCAL enable_sort = off; SET LOCAL enable_seqscan = off"
    };
}
use hot_path_settings;

/// A PostgreSQL store.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    /// The claim statement's own connections, their session set up for it once (see
    /// [`CLAIM_POOL_SIZE`]).
    claim_pool: PgPool,
    schema: String,
    relaxed_commit: bool,
    /// Claims answered by `claim_fast` (see [`Store::claims_in_one_statement`]).
    claims_fast: Arc<std::sync::atomic::AtomicU64>,
}

/// Connections kept for claims, beside the main pool: each runs with [`HOT_PATH_SETTINGS`]
/// (and `synchronous_commit = off` unless strict) for its whole session, so a claim is one
/// statement in one round trip instead of a transaction of four (issue 24). Claims hold a
/// connection only while their statement runs (a long-poll waits without one).
pub const CLAIM_POOL_SIZE: u32 = 4;

fn ms(d: Duration) -> i64 {
    d.as_millis().min(i64::MAX as u128) as i64
}

/// How many times [`again`] runs an operation before handing its serialization failure on.
const MOVED_ROW_TRIES: u32 = 10;

/// Runs `op` again when PostgreSQL refused it with a serialization failure or deadlock (SQLSTATE
/// class 40). Since migration 0020 a task that finishes moves from `docket_tasks_live` to
/// `docket_tasks_done` (and back on a retry); a statement that locks or updates a row another
/// transaction moved after the statement's snapshot fails with 40001 ("tuple to be locked was
/// already moved to another partition due to concurrent update") where one table would have
/// re-read the row. Each try is one transaction, rolled back whole on the error, so going again
/// is safe, and the next try finds the row where it is now. Up to [`MOVED_ROW_TRIES`] tries.
async fn again<T, F, Fut>(mut op: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut tries = 1;
    loop {
        match op().await {
            Err(e) if e.db_kind() == Some(DbErrorKind::Retryable) && tries < MOVED_ROW_TRIES => {
                tries += 1;
            }
            r => return r,
        }
    }
}

/// Wakes the claimers of `queues` on every node when `tx` commits (NOTIFY; payload
/// `schema|queue`).
async fn notify_in(tx: &mut sqlx::PgConnection, schema: &str, queues: &[String]) -> Result<()> {
    if queues.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "SELECT pg_notify($1, $2 || '|' || q) FROM (SELECT DISTINCT unnest($3::text[]) AS q) s",
    )
    .bind(CHANNEL)
    .bind(schema)
    .bind(queues)
    .execute(tx)
    .await?;
    Ok(())
}

/// Locks `key` for the rest of the transaction: serialises concurrency-limit checks of one key
/// across every node without holding row locks on other tasks. Advisory locks are the
/// database's, not the schema's: the key is the schema's, so that docket deployments in other
/// schemas of one database neither wait on nor skip for each other.
/// Takes the advisory lock of `$1` in this schema (see [`lock_key`]).
pub(crate) const SCHEMA_LOCK: &str =
    "SELECT pg_advisory_xact_lock(hashtextextended(current_schema() || ':' || $1, 0))";

async fn lock_key(tx: &mut sqlx::PgConnection, key: &str) -> Result<()> {
    sqlx::query(SCHEMA_LOCK).bind(key).execute(tx).await?;
    Ok(())
}

impl PgStore {
    /// Connects (creating the schema when given and missing).
    ///
    /// # Errors
    /// Connection failure, bad URL.
    pub async fn connect(opts: &ConnectOptions) -> Result<Self> {
        let schema = opts.schema.clone().unwrap_or_else(|| "public".into());
        if schema.is_empty() || schema.contains('"') {
            return Err(StoreError::Invalid(format!("bad schema name {schema:?}")));
        }
        // Several hosts (a primary and its standbys): the first that takes writes, and a
        // watcher that moves the pools on when it stops — libpq's
        // target_session_attrs=read-write (crate::failover).
        let hosts = crate::failover::Hosts::open(&opts.url, Self::options, &Self::probe).await?;
        let base = hosts.options[hosts.current()].clone();
        if schema != "public" {
            let mut c = base.connect().await?;
            sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\""))
                .execute(&mut c)
                .await
                .or_else(|e| match &e {
                    // Two nodes creating the schema at once: the loser's error is harmless.
                    sqlx::Error::Database(d) if d.is_unique_violation() => Ok(Default::default()),
                    _ => Err(e),
                })?;
            c.close().await?;
        }
        // No JIT: docket's statements are short, and a plan the planner costs high (a fair
        // claim's skip scan and per-partition LATERAL, over 100,000 waiting tasks) is compiled
        // before it runs — 612 ms of JIT for a 12 ms fair claim with a custom plan, 12.8 s with
        // the generic one (EXPLAIN ANALYZE, PostgreSQL 15, jit_above_cost 100000). That was
        // what held fair claims to a few hundred tasks a second (issue 26 item 4).
        // No parallel workers either: starting them cost a queue-counts read 17 of its 25 ms at
        // 10 million finished tasks, for a range of a few rows the planner could not size (a
        // subquery's bound; EXPLAIN ANALYZE, issue 27), and they would take the cores claimers
        // need; the one big statement, the hourly recount, runs on one core.
        let commit = if opts.strict_commit { "on" } else { "off" };
        let sessions = |base: &PgConnectOptions| {
            let conn = base.clone().options([
                ("search_path", schema.as_str()),
                ("jit", "off"),
                ("max_parallel_workers_per_gather", "0"),
            ]);
            let claim = conn.clone().options([
                ("enable_sort", "off"),
                ("enable_seqscan", "off"),
                ("synchronous_commit", commit),
            ]);
            (conn, claim)
        };
        let (conn, claim_conn) = sessions(&base);
        let pool = crate::driver::pool_options::<Postgres>(hosts.switch.clone())
            .max_connections(opts.max_connections.unwrap_or(10))
            .connect_with(conn)
            .await?;
        let claim_pool = crate::driver::pool_options::<Postgres>(hosts.switch.clone())
            .max_connections(CLAIM_POOL_SIZE)
            .min_connections(0)
            .connect_lazy_with(claim_conn);
        if let Some(switch) = hosts.switch {
            let each: Vec<_> = hosts.options.iter().map(sessions).collect();
            let (to, closed) = ((pool.clone(), claim_pool.clone()), pool.clone());
            crate::failover::watch(
                hosts.urls,
                switch,
                Self::probe,
                move |i| {
                    to.0.set_connect_options(each[i].0.clone());
                    to.1.set_connect_options(each[i].1.clone());
                },
                move || closed.is_closed(),
            );
        }
        Ok(PgStore {
            pool,
            claim_pool,
            schema,
            relaxed_commit: !opts.strict_commit,
            claims_fast: Arc::default(),
        })
    }

    /// The connection options of one host's URL. TLS only when asked for
    /// (`sslmode=require|verify-ca|verify-full` in the URL, or PGSSLMODE): sqlx's default,
    /// `prefer`, would encrypt without checking anything and pay a handshake per connection.
    fn options(url: &str) -> Result<PgConnectOptions> {
        let mut o =
            PgConnectOptions::from_str(url)?.log_statements(tracing::log::LevelFilter::Debug);
        if !url.contains("sslmode=") && std::env::var_os("PGSSLMODE").is_none() {
            o = o.ssl_mode(sqlx::postgres::PgSslMode::Disable);
        }
        Ok(o)
    }

    /// Whether the host of `url` takes writes now: a primary, not a standby in recovery.
    async fn probe(url: String) -> Result<()> {
        let mut c = Self::options(&url)?.connect().await?;
        let standby: bool = sqlx::query_scalar("SELECT pg_is_in_recovery()")
            .fetch_one(&mut c)
            .await?;
        let _ = c.close().await;
        if standby {
            return Err(StoreError::Database {
                kind: DbErrorKind::Unavailable,
                message: "a standby (in recovery): it takes no writes".into(),
            });
        }
        Ok(())
    }

    /// The pool, for tests and tools.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// A claim's or completion's transaction: its commit does not wait for the WAL flush
    /// (`synchronous_commit = off`) unless the store is strict. A PostgreSQL crash can forget the last few hundred ms
    /// of them: a forgotten claim leaves the task available, a forgotten completion leaves it
    /// running until its lease expires and the rescuer retries it. Either way the task runs
    /// again — within the at-least-once guarantee — and nothing is lost. Inserts always wait.
    /// The planner runs with [`HOT_PATH_SETTINGS`] either way.
    async fn begin_hot(&self) -> Result<Transaction<'static, Postgres>> {
        // BEGIN and the settings in one round trip (a simple query may hold several
        // statements), not two.
        let sql: &'static str = if self.relaxed_commit {
            concat!(
                "BEGIN; SET LOCAL synchronous_commit = off; ",
                hot_path_settings!()
            )
        } else {
            concat!("BEGIN; ", hot_path_settings!())
        };
        Ok(self.pool.begin_with(sql).await?)
    }

    /// Writes notifications of one process in the current transaction. The advisory lock makes
    /// seq order commit order (held until commit), so stream readers never skip a row.
    async fn publish_in(
        tx: &mut sqlx::PgConnection,
        namespace: &str,
        id: &str,
        notices: &[Notice],
        now: Timestamp,
    ) -> Result<()> {
        if notices.is_empty() {
            return Ok(());
        }
        sqlx::query(SCHEMA_LOCK)
            .bind("docket-notifications")
            .execute(&mut *tx)
            .await?;
        let kinds: Vec<&str> = notices.iter().map(Notice::kind).collect();
        let ids: Vec<Option<i64>> = notices.iter().map(Notice::event_id).collect();
        let data: Vec<Value> = notices.iter().map(Notice::data).collect();
        sqlx::query(sql!(notifications, publish))
            .bind(namespace)
            .bind(id)
            .bind(now)
            .bind(&kinds)
            .bind(&ids)
            .bind(&data)
            .execute(&mut *tx)
            .await?;
        Ok(())
    }
}

#[async_trait]
impl Store for PgStore {
    fn backend(&self) -> Backend {
        Backend::Postgres
    }

    fn supports_listen_notify(&self) -> bool {
        true
    }

    async fn migrate(&self) -> Result<()> {
        sqlx::migrate!("./migrations/postgres")
            .run(&self.pool)
            .await?;
        Ok(())
    }

    fn claims_in_one_statement(&self) -> u64 {
        self.claims_fast.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn pool_connections(&self) -> PoolStats {
        let (size, idle) =
            [&self.pool, &self.claim_pool]
                .iter()
                .fold((0usize, 0usize), |(s, i), p| {
                    (
                        s.saturating_add(p.size() as usize),
                        i.saturating_add(p.num_idle()),
                    )
                });
        PoolStats {
            in_use: size - idle.min(size),
            idle,
        }
    }

    async fn close(&self) {
        self.claim_pool.close().await;
        self.pool.close().await;
    }
}

impl PgStore {
    /// The one insert statement: tasks (payloads passed apart, see `task_insert_many`), then
    /// a notification per queue that got available tasks. Returns (id, unique_key) per row.
    async fn insert_rows(
        conn: &mut sqlx::PgConnection,
        schema: &str,
        tasks: &[ResolvedTask],
        payloads: &[Value],
        now: Timestamp,
    ) -> Result<Vec<(i64, Option<String>)>> {
        macro_rules! col {
            ($f:expr) => {
                tasks.iter().map($f).collect::<Vec<_>>()
            };
        }
        // One statement: insert, then notify each queue that got available tasks (the scalar
        // subquery forces the notify CTE to run once). Only ids come back; everything else is
        // what we sent.
        let rows: Vec<(i64, Option<String>)> = sqlx::query_as(sql!(tasks, insert))
            .bind(col!(|t| t.queue.clone()))
            .bind(col!(|t| t.kind.clone()))
            .bind(payloads)
            .bind(col!(|t| t.priority))
            .bind(col!(|t| t.state.as_str()))
            .bind(col!(|t| t.run_at))
            .bind(col!(|t| t.expires_at))
            .bind(col!(|t| t.max_attempts))
            .bind(col!(|t| ms(t.backoff.initial)))
            .bind(col!(|t| t.backoff.coefficient))
            .bind(col!(|t| ms(t.backoff.max)))
            .bind(col!(|t| t.backoff.jitter))
            .bind(col!(|t| t.timeout_ms))
            .bind(col!(|t| t.unique_key.clone()))
            .bind(col!(|t| t.concurrency_key.clone()))
            .bind(col!(|t| t.concurrency_limit))
            .bind(col!(|t| t.node.clone()))
            .bind(now)
            .bind(CHANNEL)
            .bind(schema)
            .bind(col!(|t| t.trace_id.clone()))
            .bind(col!(|t| t.process.as_ref().map(|p| p.namespace.clone())))
            .bind(col!(|t| t.process.as_ref().map(|p| p.id.clone())))
            .bind(col!(|t| t.backoff.kind.as_str()))
            .bind(col!(|t| t.user_id.clone()))
            .bind(col!(|t| t.stage.clone()))
            .bind(col!(|t| t.progress.clone()))
            .bind(col!(|t| t.batch_id))
            .bind(col!(|t| t.rate_limit.clone()))
            .bind(col!(|t| t.partition_key.clone()))
            .bind(col!(|t| crate::row::tags_json(&t.tags)))
            .bind(col!(|t| crate::row::affinity_json(t.affinity.as_ref())))
            .fetch_all(&mut *conn)
            .await?;
        Ok(rows)
    }

    /// Drops a schema and everything in it (bench and test clean-up).
    ///
    /// # Errors
    /// Database failure.
    pub async fn drop_schema(&self, schema: &str) -> Result<()> {
        if schema.contains('"') {
            return Err(StoreError::Invalid(format!("bad schema name {schema:?}")));
        }
        sqlx::query(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}

/// The text of one of this backend's statements (`sql/<noun>.sql`, `-- name: <name>`) as the
/// store runs it, for tools and tests (an `EXPLAIN`).
///
/// # Panics
/// When there is no such statement.
pub fn statement(noun: &str, name: &str) -> &'static str {
    STATEMENTS.get(noun, name)
}

crate::sql::statements!("postgres": audit, batches, fragments, leases, maintenance, nodes, notifications, processes, queues, rate_limits, runs, schedules, tasks, tokens);

#[async_trait]
impl crate::driver::Driver for PgStore {
    type Row = PgRow;
    type Tx = PgTx;

    async fn begin(&self) -> Result<PgTx> {
        Ok(PgTx {
            tx: self.pool.begin().await?,
            schema: self.schema.clone(),
        })
    }

    async fn begin_keyed(&self) -> Result<PgTx> {
        // BEGIN and the setting in one round trip.
        Ok(PgTx {
            tx: self
                .pool
                .begin_with("BEGIN; SET LOCAL enable_seqscan = off")
                .await?,
            schema: self.schema.clone(),
        })
    }

    fn stmt(s: StmtName) -> &'static crate::sql::Stmt {
        STATEMENTS.stmt(s.0, s.1)
    }

    async fn fetch_stmt(&self, st: &crate::sql::Stmt, args: &[Arg<'_>]) -> Result<Vec<PgRow>> {
        Ok(bind(sqlx::query(&st.text), st, args)
            .fetch_all(&self.pool)
            .await?)
    }

    async fn execute_stmt(&self, st: &crate::sql::Stmt, args: &[Arg<'_>]) -> Result<u64> {
        Ok(bind(sqlx::query(&st.text), st, args)
            .execute(&self.pool)
            .await?
            .rows_affected())
    }

    async fn execute_text(&self, s: StmtName) -> Result<()> {
        let st = STATEMENTS.stmt(s.0, s.1);
        sqlx::raw_sql(&st.text).execute(&self.pool).await?;
        Ok(())
    }

    async fn tag_id_span(
        &self,
        p: &docket_core::api::TaskListParams,
    ) -> Result<Option<(i64, i64)>> {
        // The GIN index finds a tag's tasks but not in id order: the page is read in parts
        // (portable/tasks.rs TagScan says why). Two ends of the primary key.
        let cmp = if p.descending { "<" } else { ">" };
        let st = Self::stmt(crate::driver::stmt!(tasks, tag_id_span)).filled(&[("cmp", cmp)]);
        let args = [Arg::Int(p.after), Arg::Int(p.min_id), Arg::Int(p.max_id)];
        let rows = self.fetch_stmt(&st, &args).await?;
        Ok(match rows.first() {
            Some(r) => r.int_opt("lo")?.zip(r.int_opt("hi")?),
            None => None,
        })
    }
}

/// A PostgreSQL transaction of the portable store code ([`crate::driver::DriverTx`]): its own,
/// or one borrowed ([`crate::driver::Held`]).
pub(crate) struct PgTx {
    tx: Transaction<'static, Postgres>,
    schema: String,
}

#[async_trait]
impl crate::driver::DriverTx for PgTx {
    type Row = PgRow;

    async fn fetch(&mut self, s: StmtName, args: &[Arg<'_>]) -> Result<Vec<PgRow>> {
        let st = PgStore::stmt(s);
        Ok(bind(sqlx::query(&st.text), st, args)
            .fetch_all(&mut *self.tx)
            .await?)
    }

    async fn execute(&mut self, s: StmtName, args: &[Arg<'_>]) -> Result<u64> {
        let st = PgStore::stmt(s);
        Ok(bind(sqlx::query(&st.text), st, args)
            .execute(&mut *self.tx)
            .await?
            .rows_affected())
    }

    async fn lock(&mut self, name: &str) -> Result<()> {
        lock_key(&mut self.tx, name).await
    }

    async fn fair_settings(&mut self) -> Result<()> {
        // The generic plan, built once per connection: planning the fair candidates statement
        // takes ~20 ms, and the planner would otherwise plan it afresh at every claim (its
        // custom plans look cheaper than the generic one, which runs as fast: 5.6 ms against
        // 6.6 ms at 100,000 waiting, EXPLAIN ANALYZE). Sorts allowed again (the hot path's
        // settings forbid them): its ranking sorts a few rows per partition, and without sorts
        // the planner finds a plan 3x slower (20 ms against 7 ms).
        for set in [
            "SET LOCAL plan_cache_mode = force_generic_plan",
            "SET LOCAL enable_sort = on",
        ] {
            sqlx::query(set).execute(&mut *self.tx).await?;
        }
        Ok(())
    }

    async fn update_each(
        &mut self,
        s: StmtName,
        shared: &[Arg<'_>],
        rows: &[Vec<Arg<'_>>],
    ) -> Result<Vec<i64>> {
        if rows.is_empty() {
            return Ok(vec![]);
        }
        let st = PgStore::stmt(s);
        let q = bind_columns(bind(sqlx::query(&st.text), st, shared), rows);
        let done = q.fetch_all(&mut *self.tx).await?;
        done.iter().map(|r| r.int("id")).collect()
    }

    async fn wake(&mut self, queues: &[String]) -> Result<()> {
        notify_in(&mut self.tx, &self.schema, queues).await
    }

    async fn publish(
        &mut self,
        namespace: &str,
        id: &str,
        notices: &[Notice],
        now: Timestamp,
    ) -> Result<()> {
        PgStore::publish_in(&mut self.tx, namespace, id, notices, now).await
    }

    async fn insert_task(&mut self, t: &ResolvedTask, now: Timestamp) -> Result<Option<Task>> {
        // The insert statement itself notifies the task's queue.
        let mut t = t.clone();
        let payload = std::mem::take(&mut t.payload);
        let rows = PgStore::insert_rows(
            &mut self.tx,
            &self.schema,
            std::slice::from_ref(&t),
            std::slice::from_ref(&payload),
            now,
        )
        .await?;
        t.payload = payload;
        Ok(rows.first().map(|(id, _)| t.into_task(*id, now)))
    }

    async fn insert_tasks(
        &mut self,
        mut tasks: Vec<ResolvedTask>,
        now: Timestamp,
    ) -> Result<Vec<Option<Task>>> {
        // A unique key may refuse a row, and the statement answers only the rows it wrote.
        if tasks.len() < 2 || tasks.iter().any(|t| t.unique_key.is_some()) {
            return crate::driver::insert_one_by_one(self, &tasks, now).await;
        }
        let payloads: Vec<Value> = tasks
            .iter_mut()
            .map(|t| std::mem::take(&mut t.payload))
            .collect();
        let mut rows =
            PgStore::insert_rows(&mut self.tx, &self.schema, &tasks, &payloads, now).await?;
        if rows.len() != tasks.len() {
            return Err(StoreError::Invalid(
                "insert returned fewer rows than expected".into(),
            ));
        }
        // Identity values are taken in insertion (ordinality) order.
        rows.sort_by_key(|r| r.0);
        Ok(tasks
            .into_iter()
            .zip(payloads)
            .zip(rows)
            .map(|((mut t, payload), (id, _))| {
                t.payload = payload;
                Some(t.into_task(id, now))
            })
            .collect())
    }

    async fn insert_events(
        &mut self,
        namespace: &str,
        id: &str,
        events: &[docket_core::process::Event],
    ) -> Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        macro_rules! col {
            ($f:expr) => {
                events.iter().map($f).collect::<Vec<_>>()
            };
        }
        sqlx::query(&PgStore::stmt(crate::driver::stmt!(processes, insert_events)).text)
            .bind(namespace)
            .bind(id)
            .bind(col!(|e| e.event_id))
            .bind(col!(|e| e.task_id))
            .bind(col!(|e| e.timestamp))
            .bind(col!(|e| e.metadata.clone()))
            .bind(col!(|e| e.payload.clone()))
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }

    /// Three statements for the whole batch instead of four per process.
    async fn break_processes(
        &mut self,
        broken: &[crate::driver::Broken],
        detail: &str,
        now: Timestamp,
    ) -> Result<bool> {
        use crate::driver::stmt;
        if broken.is_empty() {
            return Ok(true);
        }
        let ns: Vec<&str> = broken.iter().map(|b| b.namespace.as_str()).collect();
        let ids: Vec<&str> = broken.iter().map(|b| b.id.as_str()).collect();
        let corrupted: Vec<Option<i64>> = broken.iter().map(|b| b.corrupted_by).collect();
        let keys: Vec<String> = broken
            .iter()
            .map(|b| docket_core::process::key_of(&b.namespace, &b.id))
            .collect();
        let data: Vec<Value> = broken
            .iter()
            .map(|b| {
                Notice::Failed {
                    detail: detail.to_string(),
                    task_id: b.task_id,
                }
                .data()
            })
            .collect();
        sqlx::query(&PgStore::stmt(stmt!(processes, break_many)).text)
            .bind(&ns)
            .bind(&ids)
            .bind(now)
            .bind(detail)
            .bind(&corrupted)
            .execute(&mut *self.tx)
            .await?;
        sqlx::query(&PgStore::stmt(stmt!(processes, cancel_waiting_many)).text)
            .bind(&keys)
            .bind(now)
            .execute(&mut *self.tx)
            .await?;
        // The notifications' lock, as publish takes it: seq order is commit order.
        sqlx::query(SCHEMA_LOCK)
            .bind("docket-notifications")
            .execute(&mut *self.tx)
            .await?;
        sqlx::query(&PgStore::stmt(stmt!(notifications, publish_failed_many)).text)
            .bind(&ns)
            .bind(&ids)
            .bind(&data)
            .bind(now)
            .execute(&mut *self.tx)
            .await?;
        Ok(true)
    }

    /// Tells synchronous callers on every node that these process steps finished.
    async fn steps_done(&mut self, ids: &[i64]) -> Result<()> {
        sqlx::query("SELECT pg_notify($1, $2 || '|' || id) FROM unnest($3::bigint[]) AS x(id)")
            .bind(DONE_CHANNEL)
            .bind(&self.schema)
            .bind(ids)
            .execute(&mut *self.tx)
            .await?;
        Ok(())
    }

    async fn commit(self) -> Result<()> {
        Ok(self.tx.commit().await?)
    }
}

/// Binds [`Arg`]s as PostgreSQL takes them: `timestamptz`, `jsonb`, `bool`.
fn bind<'q>(
    mut q: sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>,
    st: &crate::sql::Stmt,
    args: &[Arg<'q>],
) -> sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments> {
    for a in crate::driver::ordered(st, args) {
        q = match a {
            Arg::Text(v) => q.bind(v),
            Arg::Int(v) => q.bind(v),
            Arg::Int32(v) => q.bind(v),
            Arg::Float(v) => q.bind(v),
            Arg::Bool(v) => q.bind(v),
            Arg::Time(v) => q.bind(v),
            Arg::Json(v) => q.bind(v),
            Arg::Nonce(v) => q.bind(v.map(uuid::Uuid::from_u128)),
            Arg::Ints(v) => q.bind(v),
            Arg::Texts(v) => q.bind(v),
            Arg::Times(v) => q.bind(v),
            Arg::Nonces(v) => q.bind(
                v.iter()
                    .map(|n| uuid::Uuid::from_u128(*n))
                    .collect::<Vec<_>>(),
            ),
            Arg::Jsons(v) => q.bind(v),
        };
    }
    q
}

/// Binds each column of `rows` as one array, for a statement that `unnest`s them
/// ([`crate::driver::DriverTx::update_each`]).
fn bind_columns<'q>(
    mut q: sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>,
    rows: &[Vec<Arg<'q>>],
) -> sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments> {
    macro_rules! column {
        ($j:expr, $v:ident, $to:expr) => {
            rows.iter()
                .map(|r| match r[$j] {
                    Arg::$v(x) => $to(x),
                    _ => None,
                })
                .collect::<Vec<_>>()
        };
    }
    for j in 0..rows.first().map_or(0, Vec::len) {
        q = match rows[0][j] {
            Arg::Text(_) => q.bind(column!(j, Text, |x| x)),
            Arg::Int(_) => q.bind(column!(j, Int, |x| x)),
            Arg::Int32(_) => q.bind(column!(j, Int32, |x| x)),
            Arg::Float(_) => q.bind(column!(j, Float, |x| x)),
            Arg::Bool(_) => q.bind(column!(j, Bool, Some)),
            Arg::Time(_) => q.bind(column!(j, Time, |x| x)),
            Arg::Json(_) => q.bind(column!(j, Json, |x: Option<&Value>| x.cloned())),
            Arg::Nonce(_) => {
                q.bind(column!(j, Nonce, |x: Option<u128>| x.map(uuid::Uuid::from_u128)))
            }
            Arg::Ints(_) | Arg::Texts(_) | Arg::Times(_) | Arg::Nonces(_) | Arg::Jsons(_) => {
                unreachable!("a row holds single values")
            }
        };
    }
    q
}

/// PostgreSQL's types are the record's: `timestamptz`, `jsonb`, `bool`; a lease token's nonce is
/// a `uuid`.
impl Cols for PgRow {
    crate::row::try_get_cols!(
        text: String,
        text_opt: Option<String>,
        int: i64,
        int_opt: Option<i64>,
        int32: i32,
        int32_opt: Option<i32>,
        float: f64,
        flag: bool,
        time: Timestamp,
        time_opt: Option<Timestamp>,
        json: Value,
        json_opt: Option<Value>,
    );
    fn nonce(&self, c: &str) -> Result<Option<u128>> {
        Ok(self
            .try_get::<Option<uuid::Uuid>, _>(c)?
            .map(|u| u.as_u128()))
    }
}

/// Longest lease or timeout the one-statement claim computes in SQL (100 years); past it the
/// claim takes the transaction, where `docket_core::lease::claim_lease` saturates instead of
/// overflowing. The API bounds both to 30 days; this guards library callers and rows written
/// with plain SQL.
const FAST_CLAIM_MAX: Duration = Duration::from_secs(100 * 365 * 86_400);

#[async_trait]
impl crate::driver::LeaseDriver for PgStore {
    async fn begin_hot(&self) -> Result<PgTx> {
        Ok(PgTx {
            tx: PgStore::begin_hot(self).await?,
            schema: self.schema.clone(),
        })
    }

    async fn claim_fast(&self, p: &TaskClaimParams, nonce: u128) -> Result<Option<Vec<Task>>> {
        let fast_max = docket_core::duration::to_ms(FAST_CLAIM_MAX);
        let lease_ms = p.lease.map(docket_core::duration::to_ms);
        if lease_ms.is_some_and(|l| l > fast_max) {
            return Ok(None);
        }
        let rows = sqlx::query(sql!(leases, claim_fast))
            .bind(&p.queue)
            .bind(&p.node)
            .bind(p.now)
            .bind(p.limit)
            .bind(&p.kinds)
            .bind(&p.stages)
            .bind(lease_ms)
            .bind(&p.worker)
            .bind(uuid::Uuid::from_u128(nonce))
            .bind(fast_max)
            .bind(crate::row::labels_json(&p.labels))
            .fetch_all(&self.claim_pool)
            .await?;
        // Not `fast_ok`: a concurrency key or a queue limit among the candidates, a rate
        // limit, a fair queue, or a timeout past FAST_CLAIM_MAX: the transaction decides.
        if rows
            .first()
            .map(|r| r.try_get::<bool, _>("fast_ok"))
            .transpose()?
            != Some(true)
        {
            return Ok(None);
        }
        let mut tasks = Vec::with_capacity(rows.len());
        for r in &rows {
            // The one row of an empty claim: no task, only `fast_ok`.
            if r.try_get::<Option<i64>, _>("id")?.is_some() {
                tasks.push(decode(r)?);
            }
        }
        self.claims_fast
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Some(crate::leases::claimed(tasks, nonce, p.now)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        LeaseStore as _, NewRun, RunLease, RunRecordParams, RunReport, RunStartParams, RunStore,
        TaskClaimParams,
    };
    use docket_core::durable::{self, EntryKind, NewEntry};
    use docket_core::{NewTask, TaskDefaults};

    fn start(id: String, now: Timestamp) -> RunStartParams {
        let input = serde_json::json!({ "id": id });
        let mut t = NewTask::new("w", durable::task_payload(&id, &input));
        t.queue = Some(durable::DEFAULT_QUEUE.into());
        RunStartParams {
            run: NewRun {
                id,
                workflow: "w".into(),
                input,
                parent_id: None,
                task: t.resolve(None, &TaskDefaults::default(), now).unwrap(),
            },
            now,
        }
    }

    /// Starts `ids` one call each, then claims as many runs' tasks (the oldest waiting) and
    /// reports a step of each, one report at a time.
    async fn one_by_one(s: &PgStore, ids: &[String]) {
        let now = chrono::Utc::now();
        for id in ids {
            s.run_start(start(id.clone(), now)).await.unwrap();
        }
        let tasks = s
            .task_claim(TaskClaimParams {
                labels: Default::default(),
                kinds: None,
                stages: None,
                queue: durable::DEFAULT_QUEUE.into(),
                worker: "w".into(),
                node: "n".into(),
                limit: ids.len() as i64,
                lease: None,
                now,
                nonce: None,
            })
            .await
            .unwrap();
        assert_eq!(tasks.len(), ids.len());
        for t in tasks {
            let id = t.payload["workflow_run"].as_str().unwrap().to_string();
            let report = RunReport {
                record: RunRecordParams {
                    lease: RunLease {
                        id,
                        token: t.lease.as_ref().unwrap().token.clone(),
                        now,
                        fail_rule: docket_core::task::standard_fail_rule,
                    },
                    entries: vec![NewEntry {
                        seq: 0,
                        kind: EntryKind::Step,
                        name: "s".into(),
                        output: Some(serde_json::json!(1)),
                        error: None,
                        attempts: None,
                        started_at: None,
                        child: None,
                    }],
                    children: vec![],
                },
                finish: None,
            };
            let out = s.run_report_many(vec![report]).await.unwrap();
            assert!(out[0].is_ok(), "{:?}", out[0]);
        }
    }

    /// The durable runs' flows find runs by key however small the runs table was when their
    /// statements' generic plans were made (`Driver::begin_keyed`): starts and reports made
    /// one at a time on a nearly empty table (PostgreSQL builds a prepared statement's generic
    /// plan at its sixth run), then 3,000 runs more, then starts and reports again — the rows
    /// PostgreSQL's scans of `docket_workflow_runs` read stay far below one scan of the table
    /// per call. One connection, so that one backend ran every flow and its counts are
    /// flushed on request.
    #[tokio::test]
    async fn run_flows_find_runs_by_key_after_the_table_grew() {
        let url = std::env::var("DOCKET_TEST_PG_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
        let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
        let s = PgStore::connect(&ConnectOptions {
            url,
            schema: Some(schema.clone()),
            max_connections: Some(1),
            strict_commit: false,
        })
        .await
        .unwrap();
        s.migrate().await.unwrap();
        let ids = |from: usize, n: usize| -> Vec<String> {
            (from..from + n).map(|i| format!("run-{i:06}")).collect()
        };
        one_by_one(&s, &ids(0, 8)).await;
        let now = chrono::Utc::now();
        for k in 0..15 {
            let batch = ids(100 + k * 200, 200)
                .into_iter()
                .map(|id| start(id, now))
                .collect();
            for r in s.run_start_many(batch).await.unwrap() {
                r.unwrap();
            }
        }
        one_by_one(&s, &ids(10, 8)).await;
        let read = |sql: &'static str| {
            let schema = schema.clone();
            let pool = s.pool.clone();
            async move {
                sqlx::query_scalar::<_, i64>(sql)
                    .bind(schema)
                    .fetch_one(&pool)
                    .await
                    .unwrap()
            }
        };
        sqlx::query("SELECT pg_stat_force_next_flush()")
            .execute(&s.pool)
            .await
            .unwrap();
        let runs = read(
            "SELECT n_live_tup FROM pg_stat_user_tables \
             WHERE schemaname = $1 AND relname = 'docket_workflow_runs'",
        )
        .await;
        let scanned = read(
            "SELECT seq_tup_read FROM pg_stat_user_tables \
             WHERE schemaname = $1 AND relname = 'docket_workflow_runs'",
        )
        .await;
        s.drop_schema(&schema).await.unwrap();
        assert_eq!(runs, 3016, "the counts were flushed");
        // The last 8 starts and 8 reports: a scan each would read 16 × 3,000 rows.
        assert!(
            scanned < 3000,
            "{scanned} rows of docket_workflow_runs read by scans"
        );
    }
}
