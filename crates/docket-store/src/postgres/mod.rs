//! PostgreSQL backend: `FOR UPDATE SKIP LOCKED` claims, batch statements over `unnest` arrays,
//! advisory locks for concurrency keys, LISTEN/NOTIFY wake-ups.

use crate::decode;
use crate::*;
use docket_core::{Backoff, Lease};
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions, PgRow};
use sqlx::{ConnectOptions as _, Connection, PgPool, Postgres, Row, Transaction};
use std::str::FromStr;

/// The LISTEN/NOTIFY channel; payload `schema|queue`.
pub const CHANNEL: &str = "docket_available";
/// The channel of finished process steps; payload `schema|task id`.
pub const DONE_CHANNEL: &str = "docket_done";

const COLS: &str = "id, queue, kind, payload, priority, state, run_at, expires_at, attempt, \
    max_attempts, backoff_initial_ms, backoff_coefficient, backoff_max_ms, backoff_jitter, \
    timeout_ms, unique_key, concurrency_key, concurrency_limit, node, result, errors, progress, \
    created_at, attempted_at, finished_at, worker, lease_token, lease_ms, lease_expires_at, \
    cancel_requested_at, trace_id";

/// A PostgreSQL store.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    schema: String,
    relaxed_commit: bool,
}

fn decode(row: &PgRow) -> Result<Task> {
    let id: i64 = row.try_get("id")?;
    let r = format!("task {id}");
    let state: String = row.try_get("state")?;
    let ms = |c: &str| -> Result<Duration> { decode::millis(&r, c, row.try_get::<i64, _>(c)?) };
    Ok(Task {
        id,
        queue: row.try_get("queue")?,
        kind: row.try_get("kind")?,
        payload: row.try_get("payload")?,
        priority: row.try_get("priority")?,
        state: decode::state(&r, &state)?,
        run_at: row.try_get("run_at")?,
        expires_at: row.try_get("expires_at")?,
        attempt: row.try_get("attempt")?,
        max_attempts: row.try_get("max_attempts")?,
        backoff: Backoff {
            initial: ms("backoff_initial_ms")?,
            coefficient: row.try_get("backoff_coefficient")?,
            max: ms("backoff_max_ms")?,
            jitter: row.try_get("backoff_jitter")?,
        },
        timeout: ms("timeout_ms")?,
        unique_key: row.try_get("unique_key")?,
        concurrency_key: row.try_get("concurrency_key")?,
        concurrency_limit: row.try_get("concurrency_limit")?,
        node: row.try_get("node")?,
        trace_id: row.try_get("trace_id")?,
        result: row.try_get("result")?,
        errors: decode::errors(&r, row.try_get("errors")?)?,
        progress: row.try_get("progress")?,
        created_at: row.try_get("created_at")?,
        attempted_at: row.try_get("attempted_at")?,
        finished_at: row.try_get("finished_at")?,
        worker: row.try_get("worker")?,
        lease_expires_at: row.try_get("lease_expires_at")?,
        cancel_requested_at: row.try_get("cancel_requested_at")?,
        lease: None,
        inserted: None,
    })
}

fn decode_process(r: &PgRow) -> Result<docket_core::process::Process> {
    use docket_core::process::Process;
    let namespace: String = r.try_get("namespace")?;
    let id: String = r.try_get("id")?;
    let row = format!("process {namespace}/{id}");
    let st = |c: &str| -> Result<Option<String>> { Ok(r.try_get::<Option<String>, _>(c)?) };
    Ok(Process {
        status: decode::process_status_req(&row, "status", st("status")?.as_deref())?,
        previous_status: decode::process_status(
            &row,
            "previous_status",
            st("previous_status")?.as_deref(),
        )?,
        namespace,
        id,
        status_changed_at: r.try_get("status_changed_at")?,
        detail: r.try_get("detail")?,
        aux_state: r.try_get("aux_state")?,
        metadata: r.try_get("metadata")?,
        corrupted_by: r.try_get("corrupted_by")?,
        created_at: r.try_get("created_at")?,
        last_event_id: r.try_get("last_event_id")?,
    })
}

fn token_of(row: &PgRow) -> Result<Option<String>> {
    Ok(row
        .try_get::<Option<uuid::Uuid>, _>("lease_token")?
        .map(|u| u.to_string()))
}

fn parse_token(t: &str) -> Option<uuid::Uuid> {
    uuid::Uuid::parse_str(t).ok()
}

fn ms(d: Duration) -> i64 {
    d.as_millis().min(i64::MAX as u128) as i64
}

fn queue_settings(row: &PgRow) -> Result<QueueSettings> {
    let r = row
        .try_get::<String, _>("name")
        .map_or_else(|_| "queue".to_string(), |n| format!("queue {n}"));
    let d = |c: &str| decode::millis_opt(&r, c, row.try_get::<Option<i64>, _>(c)?);
    Ok(QueueSettings {
        paused: row.try_get("paused")?,
        concurrency_limit: row.try_get("concurrency_limit")?,
        max_attempts: row.try_get("max_attempts")?,
        backoff: decode::backoff(&r, row.try_get("backoff")?)?,
        timeout: d("timeout_ms")?,
        retention_completed: d("retention_completed_ms")?,
        retention_failed: d("retention_failed_ms")?,
        mask_payload: row.try_get("mask_payload")?,
    })
}

/// Locks `key` for the rest of the transaction: serialises concurrency-limit checks of one key
/// across every node without holding row locks on other tasks.
async fn lock_key(tx: &mut Transaction<'_, Postgres>, key: &str) -> Result<()> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
        .bind(key)
        .execute(&mut **tx)
        .await?;
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
        let mut base =
            PgConnectOptions::from_str(&opts.url)?.log_statements(tracing::log::LevelFilter::Debug);
        // TLS only when asked for (`sslmode=require|verify-ca|verify-full` in the URL, or
        // PGSSLMODE): sqlx's default, `prefer`, would encrypt without checking anything and pay
        // a handshake per connection.
        if !opts.url.contains("sslmode=") && std::env::var_os("PGSSLMODE").is_none() {
            base = base.ssl_mode(sqlx::postgres::PgSslMode::Disable);
        }
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
        let conn = base.options([("search_path", schema.as_str())]);
        let pool = PgPoolOptions::new()
            .max_connections(opts.max_connections.unwrap_or(10))
            .connect_with(conn)
            .await?;
        Ok(PgStore {
            pool,
            schema,
            relaxed_commit: opts.relaxed_commit,
        })
    }

    /// The pool, for tests and tools.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// A transaction whose commit does not wait for the WAL flush (`synchronous_commit = off`),
    /// for claims and completions only. A PostgreSQL crash can forget the last few hundred ms
    /// of them: a forgotten claim leaves the task available, a forgotten completion leaves it
    /// running until its lease expires and the rescuer retries it. Either way the task runs
    /// again — within the at-least-once guarantee — and nothing is lost. Inserts always wait.
    async fn begin_relaxed(&self) -> Result<Transaction<'static, Postgres>> {
        let mut tx = self.pool.begin().await?;
        if self.relaxed_commit {
            sqlx::query("SET LOCAL synchronous_commit = off")
                .execute(&mut *tx)
                .await?;
        }
        Ok(tx)
    }

    /// Failed attempts free their key's and queue's slot: wake those queues.
    async fn notify_freed(
        &self,
        tx: &mut Transaction<'_, Postgres>,
        items: &[(Task, FailDecision, Value)],
    ) -> Result<()> {
        let mut qs: Vec<String> = items.iter().map(|(t, _, _)| t.queue.clone()).collect();
        qs.sort();
        qs.dedup();
        self.notify(tx, &qs).await
    }

    /// Writes notifications of one process in the current transaction. The advisory lock makes
    /// seq order commit order (held until commit), so stream readers never skip a row.
    async fn publish(
        &self,
        tx: &mut Transaction<'_, Postgres>,
        namespace: &str,
        id: &str,
        items: &[(&str, Option<i64>, Value)],
        now: Timestamp,
    ) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('docket-notifications', 0))")
            .execute(&mut **tx)
            .await?;
        let kinds: Vec<&str> = items.iter().map(|i| i.0).collect();
        let ids: Vec<Option<i64>> = items.iter().map(|i| i.1).collect();
        let data: Vec<Value> = items.iter().map(|i| i.2.clone()).collect();
        sqlx::query(
            "INSERT INTO docket_notifications (namespace, process_id, kind, event_id, data, created_at) \
             SELECT $1, $2, k, e, d, $3 FROM unnest($4::text[], $5::bigint[], $6::jsonb[]) \
               WITH ORDINALITY AS x(k, e, d, o) ORDER BY o",
        )
        .bind(namespace)
        .bind(id)
        .bind(now)
        .bind(&kinds)
        .bind(&ids)
        .bind(&data)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// Puts a process in `error` (detail, corrupted_by when given), cancels its waiting tasks and
    /// publishes `failed` — for a failed step given up on and for a zombie.
    #[allow(clippy::too_many_arguments)]
    async fn break_process(
        &self,
        tx: &mut Transaction<'_, Postgres>,
        namespace: &str,
        id: &str,
        detail: &str,
        task_id: i64,
        corrupted_by: Option<i64>,
        now: Timestamp,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE docket_processes SET \
               previous_status = CASE WHEN status <> 'error' THEN status ELSE previous_status END, \
               status_changed_at = CASE WHEN status <> 'error' THEN $3 ELSE status_changed_at END, \
               status = 'error', detail = $4, corrupted_by = COALESCE($5, corrupted_by) \
             WHERE namespace = $1 AND id = $2",
        )
        .bind(namespace)
        .bind(id)
        .bind(now)
        .bind(detail)
        .bind(corrupted_by)
        .execute(&mut **tx)
        .await?;
        sqlx::query(
            "UPDATE docket_tasks SET state = 'cancelled', finished_at = $2 WHERE concurrency_key = $1 \
             AND state IN ('scheduled', 'available', 'retryable')",
        )
        .bind(docket_core::process::key_of(namespace, id))
        .bind(now)
        .execute(&mut **tx)
        .await?;
        let data = serde_json::json!({"detail": detail, "task_id": task_id});
        self.publish(tx, namespace, id, &[("failed", None, data)], now)
            .await
    }

    /// [`Self::break_process`] for many zombie tasks at once (each its own process): three
    /// statements for the whole batch instead of four per task.
    async fn break_zombies(
        &self,
        tx: &mut Transaction<'_, Postgres>,
        zombies: &[(String, String, i64)],
        now: Timestamp,
    ) -> Result<()> {
        if zombies.is_empty() {
            return Ok(());
        }
        let ns: Vec<&str> = zombies.iter().map(|z| z.0.as_str()).collect();
        let ids: Vec<&str> = zombies.iter().map(|z| z.1.as_str()).collect();
        let tasks: Vec<i64> = zombies.iter().map(|z| z.2).collect();
        let keys: Vec<String> = zombies
            .iter()
            .map(|z| docket_core::process::key_of(&z.0, &z.1))
            .collect();
        let data: Vec<Value> = tasks
            .iter()
            .map(|t| serde_json::json!({"detail": ZOMBIE, "task_id": t}))
            .collect();
        sqlx::query(
            "UPDATE docket_processes p SET \
               previous_status = CASE WHEN p.status <> 'error' THEN p.status ELSE p.previous_status END, \
               status_changed_at = CASE WHEN p.status <> 'error' THEN $3 ELSE p.status_changed_at END, \
               status = 'error', detail = $4, corrupted_by = x.task \
             FROM unnest($1::text[], $2::text[], $5::bigint[]) AS x(ns, id, task) \
             WHERE p.namespace = x.ns AND p.id = x.id",
        )
        .bind(&ns)
        .bind(&ids)
        .bind(now)
        .bind(ZOMBIE)
        .bind(&tasks)
        .execute(&mut **tx)
        .await?;
        sqlx::query(
            "UPDATE docket_tasks SET state = 'cancelled', finished_at = $2 \
             WHERE concurrency_key = ANY($1) AND state IN ('scheduled', 'available', 'retryable')",
        )
        .bind(&keys)
        .bind(now)
        .execute(&mut **tx)
        .await?;
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('docket-notifications', 0))")
            .execute(&mut **tx)
            .await?;
        sqlx::query(
            "INSERT INTO docket_notifications (namespace, process_id, kind, event_id, data, created_at) \
             SELECT ns, id, 'failed', NULL, d, $4 FROM unnest($1::text[], $2::text[], $3::jsonb[]) \
               WITH ORDINALITY AS x(ns, id, d, o) ORDER BY o",
        )
        .bind(&ns)
        .bind(&ids)
        .bind(&data)
        .bind(now)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// Tells synchronous callers on every node that these process steps finished.
    async fn notify_done(&self, tx: &mut Transaction<'_, Postgres>, ids: &[i64]) -> Result<()> {
        sqlx::query("SELECT pg_notify($1, $2 || '|' || id) FROM unnest($3::bigint[]) AS x(id)")
            .bind(DONE_CHANNEL)
            .bind(&self.schema)
            .bind(ids)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    async fn notify(&self, tx: &mut Transaction<'_, Postgres>, queues: &[String]) -> Result<()> {
        if queues.is_empty() {
            return Ok(());
        }
        sqlx::query(
            "SELECT pg_notify($1, $2 || '|' || q) FROM (SELECT DISTINCT unnest($3::text[]) AS q) s",
        )
        .bind(CHANNEL)
        .bind(&self.schema)
        .bind(queues)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    async fn counts(
        &self,
        queue: Option<&str>,
    ) -> Result<HashMap<String, std::collections::BTreeMap<TaskState, i64>>> {
        let rows = sqlx::query(
            "SELECT queue, state, count(*) AS n FROM docket_tasks \
             WHERE ($1::text IS NULL OR queue = $1) GROUP BY queue, state",
        )
        .bind(queue)
        .fetch_all(&self.pool)
        .await?;
        let mut out: HashMap<String, _> = HashMap::new();
        for r in rows {
            let q: String = r.try_get("queue")?;
            let st: String = r.try_get("state")?;
            let n: i64 = r.try_get("n")?;
            if let Ok(st) = st.parse::<TaskState>() {
                out.entry(q).or_insert_with(empty_counts).insert(st, n);
            }
        }
        Ok(out)
    }

    /// Fails a held attempt that ran past its deadline (row locked in `tx`).
    async fn fail_timed_out(
        &self,
        tx: &mut Transaction<'_, Postgres>,
        t: Task,
        now: Timestamp,
    ) -> Result<()> {
        let d = t.fail_decision(now, None, false);
        let e = error_entry(&t, TIMEOUT_MESSAGE, None, now);
        let apply = [(t, d, e)];
        Self::apply_failures(tx, &apply, now).await?;
        self.notify_freed(tx, &apply).await
    }

    /// Applies fail decisions to rows locked in `tx`.
    async fn apply_failures(
        tx: &mut Transaction<'_, Postgres>,
        items: &[(Task, FailDecision, Value)],
        now: Timestamp,
    ) -> Result<()> {
        if items.is_empty() {
            return Ok(());
        }
        let mut ids = Vec::with_capacity(items.len());
        let mut states = Vec::with_capacity(items.len());
        let mut run_ats = Vec::with_capacity(items.len());
        let mut finished: Vec<Option<Timestamp>> = Vec::with_capacity(items.len());
        let mut errs = Vec::with_capacity(items.len());
        for (t, d, e) in items {
            ids.push(t.id);
            let (st, run_at, fin) = match d {
                FailDecision::Retry { run_at } => (TaskState::Retryable, *run_at, None),
                FailDecision::Discard => (TaskState::Discarded, t.run_at, Some(now)),
                FailDecision::Cancel => (TaskState::Cancelled, t.run_at, Some(now)),
            };
            states.push(st.as_str().to_string());
            run_ats.push(run_at);
            finished.push(fin);
            errs.push(e.clone());
        }
        sqlx::query(
            "UPDATE docket_tasks t SET state = x.state, run_at = x.run_at, finished_at = x.fin, \
               errors = t.errors || jsonb_build_array(x.err), lease_expires_at = NULL \
             FROM unnest($1::bigint[], $2::text[], $3::timestamptz[], $4::timestamptz[], $5::jsonb[]) \
               AS x(id, state, run_at, fin, err) \
             WHERE t.id = x.id",
        )
        .bind(&ids)
        .bind(&states)
        .bind(&run_ats)
        .bind(&finished)
        .bind(&errs)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }
}

use docket_core::FailDecision;

/// Detail and error of a process task whose lease ran out (progressor's zombie).
const ZOMBIE: &str = "zombie detected";

fn outcome_for(d: &FailDecision, t: &Task) -> LeaseOutcome {
    match d {
        FailDecision::Retry { run_at } => LeaseOutcome::Ok {
            state: TaskState::Retryable,
            run_at: *run_at,
            labels: TaskLabels::of(t),
        },
        FailDecision::Discard => LeaseOutcome::Ok {
            state: TaskState::Discarded,
            run_at: t.run_at,
            labels: TaskLabels::of(t),
        },
        FailDecision::Cancel => LeaseOutcome::Cancelled,
    }
}

/// Why a lease-checked change did not apply to a row: cancelled (the token was the last lease
/// and the task got cancelled) or lost.
fn lease_refusal(row: &PgRow, token: &str) -> Result<LeaseOutcome> {
    let state: String = row.try_get("state")?;
    let held = token_of(row)?.as_deref() == Some(token);
    Ok(if held && state == "cancelled" {
        LeaseOutcome::Cancelled
    } else {
        LeaseOutcome::LeaseLost
    })
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

    async fn queue_settings_many(
        &self,
        names: &[String],
    ) -> Result<HashMap<String, QueueSettings>> {
        let rows = sqlx::query("SELECT * FROM docket_queues WHERE name = ANY($1)")
            .bind(names)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get::<String, _>("name")?, queue_settings(r)?)))
            .collect()
    }

    async fn task_insert_many(&self, p: TaskInsertManyParams) -> Result<Vec<Task>> {
        let n = p.tasks.len();
        if n == 0 {
            return Ok(vec![]);
        }
        let mut tasks = p.tasks;
        // Payloads are moved out for binding and back afterwards: no deep copies.
        let payloads: Vec<Value> = tasks
            .iter_mut()
            .map(|t| std::mem::take(&mut t.payload))
            .collect();
        let mut conn = self.pool.acquire().await?;
        let rows = self
            .insert_rows(&mut conn, &tasks, &payloads, p.now)
            .await?;
        for (t, payload) in tasks.iter_mut().zip(payloads) {
            t.payload = payload;
        }
        // Identity values are taken in insertion (ordinality) order.
        let mut rows = rows;
        rows.sort_by_key(|r| r.0);
        if rows.len() == n {
            return Ok(tasks
                .into_iter()
                .zip(rows)
                .map(|(t, (id, _))| t.into_task(id, p.now))
                .collect());
        }
        // Some unique keys matched: the inserted rows are, in order, the inputs without a key
        // plus the first input of each new key; the rest answer with the existing task.
        let inserted_keys: std::collections::HashSet<String> =
            rows.iter().filter_map(|r| r.1.clone()).collect();
        let mut ids = rows.into_iter().map(|r| r.0);
        let mut first_of_key: HashMap<String, Task> = HashMap::new();
        let mut out = Vec::with_capacity(n);
        for t in tasks {
            match t.unique_key.clone() {
                None => {
                    let id = ids.next().ok_or_else(|| {
                        StoreError::Invalid("insert returned fewer rows than expected".into())
                    })?;
                    out.push(t.into_task(id, p.now));
                }
                Some(k) if inserted_keys.contains(&k) && !first_of_key.contains_key(&k) => {
                    let id = ids.next().ok_or_else(|| {
                        StoreError::Invalid("insert returned fewer rows than expected".into())
                    })?;
                    let task = t.into_task(id, p.now);
                    first_of_key.insert(k, task.clone());
                    out.push(task);
                }
                Some(k) => {
                    let mut existing = match first_of_key.get(&k) {
                        Some(t) => t.clone(),
                        None => {
                            let sql = format!(
                                "SELECT {COLS} FROM docket_tasks WHERE unique_key = $1 AND state IN \
                                 ('scheduled','available','running','retryable')"
                            );
                            let row = sqlx::query(&sql)
                                .bind(&k)
                                .fetch_optional(&self.pool)
                                .await?
                                .ok_or_else(|| {
                                    StoreError::Conflict(format!(
                                        "unique_key {k:?} changed while inserting; try again"
                                    ))
                                })?;
                            decode(&row)?
                        }
                    };
                    existing.inserted = Some(false);
                    out.push(existing);
                }
            }
        }
        Ok(out)
    }

    async fn task_get(&self, id: i64) -> Result<Option<Task>> {
        let sql = format!("SELECT {COLS} FROM docket_tasks WHERE id = $1");
        let row = sqlx::query(&sql)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(decode).transpose()
    }

    async fn task_list(&self, p: TaskListParams) -> Result<Vec<Task>> {
        let (cmp, order) = if p.descending {
            ("<", "DESC")
        } else {
            (">", "ASC")
        };
        let sql = format!(
            "SELECT {COLS} FROM docket_tasks WHERE ($1::text IS NULL OR queue = $1) \
             AND ($2::text[] IS NULL OR state = ANY($2)) AND ($3::text IS NULL OR kind = $3) \
             AND ($4::bigint IS NULL OR id {cmp} $4) AND ($6::text IS NULL OR concurrency_key = $6) \
             AND ($7::text IS NULL OR strpos(lower(payload::text || ' ' || COALESCE(errors::text, '')), lower($7)) > 0) \
             ORDER BY id {order} LIMIT $5"
        );
        let rows = sqlx::query(&sql)
            .bind(&p.queue)
            .bind(
                (!p.states.is_empty())
                    .then(|| p.states.iter().map(|s| s.as_str()).collect::<Vec<_>>()),
            )
            .bind(&p.kind)
            .bind(p.after)
            .bind(p.limit)
            .bind(&p.concurrency_key)
            .bind(&p.text)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(decode).collect()
    }

    async fn task_claim(&self, p: TaskClaimParams) -> Result<Vec<Task>> {
        if p.limit <= 0 {
            return Ok(vec![]);
        }
        let mut tx = self.begin_relaxed().await?;
        let cands = sqlx::query(
            "SELECT t.id, t.concurrency_key, t.concurrency_limit, q.concurrency_limit AS queue_limit \
             FROM docket_tasks t LEFT JOIN docket_queues q ON q.name = t.queue \
             WHERE t.state = 'available' AND t.queue = $1 \
               AND (t.node IS NULL OR t.node = $2) \
               AND ($5::text[] IS NULL OR t.kind = ANY($5)) \
               AND (t.expires_at IS NULL OR t.expires_at > $3) \
               AND (q.paused IS NULL OR NOT q.paused) \
               AND (t.concurrency_key IS NULL OR (SELECT count(*) FROM docket_tasks r \
                    WHERE r.state = 'running' AND r.concurrency_key = t.concurrency_key) \
                    < t.concurrency_limit) \
             ORDER BY t.priority DESC, t.run_at, t.id LIMIT $4 \
             FOR UPDATE OF t SKIP LOCKED",
        )
        .bind(&p.queue)
        .bind(&p.node)
        .bind(p.now)
        .bind(p.limit)
        .bind(&p.kinds)
        .fetch_all(&mut *tx)
        .await?;
        if cands.is_empty() {
            tx.commit().await?;
            return Ok(vec![]);
        }
        let mut ids: Vec<i64> = Vec::with_capacity(cands.len());
        let queue_limit: Option<i32> = cands[0].try_get("queue_limit")?;
        let needs_keys = cands.iter().any(|r| {
            r.try_get::<Option<String>, _>("concurrency_key")
                .ok()
                .flatten()
                .is_some()
        });
        if queue_limit.is_none() && !needs_keys {
            for r in &cands {
                ids.push(r.try_get("id")?);
            }
        } else {
            // Slow path: serialise on the queue and on each key (sorted, so two claimers never
            // wait on each other in opposite orders), then count what runs now.
            let mut room = usize::MAX;
            if let Some(limit) = queue_limit {
                lock_key(&mut tx, &format!("docket-queue:{}", p.queue)).await?;
                let running: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM docket_tasks WHERE state = 'running' AND queue = $1",
                )
                .bind(&p.queue)
                .fetch_one(&mut *tx)
                .await?;
                room = (limit as i64 - running).max(0) as usize;
            }
            let mut keys: Vec<(String, i32)> = vec![];
            for r in &cands {
                if let Some(k) = r.try_get::<Option<String>, _>("concurrency_key")? {
                    let l: Option<i32> = r.try_get("concurrency_limit")?;
                    keys.push((k, l.unwrap_or(1)));
                }
            }
            keys.sort();
            keys.dedup_by(|a, b| a.0 == b.0);
            let mut key_room: HashMap<String, i64> = HashMap::new();
            for (k, l) in &keys {
                lock_key(&mut tx, &format!("docket-key:{k}")).await?;
                let running: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM docket_tasks WHERE state = 'running' AND concurrency_key = $1",
                )
                .bind(k)
                .fetch_one(&mut *tx)
                .await?;
                key_room.insert(k.clone(), *l as i64 - running);
            }
            for r in &cands {
                if ids.len() >= room {
                    break;
                }
                if let Some(k) = r.try_get::<Option<String>, _>("concurrency_key")? {
                    let left = key_room.get_mut(&k).expect("key counted");
                    if *left <= 0 {
                        continue;
                    }
                    *left -= 1;
                }
                ids.push(r.try_get("id")?);
            }
        }
        if ids.is_empty() {
            tx.commit().await?;
            return Ok(vec![]);
        }
        let sql = format!(
            "UPDATE docket_tasks SET state = 'running', attempt = attempt + 1, attempted_at = $2, \
               worker = $3, lease_token = gen_random_uuid(), lease_ms = COALESCE($4, timeout_ms), \
               lease_expires_at = $2 + (CASE WHEN queue LIKE 'process:%' THEN COALESCE($4, timeout_ms) \
                 ELSE LEAST(COALESCE($4, timeout_ms), timeout_ms) END) * interval '1 millisecond', \
               cancel_requested_at = NULL \
             WHERE id = ANY($1) RETURNING {COLS}"
        );
        let rows = sqlx::query(&sql)
            .bind(&ids)
            .bind(p.now)
            .bind(&p.worker)
            .bind(p.lease.map(ms))
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let mut t = decode(r)?;
            t.lease = Some(Lease {
                token: token_of(r)?.unwrap_or_default(),
                expires_at: t.lease_expires_at.unwrap_or(p.now),
            });
            out.push(t);
        }
        sort_claim_order(&mut out);
        Ok(out)
    }

    async fn task_heartbeat(&self, p: TaskHeartbeatParams) -> Result<Task> {
        let Some(token) = parse_token(&p.token) else {
            return match self.task_get(p.id).await? {
                None => Err(StoreError::NotFound(format!("task {}", p.id))),
                Some(_) => Err(StoreError::LeaseLost),
            };
        };
        let mut tx = self.pool.begin().await?;
        let sql = format!(
            "UPDATE docket_tasks SET progress = COALESCE($3, progress), \
               lease_ms = COALESCE($4, lease_ms), \
               lease_expires_at = CASE WHEN queue LIKE 'process:%' \
                 THEN $5 + COALESCE($4, lease_ms, timeout_ms) * interval '1 millisecond' \
                 ELSE LEAST($5 + COALESCE($4, lease_ms, timeout_ms) * interval '1 millisecond', \
                   attempted_at + timeout_ms * interval '1 millisecond') END \
             WHERE id = $1 AND lease_token = $2 AND state = 'running' AND cancel_requested_at IS NULL \
               AND (queue LIKE 'process:%' OR $5 < attempted_at + timeout_ms * interval '1 millisecond') \
             RETURNING {COLS}"
        );
        if let Some(row) = sqlx::query(&sql)
            .bind(p.id)
            .bind(token)
            .bind(&p.progress)
            .bind(p.lease.map(ms))
            .bind(p.now)
            .fetch_optional(&mut *tx)
            .await?
        {
            tx.commit().await?;
            return decode(&row);
        }
        let sql = format!("SELECT {COLS} FROM docket_tasks WHERE id = $1 FOR UPDATE");
        let Some(row) = sqlx::query(&sql)
            .bind(p.id)
            .fetch_optional(&mut *tx)
            .await?
        else {
            return Err(StoreError::NotFound(format!("task {}", p.id)));
        };
        let t = decode(&row)?;
        let held = token_of(&row)?.as_deref() == Some(p.token.as_str());
        if held && t.state == TaskState::Running && t.cancel_requested_at.is_some() {
            sqlx::query(
                "UPDATE docket_tasks SET state = 'cancelled', finished_at = $2, \
                 lease_expires_at = NULL, progress = COALESCE($3, progress) WHERE id = $1",
            )
            .bind(p.id)
            .bind(p.now)
            .bind(&p.progress)
            .execute(&mut *tx)
            .await?;
            self.notify(&mut tx, std::slice::from_ref(&t.queue)).await?;
            tx.commit().await?;
            return Err(StoreError::Cancelled);
        }
        if held && t.state == TaskState::Running && past_deadline(&t, p.now) {
            self.fail_timed_out(&mut tx, t, p.now).await?;
            tx.commit().await?;
            return Err(StoreError::TimedOut);
        }
        tx.commit().await?;
        Err(match lease_refusal(&row, &p.token)? {
            LeaseOutcome::Cancelled => StoreError::Cancelled,
            _ => StoreError::LeaseLost,
        })
    }

    async fn task_complete_many(
        &self,
        items: &[TaskComplete],
        now: Timestamp,
    ) -> Result<Vec<LeaseOutcome>> {
        if items.is_empty() {
            return Ok(vec![]);
        }
        let mut ids = Vec::with_capacity(items.len());
        let mut tokens = Vec::with_capacity(items.len());
        let mut results = Vec::with_capacity(items.len());
        for it in items {
            ids.push(it.id);
            // A malformed token can never match: the nil uuid is never issued.
            tokens.push(parse_token(&it.token).unwrap_or(uuid::Uuid::nil()));
            results.push(it.result.clone());
        }
        let mut tx = self.begin_relaxed().await?;
        // `frees`: finishing it lets another task of its key or limited queue start, so the
        // queue's claimers are woken (on every node) instead of waiting for a poll.
        let done: Vec<(i64, Timestamp, String, bool, String, Option<Timestamp>)> = sqlx::query_as(
            "UPDATE docket_tasks t SET state = 'completed', finished_at = $1, result = x.result, \
               lease_expires_at = NULL \
             FROM unnest($2::bigint[], $3::uuid[], $4::jsonb[]) AS x(id, token, result) \
             WHERE t.id = x.id AND t.lease_token = x.token AND t.state = 'running' \
               AND t.cancel_requested_at IS NULL \
               AND (t.queue LIKE 'process:%' OR $1 < t.attempted_at + t.timeout_ms * interval '1 millisecond') \
             RETURNING t.id, t.run_at, t.queue, (t.concurrency_key IS NOT NULL OR EXISTS ( \
               SELECT 1 FROM docket_queues q WHERE q.name = t.queue AND q.concurrency_limit IS NOT NULL)) AS frees, \
               t.kind, t.attempted_at",
        )
        .bind(now)
        .bind(&ids)
        .bind(&tokens)
        .bind(&results)
        .fetch_all(&mut *tx)
        .await?;
        let mut freed: Vec<String> = done.iter().filter(|r| r.3).map(|r| r.2.clone()).collect();
        freed.sort();
        freed.dedup();
        self.notify(&mut tx, &freed).await?;
        let done: HashMap<i64, (Timestamp, TaskLabels)> = done
            .into_iter()
            .map(|r| {
                (
                    r.0,
                    (
                        r.1,
                        TaskLabels {
                            queue: r.2,
                            kind: r.4,
                            attempted_at: r.5,
                        },
                    ),
                )
            })
            .collect();
        let mut out = Vec::with_capacity(items.len());
        if done.len() == items.len() {
            tx.commit().await?;
            for it in items {
                let (run_at, labels) = done[&it.id].clone();
                out.push(LeaseOutcome::Ok {
                    state: TaskState::Completed,
                    run_at,
                    labels,
                });
            }
            return Ok(out);
        }
        let missing: Vec<i64> = ids
            .iter()
            .copied()
            .filter(|i| !done.contains_key(i))
            .collect();
        let sql = format!("SELECT {COLS} FROM docket_tasks WHERE id = ANY($1) FOR UPDATE");
        let rows = sqlx::query(&sql).bind(&missing).fetch_all(&mut *tx).await?;
        let mut timed_out = vec![];
        let rows: HashMap<i64, PgRow> = rows
            .into_iter()
            .map(|r| (r.get::<i64, _>("id"), r))
            .collect();
        for it in items {
            if let Some((run_at, labels)) = done.get(&it.id) {
                out.push(LeaseOutcome::Ok {
                    state: TaskState::Completed,
                    run_at: *run_at,
                    labels: labels.clone(),
                });
                continue;
            }
            let Some(row) = rows.get(&it.id) else {
                out.push(LeaseOutcome::NotFound);
                continue;
            };
            let state: String = row.try_get("state")?;
            let requested: Option<Timestamp> = row.try_get("cancel_requested_at")?;
            let held = token_of(row)?.as_deref() == Some(it.token.as_str());
            if held && state == "running" && requested.is_some() {
                // The work was done, but a cancel won: keep its result, end it cancelled.
                sqlx::query(
                    "UPDATE docket_tasks SET state = 'cancelled', finished_at = $2, result = $3, \
                     lease_expires_at = NULL WHERE id = $1",
                )
                .bind(it.id)
                .bind(now)
                .bind(&it.result)
                .execute(&mut *tx)
                .await?;
                out.push(LeaseOutcome::Cancelled);
            } else if held && state == "running" {
                // Held, running, not cancelled, yet not updated: past its deadline.
                let t = decode(row)?;
                let d = t.fail_decision(now, None, false);
                let e = error_entry(&t, TIMEOUT_MESSAGE, None, now);
                timed_out.push((t, d, e));
                out.push(LeaseOutcome::TimedOut);
            } else {
                out.push(lease_refusal(row, &it.token)?);
            }
        }
        Self::apply_failures(&mut tx, &timed_out, now).await?;
        self.notify_freed(&mut tx, &timed_out).await?;
        tx.commit().await?;
        Ok(out)
    }

    async fn task_fail_many(
        &self,
        items: &[TaskFail],
        worker: Option<&str>,
        now: Timestamp,
    ) -> Result<Vec<LeaseOutcome>> {
        if items.is_empty() {
            return Ok(vec![]);
        }
        let ids: Vec<i64> = items.iter().map(|i| i.id).collect();
        let mut tx = self.pool.begin().await?;
        let sql =
            format!("SELECT {COLS} FROM docket_tasks WHERE id = ANY($1) ORDER BY id FOR UPDATE");
        let rows = sqlx::query(&sql).bind(&ids).fetch_all(&mut *tx).await?;
        let rows: HashMap<i64, PgRow> = rows
            .into_iter()
            .map(|r| (r.get::<i64, _>("id"), r))
            .collect();
        let mut apply = vec![];
        let mut out = Vec::with_capacity(items.len());
        let mut touched = std::collections::HashSet::new();
        for it in items {
            let Some(row) = rows.get(&it.id) else {
                out.push(LeaseOutcome::NotFound);
                continue;
            };
            let t = decode(row)?;
            let held = token_of(row)?.as_deref() == Some(it.token.as_str());
            if !held || t.state != TaskState::Running || !touched.insert(it.id) {
                out.push(lease_refusal(row, &it.token)?);
                continue;
            }
            let d = t.fail_decision(now, it.retry_in, it.permanent);
            out.push(outcome_for(&d, &t));
            let e = error_entry(&t, &it.error, worker, now);
            apply.push((t, d, e));
        }
        Self::apply_failures(&mut tx, &apply, now).await?;
        self.notify_freed(&mut tx, &apply).await?;
        tx.commit().await?;
        Ok(out)
    }

    async fn task_cancel(&self, id: i64, now: Timestamp) -> Result<Task> {
        let sql = format!(
            "UPDATE docket_tasks SET \
               state = CASE WHEN state = 'running' THEN state ELSE 'cancelled' END, \
               finished_at = CASE WHEN state = 'running' THEN finished_at ELSE $2 END, \
               cancel_requested_at = CASE WHEN state = 'running' THEN COALESCE(cancel_requested_at, $2) \
                 ELSE cancel_requested_at END \
             WHERE id = $1 AND state IN ('scheduled','available','running','retryable') RETURNING {COLS}"
        );
        if let Some(r) = sqlx::query(&sql)
            .bind(id)
            .bind(now)
            .fetch_optional(&self.pool)
            .await?
        {
            return decode(&r);
        }
        match self.task_get(id).await? {
            None => Err(StoreError::NotFound(format!("task {id}"))),
            Some(t) if t.state == TaskState::Cancelled => Ok(t),
            Some(t) => Err(StoreError::InvalidState(format!(
                "task {id} is {} and cannot be cancelled",
                t.state
            ))),
        }
    }

    async fn task_retry(&self, id: i64, now: Timestamp) -> Result<Task> {
        let mut tx = self.pool.begin().await?;
        let sql = format!(
            "UPDATE docket_tasks SET state = 'available', run_at = $2, finished_at = NULL, \
               cancel_requested_at = NULL, max_attempts = GREATEST(max_attempts, attempt + 1) \
             WHERE id = $1 AND state IN ('discarded','cancelled') RETURNING {COLS}"
        );
        let row = sqlx::query(&sql)
            .bind(id)
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = row else {
            drop(tx);
            return match self.task_get(id).await? {
                None => Err(StoreError::NotFound(format!("task {id}"))),
                Some(t) => Err(StoreError::InvalidState(format!(
                    "task {id} is {}; only discarded or cancelled tasks can be retried",
                    t.state
                ))),
            };
        };
        let t = decode(&row)?;
        self.notify(&mut tx, std::slice::from_ref(&t.queue)).await?;
        tx.commit().await?;
        Ok(t)
    }

    async fn task_promote(&self, now: Timestamp, limit: i64) -> Result<Promoted> {
        let mut tx = self.pool.begin().await?;
        let queues: Vec<String> = sqlx::query_scalar(
            "UPDATE docket_tasks SET state = 'available' WHERE id IN ( \
               SELECT id FROM docket_tasks WHERE state IN ('scheduled','retryable') AND run_at <= $1 \
               AND (expires_at IS NULL OR expires_at > $1) \
               ORDER BY run_at LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING queue",
        )
        .bind(now)
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?;
        let count = queues.len() as u64;
        let mut qs = queues;
        qs.sort();
        qs.dedup();
        self.notify(&mut tx, &qs).await?;
        tx.commit().await?;
        Ok(Promoted { count, queues: qs })
    }

    async fn task_next_due(&self) -> Result<Option<Timestamp>> {
        Ok(sqlx::query_scalar(
            "SELECT min(run_at) FROM docket_tasks WHERE state IN ('scheduled','retryable')",
        )
        .fetch_one(&self.pool)
        .await?)
    }

    async fn task_rescue(&self, now: Timestamp, limit: i64) -> Result<Vec<TaskLabels>> {
        let mut tx = self.pool.begin().await?;
        let sql = format!(
            "SELECT {COLS} FROM docket_tasks WHERE state = 'running' AND lease_expires_at < $1 \
               AND queue NOT LIKE 'process:%' \
             ORDER BY lease_expires_at LIMIT $2 FOR UPDATE SKIP LOCKED"
        );
        let rows = sqlx::query(&sql)
            .bind(now)
            .bind(limit)
            .fetch_all(&mut *tx)
            .await?;
        let mut apply = Vec::with_capacity(rows.len());
        for r in &rows {
            let t = decode(r)?;
            let d = t.fail_decision(now, None, false);
            let why = if past_deadline(&t, now) {
                TIMEOUT_MESSAGE
            } else {
                "lease expired"
            };
            let e = error_entry(&t, why, None, now);
            apply.push((t, d, e));
        }
        Self::apply_failures(&mut tx, &apply, now).await?;
        self.notify_freed(&mut tx, &apply).await?;
        tx.commit().await?;
        Ok(apply.iter().map(|(t, _, _)| TaskLabels::of(t)).collect())
    }

    async fn task_expire(&self, now: Timestamp, limit: i64) -> Result<u64> {
        let r = sqlx::query(
            "UPDATE docket_tasks SET state = 'discarded', finished_at = $1, \
               errors = errors || jsonb_build_array(jsonb_build_object('attempt', attempt, 'at', $1, \
                 'worker', NULL, 'message', 'expired: not started before expires_at')) \
             WHERE id IN (SELECT id FROM docket_tasks WHERE expires_at <= $1 \
               AND state IN ('scheduled','available','retryable') LIMIT $2 FOR UPDATE SKIP LOCKED)",
        )
        .bind(now)
        .bind(limit)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected())
    }

    async fn task_prune(&self, p: TaskPruneParams) -> Result<u64> {
        // Queues with their own retention are pruned by their own cutoffs; the rest by the
        // defaults. One statement, one small batch: it never holds many rows locked.
        let r = sqlx::query(
            "DELETE FROM docket_tasks WHERE id IN ( \
               SELECT t.id FROM docket_tasks t LEFT JOIN docket_queues q ON q.name = t.queue \
               WHERE t.state IN ('completed','discarded','cancelled') AND t.finished_at < $1 - \
                 CASE WHEN t.state = 'completed' \
                   THEN COALESCE(q.retention_completed_ms, $2) \
                   ELSE COALESCE(q.retention_failed_ms, $3) END * interval '1 millisecond' \
                 AND NOT (t.queue LIKE 'process:%' AND EXISTS (SELECT 1 FROM docket_processes p \
                   WHERE p.namespace = substr(t.queue, 9) AND t.concurrency_key = p.namespace || ':' || p.id)) \
               LIMIT $4 FOR UPDATE OF t SKIP LOCKED)",
        )
        .bind(p.now)
        .bind(ms(p.retention_completed))
        .bind(ms(p.retention_failed))
        .bind(p.limit)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected())
    }

    async fn aux_prune(&self, p: AuxPruneParams) -> Result<AuxPruned> {
        let cut = |d: Duration| docket_core::time::sub(p.now, d);
        let notifications = sqlx::query(
            "DELETE FROM docket_notifications WHERE seq IN ( \
               SELECT n.seq FROM docket_notifications n \
               LEFT JOIN docket_sinks s ON s.name = 'webhook:' || n.namespace \
               WHERE n.created_at < $1 AND (s.name IS NULL OR n.seq <= s.seq) \
               ORDER BY n.seq LIMIT $2)",
        )
        .bind(cut(p.notifications))
        .bind(p.limit)
        .execute(&self.pool)
        .await?
        .rows_affected();
        let audit = sqlx::query(
            "DELETE FROM docket_audit WHERE id IN (SELECT id FROM docket_audit WHERE at < $1 \
             ORDER BY id LIMIT $2)",
        )
        .bind(cut(p.audit))
        .bind(p.limit)
        .execute(&self.pool)
        .await?
        .rows_affected();
        let nodes =
            sqlx::query("DELETE FROM docket_nodes WHERE COALESCE(stopped_at, heartbeat_at) < $1")
                .bind(cut(p.nodes))
                .execute(&self.pool)
                .await?
                .rows_affected();
        Ok(AuxPruned {
            notifications,
            audit,
            nodes,
        })
    }

    async fn queue_list(&self) -> Result<Vec<QueueStats>> {
        let counts = self.counts(None).await?;
        let rows = sqlx::query("SELECT * FROM docket_queues")
            .fetch_all(&self.pool)
            .await?;
        let settings = rows
            .iter()
            .map(|r| Ok((r.try_get::<String, _>("name")?, queue_settings(r)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(merge_queues(settings, counts))
    }

    async fn queue_get(&self, name: &str) -> Result<QueueStats> {
        let row = sqlx::query("SELECT * FROM docket_queues WHERE name = $1")
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        let settings = row
            .as_ref()
            .map(queue_settings)
            .transpose()?
            .unwrap_or_default();
        let counts = self
            .counts(Some(name))
            .await?
            .remove(name)
            .unwrap_or_else(empty_counts);
        Ok(QueueStats {
            name: name.to_string(),
            settings,
            counts,
        })
    }

    async fn queue_put(&self, name: &str, s: &QueueSettings, now: Timestamp) -> Result<QueueStats> {
        let backoff = s
            .backoff
            .map(|b| serde_json::to_value(b).expect("backoff serialises"));
        sqlx::query(
            "INSERT INTO docket_queues (name, paused, concurrency_limit, max_attempts, backoff, \
               timeout_ms, retention_completed_ms, retention_failed_ms, updated_at, mask_payload) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
             ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, \
               concurrency_limit = excluded.concurrency_limit, max_attempts = excluded.max_attempts, \
               backoff = excluded.backoff, timeout_ms = excluded.timeout_ms, \
               retention_completed_ms = excluded.retention_completed_ms, \
               retention_failed_ms = excluded.retention_failed_ms, updated_at = excluded.updated_at, \
               mask_payload = excluded.mask_payload",
        )
        .bind(name)
        .bind(s.paused)
        .bind(s.concurrency_limit)
        .bind(s.max_attempts)
        .bind(backoff)
        .bind(s.timeout.map(ms))
        .bind(s.retention_completed.map(ms))
        .bind(s.retention_failed.map(ms))
        .bind(now)
        .bind(s.mask_payload)
        .execute(&self.pool)
        .await?;
        if !s.paused {
            // Resuming may make tasks claimable: wake the claimers.
            let mut tx = self.pool.begin().await?;
            self.notify(&mut tx, &[name.to_string()]).await?;
            tx.commit().await?;
        }
        self.queue_get(name).await
    }

    async fn queue_set_paused(
        &self,
        name: &str,
        paused: bool,
        now: Timestamp,
    ) -> Result<QueueStats> {
        let mut s = self.queue_get(name).await?.settings;
        s.paused = paused;
        self.queue_put(name, &s, now).await
    }

    async fn node_heartbeat(&self, n: &NodeRecord) -> Result<()> {
        sqlx::query(
            "INSERT INTO docket_nodes (name, started_at, heartbeat_at, stopped_at, version, info) \
             VALUES ($1, $2, $3, NULL, $4, $5) ON CONFLICT (name) DO UPDATE SET \
             started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at, \
             stopped_at = NULL, version = excluded.version, info = excluded.info",
        )
        .bind(&n.name)
        .bind(n.started_at)
        .bind(n.heartbeat_at)
        .bind(&n.version)
        .bind(&n.info)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn node_stop(&self, name: &str, now: Timestamp) -> Result<()> {
        sqlx::query("UPDATE docket_nodes SET stopped_at = $2 WHERE name = $1")
            .bind(name)
            .bind(now)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn node_list(&self) -> Result<Vec<NodeRecord>> {
        let rows = sqlx::query("SELECT * FROM docket_nodes ORDER BY name")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(NodeRecord {
                    name: r.try_get("name")?,
                    started_at: r.try_get("started_at")?,
                    heartbeat_at: r.try_get("heartbeat_at")?,
                    stopped_at: r.try_get("stopped_at")?,
                    version: r.try_get("version")?,
                    info: r.try_get("info")?,
                })
            })
            .collect()
    }

    async fn listen(&self) -> Result<Option<tokio::sync::mpsc::Receiver<Wake>>> {
        let mut l = PgListener::connect_with(&self.pool).await?;
        l.listen_all([CHANNEL, DONE_CHANNEL]).await?;
        let (tx, rx) = tokio::sync::mpsc::channel(1024);
        let prefix = format!("{}|", self.schema);
        let pool = self.pool.clone();
        tokio::spawn(async move {
            loop {
                match l.try_recv().await {
                    Ok(Some(n)) => {
                        let Some(rest) = n.payload().strip_prefix(&prefix) else {
                            continue;
                        };
                        let wake = if n.channel() == DONE_CHANNEL {
                            match rest.parse() {
                                Ok(id) => Wake::Task(id),
                                Err(_) => continue,
                            }
                        } else if rest.is_empty() {
                            // A plain-SQL insert (migration 0009): no queue named.
                            Wake::All
                        } else {
                            Wake::Queue(rest.to_string())
                        };
                        if tx.send(wake).await.is_err() {
                            return;
                        }
                    }
                    // The connection dropped; PgListener reconnects on the next call.
                    // Notifications sent meanwhile are lost: tell waiters to look anyway.
                    Ok(None) => {
                        if tx.send(Wake::All).await.is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        if tx.is_closed() || pool.is_closed() {
                            return;
                        }
                        tracing::warn!(error = %e, "LISTEN connection failed; retrying in 1s");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
            }
        });
        Ok(Some(rx))
    }

    async fn namespace_put(&self, name: &str, config: &Value, now: Timestamp) -> Result<()> {
        sqlx::query(
            "INSERT INTO docket_namespaces (name, config, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (name) DO UPDATE SET config = excluded.config, updated_at = excluded.updated_at",
        )
        .bind(name)
        .bind(config)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn namespace_list(&self) -> Result<Vec<(String, Value)>> {
        Ok(
            sqlx::query_as("SELECT name, config FROM docket_namespaces ORDER BY name")
                .fetch_all(&self.pool)
                .await?,
        )
    }

    async fn task_find_by_unique_key(&self, key: &str) -> Result<Option<Task>> {
        let sql = format!(
            "SELECT {COLS} FROM docket_tasks WHERE unique_key = $1 ORDER BY id DESC LIMIT 1"
        );
        let row = sqlx::query(&sql)
            .bind(key)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(decode).transpose()
    }

    async fn process_create(
        &self,
        namespace: &str,
        id: &str,
        init: ResolvedTask,
        now: Timestamp,
    ) -> Result<Task> {
        let mut tx = self.pool.begin().await?;
        let created: Option<String> = sqlx::query_scalar(
            "INSERT INTO docket_processes (namespace, id, status, status_changed_at, created_at) \
             VALUES ($1, $2, 'init', $3, $3) ON CONFLICT DO NOTHING RETURNING id",
        )
        .bind(namespace)
        .bind(id)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
        if created.is_none() {
            return Err(StoreError::Conflict(format!(
                "process {namespace}/{id} exists"
            )));
        }
        let t = self.insert_one(&mut tx, init, now).await?;
        self.publish(
            &mut tx,
            namespace,
            id,
            &[("created", None, serde_json::json!({}))],
            now,
        )
        .await?;
        tx.commit().await?;
        Ok(t)
    }

    async fn process_enqueue(
        &self,
        namespace: &str,
        id: &str,
        task: ResolvedTask,
        require: docket_core::process::ProcessStatus,
        now: Timestamp,
    ) -> Result<Task> {
        let mut tx = self.pool.begin().await?;
        // FOR SHARE: a concurrent status change (which locks FOR UPDATE) waits for us, and then
        // sees — and cancels — the task we enqueue.
        let status: Option<String> = sqlx::query_scalar(
            "SELECT status FROM docket_processes WHERE namespace = $1 AND id = $2 FOR SHARE",
        )
        .bind(namespace)
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        match status {
            None => return Err(StoreError::NotFound(format!("process {namespace}/{id}"))),
            Some(st) if st != require.as_str() => {
                return Err(StoreError::InvalidState(format!("process is {st}")));
            }
            Some(_) => {}
        }
        let t = self.insert_one(&mut tx, task, now).await?;
        tx.commit().await?;
        Ok(t)
    }

    async fn process_get(
        &self,
        namespace: &str,
        id: &str,
        range: docket_core::process::HistoryRange,
    ) -> Result<
        Option<(
            docket_core::process::Process,
            Vec<docket_core::process::Event>,
        )>,
    > {
        use docket_core::process::{Direction, Event};
        let Some(r) =
            sqlx::query("SELECT * FROM docket_processes WHERE namespace = $1 AND id = $2")
                .bind(namespace)
                .bind(id)
                .fetch_optional(&self.pool)
                .await?
        else {
            return Ok(None);
        };
        let p = decode_process(&r)?;
        let offset = range.offset.filter(|o| *o > 0);
        let sql = match range.direction {
            Direction::Forward => {
                "SELECT * FROM docket_events WHERE namespace = $1 AND process_id = $2 \
                 AND ($3::bigint IS NULL OR event_id > $3) ORDER BY event_id LIMIT $4"
            }
            Direction::Backward => {
                "SELECT * FROM docket_events WHERE namespace = $1 AND process_id = $2 \
                 AND ($3::bigint IS NULL OR event_id < $3) ORDER BY event_id DESC LIMIT $4"
            }
        };
        let rows = sqlx::query(sql)
            .bind(namespace)
            .bind(id)
            .bind(offset)
            .bind(range.limit.unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await?;
        let events = rows
            .iter()
            .map(|e| {
                Ok(Event {
                    event_id: e.try_get("event_id")?,
                    task_id: e.try_get("task_id")?,
                    timestamp: e.try_get("timestamp")?,
                    metadata: e.try_get("metadata")?,
                    payload: e.try_get("payload")?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Some((p, events)))
    }

    async fn process_commit(&self, c: ProcessCommit) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let key = docket_core::process::key_of(&c.namespace, &c.id);
        let row = sqlx::query(
            "SELECT state, lease_token, queue FROM docket_tasks WHERE id = $1 FOR UPDATE",
        )
        .bind(c.task_id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("task {}", c.task_id)))?;
        let state: String = row.try_get("state")?;
        let queue: String = row.try_get("queue")?;
        if state != "running" || token_of(&row)?.as_deref() != Some(c.token.as_str()) {
            return Err(StoreError::LeaseLost);
        }
        let (last, was): (i64, String) = sqlx::query_as(
            "SELECT last_event_id, status FROM docket_processes WHERE namespace = $1 AND id = $2 FOR UPDATE",
        )
        .bind(&c.namespace)
        .bind(&c.id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("process {}/{}", c.namespace, c.id)))?;
        let n = c.events.len() as i64;
        if n > 0 {
            let ids: Vec<i64> = (1..=n).map(|i| last + i).collect();
            let metas: Vec<Value> = c
                .events
                .iter()
                .map(|e| {
                    if e.metadata.is_null() {
                        serde_json::json!({})
                    } else {
                        e.metadata.clone()
                    }
                })
                .collect();
            let payloads: Vec<Value> = c.events.iter().map(|e| e.payload.clone()).collect();
            sqlx::query(
                "INSERT INTO docket_events (namespace, process_id, event_id, task_id, timestamp, metadata, payload) \
                 SELECT $1, $2, e, $3, $4, m, p FROM unnest($5::bigint[], $6::jsonb[], $7::jsonb[]) AS x(e, m, p)",
            )
            .bind(&c.namespace)
            .bind(&c.id)
            .bind(c.task_id)
            .bind(c.now)
            .bind(&ids)
            .bind(&metas)
            .bind(&payloads)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query(
            "UPDATE docket_processes SET \
               previous_status = CASE WHEN status <> 'running' THEN status ELSE previous_status END, \
               status_changed_at = CASE WHEN status <> 'running' THEN $3 ELSE status_changed_at END, \
               detail = CASE WHEN status = 'error' THEN NULL ELSE detail END, \
               corrupted_by = CASE WHEN status = 'error' THEN NULL ELSE corrupted_by END, \
               status = 'running', aux_state = COALESCE($4, aux_state), metadata = COALESCE($5, metadata), \
               last_event_id = last_event_id + $6 \
             WHERE namespace = $1 AND id = $2",
        )
        .bind(&c.namespace)
        .bind(&c.id)
        .bind(c.now)
        .bind(&c.aux_state)
        .bind(&c.metadata)
        .bind(n)
        .execute(&mut *tx)
        .await?;
        if !matches!(c.timer, TimerChange::Keep) {
            sqlx::query(
                "UPDATE docket_tasks SET state = 'cancelled', finished_at = $2 WHERE concurrency_key = $1 \
                 AND kind IN ('timeout', 'remove') AND state IN ('scheduled', 'available', 'retryable')",
            )
            .bind(&key)
            .bind(c.now)
            .execute(&mut *tx)
            .await?;
        }
        if let TimerChange::Set(t) = c.timer {
            self.insert_one(&mut tx, *t, c.now).await?;
        }
        for t in c.also {
            self.insert_one(&mut tx, t, c.now).await?;
        }
        sqlx::query(
            "UPDATE docket_tasks SET state = 'completed', finished_at = $2, result = $3, lease_expires_at = NULL \
             WHERE id = $1",
        )
        .bind(c.task_id)
        .bind(c.now)
        .bind(&c.response)
        .execute(&mut *tx)
        .await?;
        let mut items: Vec<(&str, Option<i64>, Value)> = c
            .events
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let event_id = last + 1 + i as i64;
                let meta = if e.metadata.is_null() { serde_json::json!({}) } else { e.metadata.clone() };
                let data = serde_json::json!({"event_id": event_id, "timestamp": c.now, "metadata": meta, "payload": e.payload});
                ("event", Some(event_id), data)
            })
            .collect();
        if was == "error" {
            items.push(("repaired", None, serde_json::json!({})));
        }
        self.publish(&mut tx, &c.namespace, &c.id, &items, c.now)
            .await?;
        self.notify(&mut tx, &[queue]).await?;
        self.notify_done(&mut tx, &[c.task_id]).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn process_fail(&self, f: ProcessFail) -> Result<LeaseOutcome> {
        let mut tx = self.pool.begin().await?;
        let sql = format!("SELECT {COLS} FROM docket_tasks WHERE id = $1 FOR UPDATE");
        let Some(row) = sqlx::query(&sql)
            .bind(f.fail.id)
            .fetch_optional(&mut *tx)
            .await?
        else {
            return Ok(LeaseOutcome::NotFound);
        };
        let t = decode(&row)?;
        let held = token_of(&row)?.as_deref() == Some(f.fail.token.as_str());
        if !held || t.state != TaskState::Running {
            return lease_refusal(&row, &f.fail.token);
        }
        let d = t.fail_decision(f.now, f.fail.retry_in, f.fail.permanent);
        let outcome = outcome_for(&d, &t);
        let e = error_entry(&t, &f.fail.error, None, f.now);
        let queue = t.queue.clone();
        let gave_up = matches!(d, FailDecision::Discard);
        Self::apply_failures(&mut tx, &[(t, d, e)], f.now).await?;
        sqlx::query("UPDATE docket_tasks SET result = $2 WHERE id = $1")
            .bind(f.fail.id)
            .bind(serde_json::json!({"error": f.error_value}))
            .execute(&mut *tx)
            .await?;
        if let (true, ProcessBreak::Break { corrupted }) = (gave_up, f.on_give_up) {
            let corrupted_by = corrupted.then_some(f.fail.id);
            self.break_process(
                &mut tx,
                &f.namespace,
                &f.id,
                &f.fail.error,
                f.fail.id,
                corrupted_by,
                f.now,
            )
            .await?;
        }
        self.notify(&mut tx, &[queue]).await?;
        self.notify_done(&mut tx, &[f.fail.id]).await?;
        tx.commit().await?;
        Ok(outcome)
    }

    async fn process_remove(
        &self,
        task_id: i64,
        token: &str,
        namespace: &str,
        id: &str,
        _now: Timestamp,
    ) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let row =
            sqlx::query("SELECT state, lease_token FROM docket_tasks WHERE id = $1 FOR UPDATE")
                .bind(task_id)
                .fetch_optional(&mut *tx)
                .await?
                .ok_or_else(|| StoreError::NotFound(format!("task {task_id}")))?;
        let state: String = row.try_get("state")?;
        if state != "running" || token_of(&row)?.as_deref() != Some(token) {
            return Err(StoreError::LeaseLost);
        }
        sqlx::query("DELETE FROM docket_events WHERE namespace = $1 AND process_id = $2")
            .bind(namespace)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM docket_processes WHERE namespace = $1 AND id = $2")
            .bind(namespace)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM docket_tasks WHERE concurrency_key = $1")
            .bind(docket_core::process::key_of(namespace, id))
            .execute(&mut *tx)
            .await?;
        self.publish(
            &mut tx,
            namespace,
            id,
            &[("removed", None, serde_json::json!({}))],
            _now,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn process_import(&self, p: ProcessImport) -> Result<()> {
        let pr = &p.process;
        let mut tx = self.pool.begin().await?;
        let created: Option<String> = sqlx::query_scalar(
            "INSERT INTO docket_processes (namespace, id, status, previous_status, status_changed_at, detail, \
               aux_state, metadata, corrupted_by, created_at, last_event_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, NULL, $9, $10) ON CONFLICT DO NOTHING RETURNING id",
        )
        .bind(&pr.namespace)
        .bind(&pr.id)
        .bind(pr.status.as_str())
        .bind(pr.previous_status.map(|s| s.as_str()))
        .bind(pr.status_changed_at)
        .bind(&pr.detail)
        .bind(&pr.aux_state)
        .bind(&pr.metadata)
        .bind(pr.created_at)
        .bind(p.history.len() as i64)
        .fetch_optional(&mut *tx)
        .await?;
        if created.is_none() {
            return Err(StoreError::Conflict(format!(
                "process {}/{} exists",
                pr.namespace, pr.id
            )));
        }
        if !p.history.is_empty() {
            let ids: Vec<i64> = p.history.iter().map(|e| e.event_id).collect();
            let times: Vec<Timestamp> = p.history.iter().map(|e| e.timestamp).collect();
            let metas: Vec<Value> = p.history.iter().map(|e| e.metadata.clone()).collect();
            let payloads: Vec<Value> = p.history.iter().map(|e| e.payload.clone()).collect();
            sqlx::query(
                "INSERT INTO docket_events (namespace, process_id, event_id, task_id, timestamp, metadata, payload) \
                 SELECT $1, $2, e, NULL, t, m, p FROM unnest($3::bigint[], $4::timestamptz[], $5::jsonb[], $6::jsonb[]) AS x(e, t, m, p)",
            )
            .bind(&pr.namespace)
            .bind(&pr.id)
            .bind(&ids)
            .bind(&times)
            .bind(&metas)
            .bind(&payloads)
            .execute(&mut *tx)
            .await?;
        }
        if let Some(t) = p.timer {
            self.insert_one(&mut tx, t, p.now).await?;
        }
        self.publish(
            &mut tx,
            &pr.namespace,
            &pr.id,
            &[("created", None, serde_json::json!({"imported": true}))],
            p.now,
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn notification_list(
        &self,
        namespace: Option<&str>,
        after: i64,
        limit: i64,
    ) -> Result<Vec<Notification>> {
        let rows = sqlx::query(
            "SELECT * FROM docket_notifications WHERE seq > $1 AND ($2::text IS NULL OR namespace = $2) \
             ORDER BY seq LIMIT $3",
        )
        .bind(after)
        .bind(namespace)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(Notification {
                    seq: r.try_get("seq")?,
                    namespace: r.try_get("namespace")?,
                    process_id: r.try_get("process_id")?,
                    kind: r.try_get("kind")?,
                    event_id: r.try_get("event_id")?,
                    data: r.try_get("data")?,
                    created_at: r.try_get("created_at")?,
                })
            })
            .collect()
    }

    async fn notification_last_seq(&self) -> Result<i64> {
        Ok(
            sqlx::query_scalar("SELECT COALESCE(max(seq), 0)::int8 FROM docket_notifications")
                .fetch_one(&self.pool)
                .await?,
        )
    }

    async fn sink_lease(
        &self,
        name: &str,
        owner: &str,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Option<i64>> {
        sqlx::query("INSERT INTO docket_sinks (name) VALUES ($1) ON CONFLICT DO NOTHING")
            .bind(name)
            .execute(&self.pool)
            .await?;
        Ok(sqlx::query_scalar(
            "UPDATE docket_sinks SET owner = $2, lease_until = $3 WHERE name = $1 \
             AND (owner IS NULL OR owner = $2 OR lease_until < $4) RETURNING seq",
        )
        .bind(name)
        .bind(owner)
        .bind(until)
        .bind(now)
        .fetch_optional(&self.pool)
        .await?)
    }

    async fn sink_advance(&self, name: &str, owner: &str, seq: i64) -> Result<bool> {
        let r = sqlx::query("UPDATE docket_sinks SET seq = $3 WHERE name = $1 AND owner = $2")
            .bind(name)
            .bind(owner)
            .bind(seq)
            .execute(&self.pool)
            .await?;
        Ok(r.rows_affected() == 1)
    }

    async fn task_run_now(&self, id: i64, now: Timestamp) -> Result<Task> {
        let mut tx = self.pool.begin().await?;
        let row = sqlx::query(&format!(
            "UPDATE docket_tasks SET state = 'available', run_at = $2 \
             WHERE id = $1 AND state IN ('scheduled', 'retryable') RETURNING {COLS}"
        ))
        .bind(id)
        .bind(now)
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(r) = &row {
            let queue: String = r.try_get("queue")?;
            self.notify(&mut tx, &[queue]).await?;
        }
        tx.commit().await?;
        match row {
            Some(r) => Ok(decode(&r)?),
            None => match self.task_get(id).await? {
                None => Err(StoreError::NotFound(format!("task {id}"))),
                Some(t) => Err(StoreError::InvalidState(format!(
                    "task {id} is {}; only scheduled or retryable tasks can run now",
                    t.state.as_str()
                ))),
            },
        }
    }

    async fn task_throughput(&self, since: Timestamp) -> Result<Vec<Throughput>> {
        let rows: Vec<(Timestamp, i64, i64)> = sqlx::query_as(
            "SELECT date_trunc('minute', finished_at) AS m, \
               count(*) FILTER (WHERE state = 'completed'), count(*) FILTER (WHERE state = 'discarded') \
             FROM docket_tasks WHERE finished_at >= $1 AND state IN ('completed', 'discarded') \
             GROUP BY m ORDER BY m",
        )
        .bind(since)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(minute, completed, failed)| Throughput {
                minute,
                completed,
                failed,
            })
            .collect())
    }

    async fn audit_add(
        &self,
        actor: &str,
        action: &str,
        target: &str,
        detail: Option<Value>,
        now: Timestamp,
    ) -> Result<()> {
        sqlx::query(
            "INSERT INTO docket_audit (at, actor, action, target, detail) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(now)
        .bind(actor)
        .bind(action)
        .bind(target)
        .bind(detail)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn token_create(&self, p: TokenCreate) -> Result<TokenRecord> {
        let row = sqlx::query(&format!(
            "INSERT INTO docket_tokens (name, hash, scopes, queues, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING {TOKEN_COLS}"
        ))
        .bind(&p.name)
        .bind(&p.hash)
        .bind(serde_json::to_value(&p.scopes).expect("scopes serialise"))
        .bind(serde_json::to_value(&p.queues).expect("queues serialise"))
        .bind(p.now)
        .bind(p.expires_at)
        .fetch_one(&self.pool)
        .await?;
        decode_token(&row)
    }

    async fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {TOKEN_COLS} FROM docket_tokens WHERE hash = $1"
        ))
        .bind(hash)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(decode_token).transpose()
    }

    async fn token_list(&self) -> Result<Vec<TokenRecord>> {
        let rows = sqlx::query(&format!(
            "SELECT {TOKEN_COLS} FROM docket_tokens ORDER BY id"
        ))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(decode_token).collect()
    }

    async fn token_revoke(&self, p: TokenRevoke) -> Result<bool> {
        let r = sqlx::query(
            "UPDATE docket_tokens SET revoked_at = $2 WHERE name = $1 AND revoked_at IS NULL",
        )
        .bind(&p.name)
        .bind(p.now)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected() > 0)
    }

    async fn token_touch(&self, p: TokenTouch) -> Result<()> {
        sqlx::query("UPDATE docket_tokens SET last_used_at = $2 WHERE id = $1")
            .bind(p.id)
            .bind(p.now)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn audit_list(&self, limit: i64) -> Result<Vec<AuditEntry>> {
        let rows: Vec<(i64, Timestamp, String, String, String, Option<Value>)> = sqlx::query_as(
            "SELECT id, at, actor, action, target, detail FROM docket_audit ORDER BY id DESC LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(id, at, actor, action, target, detail)| AuditEntry {
                id,
                at,
                actor,
                action,
                target,
                detail,
            })
            .collect())
    }

    fn pool_connections(&self) -> (usize, usize) {
        let idle = self.pool.num_idle();
        (
            self.pool.size() as usize - idle.min(self.pool.size() as usize),
            idle,
        )
    }

    async fn queue_oldest_available(&self) -> Result<Vec<(String, Timestamp)>> {
        Ok(sqlx::query_as(
            "SELECT queue, min(run_at) FROM docket_tasks WHERE state = 'available' GROUP BY queue",
        )
        .fetch_all(&self.pool)
        .await?)
    }

    async fn schedule_put(
        &self,
        spec: &ScheduleSpec,
        next_run_at: Timestamp,
        now: Timestamp,
    ) -> Result<Schedule> {
        let row = sqlx::query(&format!(
            "INSERT INTO docket_schedules (name, spec, next_run_at, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $4) ON CONFLICT (name) DO UPDATE SET spec = EXCLUDED.spec, \
             next_run_at = EXCLUDED.next_run_at, updated_at = EXCLUDED.updated_at RETURNING {SCHEDULE_COLS}"
        ))
        .bind(&spec.name)
        .bind(sqlx::types::Json(spec))
        .bind(next_run_at)
        .bind(now)
        .fetch_one(&self.pool)
        .await?;
        decode_schedule(&row)
    }

    async fn schedule_get(&self, name: &str) -> Result<Option<Schedule>> {
        let row = sqlx::query(&format!(
            "SELECT {SCHEDULE_COLS} FROM docket_schedules WHERE name = $1"
        ))
        .bind(name)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(decode_schedule).transpose()
    }

    async fn schedule_list(&self) -> Result<Vec<Schedule>> {
        let rows = sqlx::query(&format!(
            "SELECT {SCHEDULE_COLS} FROM docket_schedules ORDER BY name"
        ))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(decode_schedule).collect()
    }

    async fn schedule_delete(&self, name: &str) -> Result<bool> {
        let r = sqlx::query("DELETE FROM docket_schedules WHERE name = $1")
            .bind(name)
            .execute(&self.pool)
            .await?;
        Ok(r.rows_affected() == 1)
    }

    async fn schedule_pause(
        &self,
        name: &str,
        paused: bool,
        next_run_at: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<Option<Schedule>> {
        let row = sqlx::query(&format!(
            "UPDATE docket_schedules SET paused = $2, next_run_at = COALESCE($3, next_run_at), \
             updated_at = $4 WHERE name = $1 RETURNING {SCHEDULE_COLS}"
        ))
        .bind(name)
        .bind(paused)
        .bind(next_run_at)
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(decode_schedule).transpose()
    }

    async fn schedule_due(&self, now: Timestamp, limit: i64) -> Result<Vec<Schedule>> {
        let rows = sqlx::query(&format!(
            "SELECT {SCHEDULE_COLS} FROM docket_schedules WHERE NOT paused AND next_run_at <= $1 \
             ORDER BY next_run_at LIMIT $2"
        ))
        .bind(now)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(decode_schedule).collect()
    }

    async fn schedule_next_due(&self) -> Result<Option<Timestamp>> {
        Ok(
            sqlx::query_scalar("SELECT min(next_run_at) FROM docket_schedules WHERE NOT paused")
                .fetch_one(&self.pool)
                .await?,
        )
    }

    async fn schedule_fire(&self, p: ScheduleFireParams) -> Result<Option<Option<Task>>> {
        let mut tx = self.pool.begin().await?;
        let moved = sqlx::query(
            "UPDATE docket_schedules SET next_run_at = $3, last_run_at = $4, updated_at = $4 \
             WHERE name = $1 AND next_run_at = $2 AND NOT paused",
        )
        .bind(&p.name)
        .bind(p.occurrence)
        .bind(p.next_run_at)
        .bind(p.now)
        .execute(&mut *tx)
        .await?;
        if moved.rows_affected() == 0 {
            return Ok(None);
        }
        let task = match self.insert_one(&mut tx, p.task, p.now).await {
            Ok(t) => Some(t),
            Err(StoreError::Conflict(_)) => None,
            Err(e) => return Err(e),
        };
        if let Some(t) = &task {
            sqlx::query("UPDATE docket_schedules SET last_task_id = $2 WHERE name = $1")
                .bind(&p.name)
                .bind(t.id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(Some(task))
    }

    async fn process_simple_repair(&self, namespace: &str, id: &str, now: Timestamp) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let r = sqlx::query(
            "UPDATE docket_processes SET previous_status = status, status = 'running', status_changed_at = $3, \
               detail = NULL, corrupted_by = NULL WHERE namespace = $1 AND id = $2 AND status = 'error'",
        )
        .bind(namespace)
        .bind(id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        if r.rows_affected() == 1 {
            self.publish(
                &mut tx,
                namespace,
                id,
                &[("repaired", None, serde_json::json!({"simple": true}))],
                now,
            )
            .await?;
            tx.commit().await?;
            return Ok(());
        }
        drop(tx);
        let st: Option<String> = sqlx::query_scalar(
            "SELECT status FROM docket_processes WHERE namespace = $1 AND id = $2",
        )
        .bind(namespace)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        match st {
            None => Err(StoreError::NotFound(format!("process {namespace}/{id}"))),
            Some(st) => Err(StoreError::InvalidState(format!("process is {st}"))),
        }
    }

    async fn process_list(
        &self,
        namespace: &str,
        status: Option<docket_core::process::ProcessStatus>,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<docket_core::process::Process>> {
        let rows = sqlx::query(
            "SELECT * FROM docket_processes WHERE namespace = $1 AND ($2::text IS NULL OR status = $2) \
             AND ($3::text IS NULL OR id > $3) ORDER BY id LIMIT $4",
        )
        .bind(namespace)
        .bind(status.map(|s| s.as_str()))
        .bind(after)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(decode_process).collect()
    }

    async fn process_collect_zombies(&self, now: Timestamp, limit: i64) -> Result<u64> {
        let mut tx = self.pool.begin().await?;
        let sql = format!(
            "SELECT {COLS} FROM docket_tasks WHERE state = 'running' AND lease_expires_at < $1 \
               AND queue LIKE 'process:%' ORDER BY lease_expires_at LIMIT $2 FOR UPDATE SKIP LOCKED"
        );
        let rows = sqlx::query(&sql)
            .bind(now)
            .bind(limit)
            .fetch_all(&mut *tx)
            .await?;
        let mut queues = vec![];
        let mut failed = Vec::with_capacity(rows.len());
        let mut zombies = Vec::with_capacity(rows.len());
        for r in &rows {
            let t = decode(r)?;
            let ns = t.queue.trim_start_matches("process:").to_string();
            let pid = t.payload["process_id"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let e = error_entry(&t, ZOMBIE, None, now);
            queues.push(t.queue.clone());
            zombies.push((ns, pid, t.id));
            failed.push((t, FailDecision::Discard, e));
        }
        Self::apply_failures(&mut tx, &failed, now).await?;
        self.break_zombies(&mut tx, &zombies, now).await?;
        queues.sort();
        queues.dedup();
        self.notify(&mut tx, &queues).await?;
        let ids: Vec<i64> = rows.iter().map(|r| r.get::<i64, _>("id")).collect();
        self.notify_done(&mut tx, &ids).await?;
        tx.commit().await?;
        Ok(rows.len() as u64)
    }

    async fn close(&self) {
        self.pool.close().await;
    }
}

impl PgStore {
    /// The one insert statement: tasks (payloads passed apart, see `task_insert_many`), then
    /// a notification per queue that got available tasks. Returns (id, unique_key) per row.
    async fn insert_rows(
        &self,
        conn: &mut sqlx::PgConnection,
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
        let rows: Vec<(i64, Option<String>)> = sqlx::query_as(
            "WITH ins AS ( \
               INSERT INTO docket_tasks (queue, kind, payload, priority, state, run_at, expires_at, \
                 max_attempts, backoff_initial_ms, backoff_coefficient, backoff_max_ms, backoff_jitter, \
                 timeout_ms, unique_key, concurrency_key, concurrency_limit, node, trace_id, created_at) \
               SELECT queue, kind, payload, priority, state, run_at, expires_at, max_attempts, bi, bc, \
                 bm, bj, timeout_ms, unique_key, concurrency_key, concurrency_limit, node, trace_id, $18 \
               FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::int[], $5::text[], \
                 $6::timestamptz[], $7::timestamptz[], $8::int[], $9::bigint[], $10::float8[], \
                 $11::bigint[], $12::float8[], $13::bigint[], $14::text[], $15::text[], $16::int[], \
                 $17::text[], $21::text[]) WITH ORDINALITY AS x(queue, kind, payload, priority, state, run_at, \
                 expires_at, max_attempts, bi, bc, bm, bj, timeout_ms, unique_key, concurrency_key, \
                 concurrency_limit, node, trace_id, ord) \
               ORDER BY ord \
               ON CONFLICT DO NOTHING RETURNING id, unique_key, queue, state), \
             note AS (SELECT pg_notify($19, $20 || '|' || q) IS NULL \
               FROM (SELECT DISTINCT queue AS q FROM ins WHERE state = 'available') s \
               UNION ALL SELECT set_config('docket.woken', 'on', true) IS NULL) \
             SELECT id, unique_key FROM ins WHERE (SELECT count(*) FROM note) >= 0",
        )
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
        .bind(&self.schema)
        .bind(col!(|t| t.trace_id.clone()))
        .fetch_all(&mut *conn)
        .await
        ?;
        Ok(rows)
    }

    /// Inserts one task inside a transaction (process operations).
    async fn insert_one(
        &self,
        conn: &mut sqlx::PgConnection,
        t: ResolvedTask,
        now: Timestamp,
    ) -> Result<Task> {
        let mut t = t;
        let payload = std::mem::take(&mut t.payload);
        let rows = self
            .insert_rows(
                conn,
                std::slice::from_ref(&t),
                std::slice::from_ref(&payload),
                now,
            )
            .await?;
        t.payload = payload;
        match rows.first() {
            Some((id, _)) => Ok(t.into_task(*id, now)),
            None => Err(StoreError::Conflict(format!(
                "unique_key {:?} is held by an unfinished task",
                t.unique_key.unwrap_or_default()
            ))),
        }
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

const SCHEDULE_COLS: &str =
    "spec, paused, next_run_at, last_run_at, last_task_id, created_at, updated_at";

fn decode_schedule(r: &PgRow) -> Result<Schedule> {
    let spec: sqlx::types::Json<ScheduleSpec> = r.try_get("spec")?;
    Ok(Schedule {
        spec: spec.0,
        paused: r.try_get("paused")?,
        next_run_at: r.try_get("next_run_at")?,
        last_run_at: r.try_get("last_run_at")?,
        last_task_id: r.try_get("last_task_id")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

const TOKEN_COLS: &str =
    "id, name, hash, scopes, queues, created_at, expires_at, revoked_at, last_used_at";

fn decode_token(r: &sqlx::postgres::PgRow) -> Result<TokenRecord> {
    let id: i64 = r.try_get("id")?;
    let (scopes, queues) = crate::decode_grant(
        id,
        &r.try_get::<Value, _>("scopes")?,
        &r.try_get::<Value, _>("queues")?,
    )?;
    Ok(TokenRecord {
        id,
        name: r.try_get("name")?,
        hash: r.try_get("hash")?,
        scopes,
        queues,
        created_at: r.try_get("created_at")?,
        expires_at: r.try_get("expires_at")?,
        revoked_at: r.try_get("revoked_at")?,
        last_used_at: r.try_get("last_used_at")?,
    })
}
