//! Running a pg_task table's rows ([`start`]): claims under the table's advisory lock, a
//! session per task (or per group with `count`/`live`), repeats, and the reset of rows whose
//! node or connection died.

use super::schema::{bootstrap, check_version, sql};
use super::{PgTaskError, CHANNEL};
use crate::format::{format_error, plain_error, statement_error, Format, Output};
use crate::target::{quote_ident, sqlx_options, PgTaskConfig};
use crate::wire::CancelToken;
use crate::wire::{Session, WireError};
use sqlx::postgres::{PgConnection, PgListener, PgPool, PgPoolOptions};
use sqlx::{Connection, Row};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Mutex, Notify, Semaphore};
use tokio_util::sync::CancellationToken;

/// A running pg_task table.
pub(super) struct Table {
    cfg: PgTaskConfig,
    conn: crate::wire::ConnInfo,
    name: String,
    oid: u32,
    db_oid: u32,
    /// Key of the transaction lock every look at the table takes.
    serial_key: i64,
    /// Most rows one look takes (pg_task.limit).
    limit: usize,
    /// Rows one claim statement takes (pg_task.fetch).
    fetch: usize,
    pool: PgPool,
    /// Holds the session locks of this node's tasks (and runs the looks at the table).
    control: Mutex<Control>,
    opts: sqlx::postgres::PgConnectOptions,
    /// Cancel tokens of the sessions running this node's tasks, by task id.
    cancels: std::sync::Mutex<HashMap<i64, CancelToken>>,
    wake: Notify,
    slots: Arc<Semaphore>,
    app: String,
    /// Ends of tasks waiting for the control session; whoever takes the session next records
    /// all of them in one transaction (see [`Table::finish`]).
    ends: std::sync::Mutex<Vec<End>>,
}

/// One task's end on its way to the control session.
pub(super) struct End {
    id: i64,
    hash: i32,
    max: i32,
    output: Option<String>,
    error: Option<String>,
    state: &'static str,
    /// Take the next task of the group for the same session.
    more: bool,
    reply: tokio::sync::oneshot::Sender<Result<Option<Claimed>, String>>,
}

/// The control session and the tasks whose locks it holds (to take them again after a
/// reconnect).
pub(super) struct Control {
    conn: Option<PgConnection>,
    held: HashSet<i64>,
}

impl std::ops::Deref for Control {
    type Target = PgConnection;
    fn deref(&self) -> &PgConnection {
        self.conn.as_ref().expect("connected by Table::ctl")
    }
}

impl std::ops::DerefMut for Control {
    fn deref_mut(&mut self) -> &mut PgConnection {
        self.conn.as_mut().expect("connected by Table::ctl")
    }
}

/// A claimed task, as its executor needs it.
pub(super) struct Claimed {
    id: i64,
    input: String,
    remote: Option<String>,
    hash: i32,
    max: i32,
    count: i32,
    live: Duration,
    save: bool,
    timeout_ms: i64,
    format: Format,
}

/// Serves one pg_task table until `cancel`: creates it, then claims and runs its tasks.
/// Returns once the table is ready; the returned handle ends when the service has stopped
/// (running tasks are given `grace` to finish; unfinished ones are reset and run again).
///
/// # Errors
/// The options are bad or the database cannot be reached or prepared.
pub async fn start(
    cfg: PgTaskConfig,
    node: &str,
    cancel: CancellationToken,
    grace: Duration,
) -> Result<tokio::task::JoinHandle<()>, PgTaskError> {
    cfg.validate().map_err(PgTaskError::Config)?;
    let conn = cfg
        .connection()
        .map_err(|e| PgTaskError::Config(e.to_string()))?;
    // Named per table, so an operator (or a test) can tell docket's sessions apart.
    let opts = sqlx_options(&conn).application_name(&format!("docket {}", cfg.name()));
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .connect_with(opts.clone())
        .await?;
    let version: String =
        sqlx::query_scalar("SELECT pg_catalog.current_setting('server_version_num')")
            .fetch_one(&pool)
            .await?;
    check_version(&version).map_err(PgTaskError::Config)?;
    let oid = bootstrap(&pool, &cfg).await?;
    let db_oid: i64 = sqlx::query_scalar(
        "SELECT oid::int8 FROM pg_catalog.pg_database WHERE datname = current_database()",
    )
    .fetch_one(&pool)
    .await?;
    // pg_task.limit and pg_task.fetch: an explicit option, else the setting of docket's
    // session (ALTER DATABASE/ROLE … SET pg_task.limit), else pg_task's default.
    let setting = |name: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, Option<String>>(
                "SELECT NULLIF(pg_catalog.current_setting($1, true), '')",
            )
            .bind(name)
            .fetch_one(&pool)
            .await
        }
    };
    let read = |v: Option<String>, name: &str, min: usize| -> Result<Option<usize>, PgTaskError> {
        v.map(|v| {
            v.trim()
                .parse::<usize>()
                .ok()
                .filter(|n| *n >= min)
                .ok_or_else(|| {
                    PgTaskError::Config(format!("{name} = {v:?}: not a number of at least {min}"))
                })
        })
        .transpose()
    };
    let limit = match cfg.limit {
        Some(l) => l,
        None => read(setting("pg_task.limit").await?, "pg_task.limit", 0)?
            .unwrap_or(crate::target::DEFAULT_LIMIT),
    };
    let fetch = match cfg.fetch {
        Some(f) => f,
        None => read(setting("pg_task.fetch").await?, "pg_task.fetch", 1)?
            .unwrap_or(crate::target::DEFAULT_FETCH),
    };
    let opts = opts.application_name(&format!("docket control {}", cfg.name()));
    let control = PgConnection::connect_with(&opts).await?;
    let mut listener = PgListener::connect_with(&pool).await?;
    listener.listen(CHANNEL).await?;
    let slots = Arc::new(Semaphore::new(cfg.run.unwrap_or(Semaphore::MAX_PERMITS)));
    let t = Arc::new(Table {
        name: cfg.name(),
        app: format!("docket pg_task {node}"),
        cfg,
        conn,
        oid,
        db_oid: db_oid as u32,
        serial_key: 0x646f_636b_0000_0000_i64 | i64::from(oid),
        pool,
        control: Mutex::new(Control {
            conn: Some(control),
            held: HashSet::new(),
        }),
        opts,
        cancels: std::sync::Mutex::new(HashMap::new()),
        wake: Notify::new(),
        slots,
        ends: std::sync::Mutex::new(Vec::new()),
        limit,
        fetch,
    });
    tracing::info!(table = %t.name, oid, "pg_task table ready");
    Ok(tokio::spawn(async move {
        let oid_text = t.oid.to_string();
        let waker = {
            let t = t.clone();
            let cancel = cancel.clone();
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        _ = cancel.cancelled() => return,
                        n = listener.recv() => match n {
                            Ok(n) if n.payload() == oid_text => t.wake.notify_one(),
                            Ok(_) => {}
                            Err(e) => {
                                tracing::warn!(error = %e, "pg_task listener failed; polling");
                                tokio::time::sleep(Duration::from_secs(1)).await;
                            }
                        }
                    }
                }
            })
        };
        let mut running = tokio::task::JoinSet::new();
        let mut last_reset: Option<Instant> = None;
        loop {
            if cancel.is_cancelled() {
                break;
            }
            if last_reset.map_or(true, |r| r.elapsed() >= t.cfg.reset) {
                last_reset = Some(Instant::now());
                if let Err(e) = t.reset().await {
                    tracing::warn!(table = %t.name, error = %e, "pg_task reset failed");
                    t.check_control().await;
                }
            }
            let mut next = t.cfg.sleep;
            match t.claim_and_spawn(&mut running).await {
                Ok(wait) => next = next.min(wait),
                Err(e) => {
                    tracing::warn!(table = %t.name, error = %e, "pg_task claim failed");
                    t.check_control().await;
                }
            }
            if let Some(r) = last_reset {
                next = next.min(t.cfg.reset.saturating_sub(r.elapsed()));
            }
            while running.try_join_next().is_some() {}
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = t.wake.notified() => {}
                _ = tokio::time::sleep(next.max(Duration::from_millis(1))) => {}
            }
        }
        waker.abort();
        let drain = async { while running.join_next().await.is_some() {} };
        if tokio::time::timeout(grace, drain).await.is_err() {
            tracing::warn!(table = %t.name, "grace period over with pg_task tasks running; they will be reset");
        }
        t.pool.close().await;
    }))
}

impl Table {
    fn table(&self) -> String {
        format!(
            "{}.{}",
            quote_ident(&self.cfg.schema),
            quote_ident(&self.cfg.table)
        )
    }

    /// The control session, reconnected if it was lost; after a reconnect the locks of this
    /// node's tasks are taken again, and a task whose lock another session took meanwhile (a
    /// reset ran while we were away) is cancelled here rather than run twice.
    async fn ctl(&self) -> Result<tokio::sync::MutexGuard<'_, Control>, sqlx::Error> {
        let mut g = self.control.lock().await;
        if g.conn.is_none() {
            let mut c = PgConnection::connect_with(&self.opts).await?;
            let ids: Vec<i64> = g.held.iter().copied().collect();
            for id in ids {
                let ok: bool = sqlx::query_scalar(
                    "SELECT pg_catalog.pg_try_advisory_lock($1, ($2 & 2147483647)::int4)",
                )
                .bind(self.oid as i32)
                .bind(id)
                .fetch_one(&mut c)
                .await?;
                if !ok {
                    tracing::warn!(table = %self.name, id, "pg_task task taken over while the control session was lost; cancelling it here");
                    g.held.remove(&id);
                    self.cancel(id);
                }
            }
            tracing::info!(table = %self.name, "pg_task control session reconnected");
            g.conn = Some(c);
        }
        Ok(g)
    }

    /// Drops the control session if it no longer answers (the next use reconnects).
    async fn check_control(&self) {
        let mut g = self.control.lock().await;
        if let Some(c) = g.conn.as_mut() {
            if c.ping().await.is_err() {
                tracing::warn!(table = %self.name, "pg_task control session lost");
                g.conn = None;
            }
        }
    }

    /// Cancels the statement running task `id` on this node, if any.
    fn cancel(&self, id: i64) {
        let token = self.cancels.lock().expect("not poisoned").get(&id).cloned();
        if let Some(t) = token {
            tokio::spawn(async move {
                if let Err(e) = t.cancel().await {
                    tracing::warn!(error = %e, id, "cancel request failed");
                }
            });
        }
    }

    /// Puts back to PLAN the tasks in TAKE/WORK whose lock no session holds.
    async fn reset(&self) -> Result<(), sqlx::Error> {
        let table = self.table();
        let mut c = self.ctl().await?;
        let mut tx = c.begin().await?;
        sqlx::query("SELECT pg_catalog.pg_advisory_xact_lock($1)")
            .bind(self.serial_key)
            .execute(&mut *tx)
            .await?;
        let ids: Vec<i64> = sqlx::query_scalar(&sql("reset", &[("table", &table)]))
            .bind(i64::from(self.db_oid))
            .bind(i64::from(self.oid))
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        if !ids.is_empty() {
            tracing::warn!(table = %self.name, ?ids, "pg_task tasks reset to PLAN: their connection died");
            self.wake.notify_one();
        }
        Ok(())
    }

    /// Marks overdue tasks GONE, claims what may run and spawns their executors; returns how
    /// long until the next planned task.
    async fn claim_and_spawn(
        self: &Arc<Self>,
        running: &mut tokio::task::JoinSet<()>,
    ) -> Result<Duration, sqlx::Error> {
        let table = self.table();
        let free = self.slots.available_permits().min(self.limit);
        let mut c = self.ctl().await?;
        let mut tx = c.begin().await?;
        sqlx::query("SELECT pg_catalog.pg_advisory_xact_lock($1)")
            .bind(self.serial_key)
            .execute(&mut *tx)
            .await?;
        let gone: Vec<i64> = sqlx::query_scalar(&sql("gone", &[("table", &table)]))
            .bind(plain_error("task not active"))
            .fetch_all(&mut *tx)
            .await?;
        if !gone.is_empty() {
            sqlx::query(&sql("repeat", &[("table", &table)]))
                .bind(&gone)
                .execute(&mut *tx)
                .await?;
        }
        let mut claimed = Vec::new();
        let mut left = free;
        while left > 0 {
            let want = left.min(self.fetch);
            let rows = sqlx::query(&sql("claim", &[("table", &table)]))
                .bind(None::<i32>)
                .bind(None::<i32>)
                .bind(want as i64)
                .bind(self.oid as i32)
                .bind(false)
                .fetch_all(&mut *tx)
                .await?;
            left -= rows.len().min(left);
            let short = rows.len() < want;
            for r in rows {
                let id: i64 = r.get(0);
                if r.get::<bool, _>(1) {
                    claimed.push(self::claimed(&r));
                } else {
                    // Some other session holds this id's lock (an id 2^31 apart): leave it.
                    sqlx::query(&format!(
                        "UPDATE {table} SET \"state\" = 'PLAN' WHERE \"id\" = $1"
                    ))
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                }
            }
            if short {
                break;
            }
        }
        let next: Option<f64> = sqlx::query_scalar(&format!(
            "SELECT extract(epoch FROM min(\"plan\") - CURRENT_TIMESTAMP)::float8 FROM {table} WHERE \"state\" = 'PLAN'"
        ))
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        c.held.extend(claimed.iter().map(|t| t.id));
        let took = claimed.len();
        // pg_task's stop: a task of ours set to STOP while it runs is cancelled.
        let mine: Vec<i64> = c.held.iter().copied().collect();
        if !mine.is_empty() {
            let stopped: Vec<i64> = sqlx::query_scalar(&format!(
                "SELECT \"id\" FROM {table} WHERE \"id\" = ANY($1) AND \"state\" = 'STOP'"
            ))
            .bind(&mine)
            .fetch_all(&mut **c)
            .await?;
            for id in stopped {
                self.cancel(id);
            }
        }
        drop(c);
        for task in claimed {
            let permit = self
                .slots
                .clone()
                .try_acquire_owned()
                .expect("claimed no more than the free slots");
            let t = self.clone();
            running.spawn(async move {
                t.execute(task).await;
                drop(permit);
                t.wake.notify_one();
            });
        }
        Ok(match next {
            Some(s) if s > 0.0 => Duration::from_secs_f64(s.min(86_400.0)),
            // Due tasks left after a look that took some (limit, fetch): look again at once.
            Some(_) if took > 0 => Duration::ZERO,
            // Due tasks none of which may run (their groups are full, limit 0): a task's end
            // or an insert wakes the loop; until then, look every `sleep`, not in a busy loop.
            Some(_) => self.cfg.sleep,
            None => self.cfg.sleep,
        })
    }

    /// Runs `task`, then the next tasks of its group while `count`/`live` allow, in one session.
    async fn execute(self: &Arc<Self>, first: Claimed) {
        let started = Instant::now();
        let mut processed = 0;
        let mut task = first;
        let mut session: Option<Session> = None;
        loop {
            processed += 1;
            if session.is_none() {
                // As pg_task's libpq connections, a remote one may use the server's PGPASSWORD.
                let conn = match &task.remote {
                    None => Ok(self.conn.clone()),
                    Some(r) => crate::wire::parse_conninfo(r).map(crate::wire::with_env_password),
                };
                let opened = match conn {
                    Ok(c) => Session::connect(&c, &self.app).await,
                    Err(e) => Err(e),
                };
                match opened {
                    Ok(s) => session = Some(s),
                    Err(e) => {
                        let error = match &e {
                            WireError::Refused(se) => format_error(se, None),
                            other => plain_error(&other.to_string()),
                        };
                        if let Err(e) = self.finish(&task, None, Some(error), "FAIL", false).await {
                            tracing::warn!(table = %self.name, id = task.id, error = %e, "pg_task could not record a failure; the reset will run the task again");
                            self.check_control().await;
                            self.release(task.id).await;
                        }
                        return;
                    }
                }
            }
            let s = session.as_mut().expect("session open");
            self.cancels
                .lock()
                .expect("not poisoned")
                .insert(task.id, s.cancel_token());
            let result = self.run_one(s, &task).await;
            self.cancels.lock().expect("not poisoned").remove(&task.id);
            let (output, error, state) = match result {
                Ok(r) => r,
                Err(e) if e.is_lost() => {
                    tracing::warn!(table = %self.name, id = task.id, error = %e, "pg_task connection lost; the reset will run the task again");
                    self.release(task.id).await;
                    return;
                }
                Err(WireError::Fatal(se)) => {
                    (None, Some(format_error(&se, Some(&task.input))), "FAIL")
                }
                Err(e) => (None, Some(plain_error(&e.to_string())), "FAIL"),
            };
            let alive = state != "FAIL" || !matches!(&error, Some(e) if e.starts_with("FATAL"));
            let more = alive
                && if task.count > 0 && !task.live.is_zero() {
                    processed < task.count && started.elapsed() < task.live
                } else {
                    processed < task.count || started.elapsed() < task.live
                };
            match self.finish(&task, output, error, state, more).await {
                Ok(Some(next)) => {
                    if !next_same_session(&task, &next) {
                        // A group shares `remote`, so this does not happen; be safe.
                        if let Some(s) = session.take() {
                            s.close().await;
                        }
                    } else if !task.save {
                        if let Some(s) = session.as_mut() {
                            if let Err(e) = s.execute("DISCARD ALL").await {
                                tracing::warn!(error = %e, "DISCARD ALL failed");
                                session = None;
                            }
                        }
                    }
                    task = next;
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(table = %self.name, id = task.id, error = %e, "pg_task could not record a result; the reset will run the task again");
                    self.check_control().await;
                    self.release(task.id).await;
                    break;
                }
            }
        }
        if let Some(s) = session {
            s.close().await;
        }
    }

    /// Marks `task` WORK with the session's pid and runs its input.
    async fn run_one(
        &self,
        s: &mut Session,
        task: &Claimed,
    ) -> Result<(Option<String>, Option<String>, &'static str), WireError> {
        let table = self.table();
        let marked = sqlx::query(&sql("start", &[("table", &table)]))
            .bind(task.id)
            .bind(s.pid())
            .execute(&self.pool)
            .await
            .map_err(|e| WireError::Protocol(e.to_string()))?;
        if marked.rows_affected() == 0 {
            // Stopped (or reset) meanwhile: nothing to run.
            return Ok((None, None, "STOP"));
        }
        let timeout = if task.timeout_ms > 0 {
            task.timeout_ms.to_string()
        } else {
            "DEFAULT".into()
        };
        s.execute(&format!(
            "SET pg_task.id = '{}'; SET statement_timeout = {timeout}",
            task.id
        ))
        .await?;
        let mut out = Output::new(task.format.clone());
        let end = s.query(&task.input, &mut out).await?;
        let mut error = end.error.map(|e| format_error(&e, Some(&task.input)));
        // COPY as pg_task has it: a local task (run in the server by SPI) refuses both
        // directions with its own error; a remote one (libpq) keeps COPY TO STDOUT's data as
        // its output and fails COPY FROM STDIN with the server's answer to the refusal.
        if let (Some(msg), None) = (end.copy, &task.remote) {
            error = Some(statement_error(msg, &task.input));
            out = Output::new(task.format.clone());
        }
        match end.status {
            b'T' if error.is_none() => {
                // pg_task commits a transaction the input left open, and says so.
                let c = s.query("COMMIT", &mut out).await?;
                if let Some(e) = c.error {
                    error = Some(format_error(&e, Some(&task.input)));
                }
            }
            b'T' | b'E' => s.execute("ROLLBACK").await?,
            _ => {}
        }
        // statement_timeout stays as the task set it: every task sets its own before it runs,
        // and a session is closed or reused only for tasks — one round trip fewer per task.
        let output = match out.finish() {
            Ok(o) => o,
            Err(m) => {
                error = Some(plain_error(&m));
                None
            }
        };
        let state = if error.is_some() { "FAIL" } else { "DONE" };
        Ok((output, error, state))
    }

    /// Records the end of `task` (state, stop, output, error), inserts its repeat, deletes it
    /// when `delete` and it left nothing, puts off its pause group, releases its lock, and —
    /// with `more` — takes the next task of its group. Ends are recorded in batches: the table
    /// has one control session (it holds the tasks' session locks, as pg_task's worker does),
    /// so one end at a time capped a table at ~750 tasks/s however many sessions ran tasks. An
    /// end queues itself, then waits for the session; whoever gets it records every queued end
    /// in one transaction and answers the others.
    async fn finish(
        &self,
        task: &Claimed,
        output: Option<String>,
        error: Option<String>,
        state: &'static str,
        more: bool,
    ) -> Result<Option<Claimed>, sqlx::Error> {
        let (reply, mut answer) = tokio::sync::oneshot::channel();
        self.ends.lock().expect("not poisoned").push(End {
            id: task.id,
            hash: task.hash,
            max: task.max,
            output,
            error,
            state,
            more,
            reply,
        });
        let mut c = match self.ctl().await {
            Ok(c) => c,
            Err(e) => {
                // Not recorded: take it back out so that no later batch records it after the
                // caller has let the task go.
                self.ends
                    .lock()
                    .expect("not poisoned")
                    .retain(|x| x.id != task.id);
                return Err(e);
            }
        };
        if let Ok(r) = answer.try_recv() {
            return r.map_err(sqlx::Error::Protocol);
        }
        let batch = std::mem::take(&mut *self.ends.lock().expect("not poisoned"));
        match self.finish_batch(&mut c, &batch).await {
            Ok(nexts) => {
                let mut orphans = vec![];
                for (end, next) in batch.into_iter().zip(nexts) {
                    if let Err(Ok(Some(n))) = end.reply.send(Ok(next)) {
                        orphans.push(n.id);
                    }
                }
                if !orphans.is_empty() {
                    // Its session is gone (the caller was cancelled): back to PLAN, unlocked.
                    self.let_go(&mut c, &orphans).await;
                }
            }
            Err(e) => {
                let m = e.to_string();
                for end in batch {
                    let _ = end.reply.send(Err(m.clone()));
                }
            }
        }
        drop(c);
        match answer.await {
            Ok(r) => r.map_err(sqlx::Error::Protocol),
            Err(_) => Err(sqlx::Error::Protocol(
                "the end was not recorded (no batch took it)".into(),
            )),
        }
    }

    /// One transaction for `ends`: returns, per end, the next task of its group it takes.
    async fn finish_batch(
        &self,
        c: &mut Control,
        ends: &[End],
    ) -> Result<Vec<Option<Claimed>>, sqlx::Error> {
        let table = self.table();
        // One round trip for BEGIN and the table's lock (the key is our own integer).
        let mut tx = c
            .begin_with(format!(
                "BEGIN; SELECT pg_catalog.pg_advisory_xact_lock({})",
                self.serial_key
            ))
            .await?;
        let mut unlocked = HashSet::new();
        let recorded: Vec<&End> = ends.iter().filter(|e| e.state != "STOP").collect();
        if !recorded.is_empty() {
            // The task's session lock goes in the same statement.
            let rows = sqlx::query(&sql(
                "record_ends",
                &[
                    ("table", &table),
                    ("schema", &quote_ident(&self.cfg.schema)),
                ],
            ))
            .bind(recorded.iter().map(|e| e.id).collect::<Vec<_>>())
            .bind(recorded.iter().map(|e| e.state).collect::<Vec<_>>())
            .bind(
                recorded
                    .iter()
                    .map(|e| e.output.clone())
                    .collect::<Vec<_>>(),
            )
            .bind(recorded.iter().map(|e| e.error.clone()).collect::<Vec<_>>())
            .bind(self.oid as i32)
            .fetch_all(&mut *tx)
            .await?;
            let by_id: HashMap<i64, &End> = recorded.iter().map(|e| (e.id, *e)).collect();
            let (mut repeats, mut deletes) = (vec![], vec![]);
            for row in &rows {
                let id: i64 = row.get(0);
                unlocked.insert(id);
                if row.get::<bool, _>(6) {
                    repeats.push(id);
                }
                let e = by_id[&id];
                if row.get::<bool, _>(1) && e.output.is_none() && e.error.is_none() {
                    deletes.push(id);
                }
            }
            if !repeats.is_empty() {
                sqlx::query(&sql("repeat", &[("table", &table)]))
                    .bind(&repeats)
                    .execute(&mut *tx)
                    .await?;
            }
            if !deletes.is_empty() {
                sqlx::query(&sql("delete", &[("table", &table)]))
                    .bind(&deletes)
                    .execute(&mut *tx)
                    .await?;
            }
            for row in rows.iter().filter(|r| r.get::<i32, _>(2) < 0) {
                // Anti-parallel group: the next task starts |max| ms after this one — after its
                // end with drift, else on the grid of its start.
                let max: i32 = row.get(2);
                let drift: bool = row.get(3);
                sqlx::query(&sql("pause_group", &[("table", &table)]))
                    .bind(row.get::<i32, _>(5))
                    .bind(drift)
                    .bind(f64::from(max.unsigned_abs()))
                    .bind(row.get::<Option<chrono::DateTime<chrono::Utc>>, _>(4))
                    .execute(&mut *tx)
                    .await?;
            }
        }
        // The next tasks: one claim per group for all of its sessions that go on.
        let mut nexts: Vec<Option<Claimed>> = ends.iter().map(|_| None).collect();
        let mut groups: std::collections::BTreeMap<(i32, i32), Vec<usize>> = Default::default();
        for (i, e) in ends.iter().enumerate().filter(|(_, e)| e.more) {
            groups.entry((e.hash, e.max)).or_default().push(i);
        }
        for ((hash, max), want) in groups {
            let rows = sqlx::query(&sql("claim", &[("table", &table)]))
                .bind(Some(hash))
                .bind(Some(max))
                .bind(want.len() as i64)
                .bind(self.oid as i32)
                .bind(true)
                .fetch_all(&mut *tx)
                .await?;
            let mut want = want.into_iter();
            for r in rows {
                let id: i64 = r.get(0);
                match (r.get::<bool, _>(1), want.next()) {
                    (true, Some(i)) => nexts[i] = Some(claimed(&r)),
                    _ => {
                        sqlx::query(&format!(
                            "UPDATE {table} SET \"state\" = 'PLAN' WHERE \"id\" = $1"
                        ))
                        .bind(id)
                        .execute(&mut *tx)
                        .await?;
                    }
                }
            }
        }
        let rest: Vec<i64> = ends
            .iter()
            .map(|e| e.id)
            .filter(|id| !unlocked.contains(id))
            .collect();
        if !rest.is_empty() {
            sqlx::query(
                "SELECT pg_catalog.pg_advisory_unlock($1, (id & 2147483647)::int4) FROM unnest($2::int8[]) AS id",
            )
            .bind(self.oid as i32)
            .bind(&rest)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        for e in ends {
            c.held.remove(&e.id);
        }
        c.held.extend(nexts.iter().flatten().map(|n| n.id));
        Ok(nexts)
    }

    /// Puts claimed tasks nobody will run back to PLAN and lets their locks go.
    async fn let_go(&self, c: &mut Control, ids: &[i64]) {
        let table = self.table();
        let r = sqlx::query(&sql("let_go", &[("table", &table)]))
            .bind(self.oid as i32)
            .bind(ids)
            .execute(&mut **c)
            .await;
        if let Err(e) = r {
            tracing::warn!(error = %e, "pg_task could not let claimed tasks go; the reset will");
        }
        for id in ids {
            c.held.remove(id);
        }
    }

    /// Lets go of `id` without recording anything: the reset will put it back to PLAN.
    async fn release(&self, id: i64) {
        let mut c = match self.ctl().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, id, "pg_task unlock failed");
                return;
            }
        };
        c.held.remove(&id);
        if let Err(e) =
            sqlx::query("SELECT pg_catalog.pg_advisory_unlock($1, ($2 & 2147483647)::int4)")
                .bind(self.oid as i32)
                .bind(id)
                .execute(&mut **c)
                .await
        {
            tracing::warn!(error = %e, id, "pg_task unlock failed");
            drop(c);
            self.check_control().await;
        }
    }
}

pub(super) fn next_same_session(a: &Claimed, b: &Claimed) -> bool {
    a.remote == b.remote
}

pub(super) fn one_char(s: String) -> Option<char> {
    s.chars().next()
}

/// A claimed task from a row of the `claim` statement (`id`, `locked`, then what it runs with).
pub(super) fn claimed(r: &sqlx::postgres::PgRow) -> Claimed {
    let at = |i: usize| i + 2;
    Claimed {
        id: r.get(0),
        input: r.get(at(0)),
        remote: r.get(at(1)),
        hash: r.get(at(2)),
        max: r.get(at(3)),
        count: r.get(at(4)),
        live: Duration::from_millis(r.get::<i64, _>(at(5)).max(0) as u64),
        save: r.get(at(6)),
        timeout_ms: r.get(at(7)),
        format: Format {
            header: r.get(at(8)),
            string: r.get(at(9)),
            delimiter: one_char(r.get(at(10))),
            escape: one_char(r.get(at(11))),
            quote: one_char(r.get(at(12))),
            null: r.get(at(13)),
        },
    }
}
