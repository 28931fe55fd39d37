//! SQLite backend (the embedded default): WAL mode, one writer connection (SQLite allows one
//! writer at a time; queueing in the pool beats busy-waiting on the file lock) and a reader pool.
//! Every write transaction starts with `BEGIN IMMEDIATE`, so it never has to upgrade a read lock.

use crate::decode;
use crate::*;
use docket_core::task::ResolvedTask;
use docket_core::{Backoff, FailDecision, Lease};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};
use sqlx::{Row, Sqlite, SqlitePool, Transaction};
use std::str::FromStr;

const COLS: &str = "id, queue, kind, payload, priority, state, run_at, expires_at, attempt, \
    max_attempts, backoff_initial_ms, backoff_coefficient, backoff_max_ms, backoff_jitter, \
    timeout_ms, unique_key, concurrency_key, concurrency_limit, node, result, errors, progress, \
    created_at, attempted_at, finished_at, worker, lease_token, lease_ms, lease_expires_at, \
    cancel_requested_at, trace_id";

/// A SQLite store.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    writer: SqlitePool,
    reader: SqlitePool,
    /// Queues whose claimers should look again (a slot was freed, a task was retried or came
    /// due). SQLite has no LISTEN: this is the in-process equivalent, fed after each commit.
    wake: tokio::sync::broadcast::Sender<Wake>,
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

fn time(row: &SqliteRow, c: &str) -> Result<Timestamp> {
    decode::micros("row", c, row.try_get(c)?)
}

fn time_opt(row: &SqliteRow, c: &str) -> Result<Option<Timestamp>> {
    row.try_get::<Option<i64>, _>(c)?
        .map(|v| decode::micros("row", c, v))
        .transpose()
}

fn json(row: &SqliteRow, c: &str) -> Result<Value> {
    let s: String = row.try_get(c)?;
    serde_json::from_str(&s).map_err(|e| StoreError::Corrupt(format!("column {c}: {e}")))
}

fn json_opt(row: &SqliteRow, c: &str) -> Result<Option<Value>> {
    match row.try_get::<Option<String>, _>(c)? {
        None => Ok(None),
        Some(s) => serde_json::from_str(&s)
            .map(Some)
            .map_err(|e| StoreError::Corrupt(format!("column {c}: {e}"))),
    }
}

fn decode(row: &SqliteRow) -> Result<Task> {
    let id: i64 = row.try_get("id")?;
    decode_task(row, id).map_err(|e| match e {
        StoreError::Corrupt(m) => StoreError::Corrupt(format!("task {id}: {m}")),
        e => e,
    })
}

fn decode_task(row: &SqliteRow, id: i64) -> Result<Task> {
    let r = format!("task {id}");
    let state: String = row.try_get("state")?;
    let ms = |c: &str| -> Result<Duration> { decode::millis(&r, c, row.try_get::<i64, _>(c)?) };
    Ok(Task {
        id,
        queue: row.try_get("queue")?,
        kind: row.try_get("kind")?,
        payload: json(row, "payload")?,
        priority: row.try_get("priority")?,
        state: decode::state(&r, &state)?,
        run_at: time(row, "run_at")?,
        expires_at: time_opt(row, "expires_at")?,
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
        result: json_opt(row, "result")?,
        errors: decode::errors(&r, json(row, "errors")?)?,
        progress: json_opt(row, "progress")?,
        created_at: time(row, "created_at")?,
        attempted_at: time_opt(row, "attempted_at")?,
        finished_at: time_opt(row, "finished_at")?,
        worker: row.try_get("worker")?,
        lease_expires_at: time_opt(row, "lease_expires_at")?,
        cancel_requested_at: time_opt(row, "cancel_requested_at")?,
        lease: None,
        inserted: None,
    })
}

fn queue_settings(row: &SqliteRow) -> Result<QueueSettings> {
    let r = row
        .try_get::<String, _>("name")
        .map_or_else(|_| "queue".to_string(), |n| format!("queue {n}"));
    let d = |c: &str| decode::millis_opt(&r, c, row.try_get::<Option<i64>, _>(c)?);
    Ok(QueueSettings {
        paused: row.try_get::<i64, _>("paused")? != 0,
        concurrency_limit: row.try_get("concurrency_limit")?,
        max_attempts: row.try_get("max_attempts")?,
        backoff: decode::backoff(&r, json_opt(row, "backoff")?)?,
        timeout: d("timeout_ms")?,
        retention_completed: d("retention_completed_ms")?,
        retention_failed: d("retention_failed_ms")?,
        mask_payload: row.try_get::<i64, _>("mask_payload")? != 0,
    })
}

fn decode_process(r: &SqliteRow) -> Result<docket_core::process::Process> {
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
        status_changed_at: time(r, "status_changed_at")?,
        detail: r.try_get("detail")?,
        aux_state: json(r, "aux_state")?,
        metadata: json(r, "metadata")?,
        corrupted_by: r.try_get("corrupted_by")?,
        created_at: time(r, "created_at")?,
        last_event_id: r.try_get("last_event_id")?,
    })
}

fn ids_json(ids: &[i64]) -> String {
    serde_json::to_string(ids).expect("ids serialise")
}

fn lease_refusal(t: &Task, held: bool) -> LeaseOutcome {
    if held && t.state == TaskState::Cancelled {
        LeaseOutcome::Cancelled
    } else {
        LeaseOutcome::LeaseLost
    }
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
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(base.clone())
            .await?;
        let reader = SqlitePoolOptions::new()
            .max_connections(opts.max_connections.unwrap_or(4))
            .connect_with(base.read_only(false))
            .await?;
        let (wake, _) = tokio::sync::broadcast::channel(1024);
        Ok(SqliteStore {
            writer,
            reader,
            wake,
        })
    }

    fn wake_queues<'a>(&self, queues: impl IntoIterator<Item = &'a String>) {
        let mut qs: Vec<&String> = queues.into_iter().collect();
        qs.sort();
        qs.dedup();
        for q in qs {
            // No receiver (no engine listening) is fine.
            let _ = self.wake.send(Wake::Queue(q.clone()));
        }
    }

    /// Inserts one task; `None` when its unique_key is held by an unfinished task.
    async fn insert_row(
        tx: &mut Transaction<'_, Sqlite>,
        t: &ResolvedTask,
        now: Timestamp,
    ) -> Result<Option<i64>> {
        sqlx::query_scalar(
            "INSERT INTO docket_tasks (queue, kind, payload, priority, state, run_at, expires_at, \
               max_attempts, backoff_initial_ms, backoff_coefficient, backoff_max_ms, backoff_jitter, \
               timeout_ms, unique_key, concurrency_key, concurrency_limit, node, created_at, trace_id) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19) \
             ON CONFLICT DO NOTHING RETURNING id",
        )
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
        .fetch_optional(&mut **tx)
        .await
        .map_err(StoreError::from)
    }

    async fn insert_one(
        tx: &mut Transaction<'_, Sqlite>,
        t: ResolvedTask,
        now: Timestamp,
    ) -> Result<Task> {
        match Self::insert_row(tx, &t, now).await? {
            Some(id) => Ok(t.into_task(id, from_us(us(now)))),
            None => Err(StoreError::Conflict(format!(
                "unique_key {:?} is held by an unfinished task",
                t.unique_key.unwrap_or_default()
            ))),
        }
    }

    /// Writes notifications of one process in the current transaction (the single writer makes
    /// seq order commit order).
    async fn publish(
        tx: &mut Transaction<'_, Sqlite>,
        namespace: &str,
        id: &str,
        items: &[(&str, Option<i64>, Value)],
        now: Timestamp,
    ) -> Result<()> {
        for (kind, event_id, data) in items {
            sqlx::query(
                "INSERT INTO docket_notifications (namespace, process_id, kind, event_id, data, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .bind(namespace)
            .bind(id)
            .bind(kind)
            .bind(event_id)
            .bind(data.to_string())
            .bind(us(now))
            .execute(&mut **tx)
            .await?;
        }
        Ok(())
    }

    /// Puts a process in `error` (detail, corrupted_by when given), cancels its waiting tasks and
    /// publishes `failed` — for a failed step given up on and for a zombie.
    #[allow(clippy::too_many_arguments)]
    async fn break_process(
        tx: &mut Transaction<'_, Sqlite>,
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
               status_changed_at = CASE WHEN status <> 'error' THEN ?3 ELSE status_changed_at END, \
               status = 'error', detail = ?4, corrupted_by = COALESCE(?5, corrupted_by) \
             WHERE namespace = ?1 AND id = ?2",
        )
        .bind(namespace)
        .bind(id)
        .bind(us(now))
        .bind(detail)
        .bind(corrupted_by)
        .execute(&mut **tx)
        .await?;
        sqlx::query(
            "UPDATE docket_tasks SET state = 'cancelled', finished_at = ?2 WHERE concurrency_key = ?1 \
             AND state IN ('scheduled', 'available', 'retryable')",
        )
        .bind(docket_core::process::key_of(namespace, id))
        .bind(us(now))
        .execute(&mut **tx)
        .await?;
        let data = serde_json::json!({"detail": detail, "task_id": task_id});
        Self::publish(tx, namespace, id, &[("failed", None, data)], now).await
    }

    async fn begin(&self) -> Result<Transaction<'static, Sqlite>> {
        Ok(self.writer.begin_with("BEGIN IMMEDIATE").await?)
    }

    async fn get_in(
        tx: &mut Transaction<'_, Sqlite>,
        id: i64,
    ) -> Result<Option<(Task, Option<String>)>> {
        let sql = format!("SELECT {COLS} FROM docket_tasks WHERE id = ?");
        let row = sqlx::query(&sql).bind(id).fetch_optional(&mut **tx).await?;
        row.map(|r| Ok((decode(&r)?, r.try_get("lease_token")?)))
            .transpose()
    }

    async fn counts(
        &self,
        queue: Option<&str>,
    ) -> Result<HashMap<String, std::collections::BTreeMap<TaskState, i64>>> {
        let rows = sqlx::query(
            "SELECT queue, state, count(*) AS n FROM docket_tasks \
             WHERE (?1 IS NULL OR queue = ?1) GROUP BY queue, state",
        )
        .bind(queue)
        .fetch_all(&self.reader)
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

    async fn apply_failures(
        tx: &mut Transaction<'_, Sqlite>,
        items: &[(Task, FailDecision, Value)],
        now: Timestamp,
    ) -> Result<()> {
        for (t, d, e) in items {
            let (st, run_at, fin) = match d {
                FailDecision::Retry { run_at } => (TaskState::Retryable, *run_at, None),
                FailDecision::Discard => (TaskState::Discarded, t.run_at, Some(us(now))),
                FailDecision::Cancel => (TaskState::Cancelled, t.run_at, Some(us(now))),
            };
            sqlx::query(
                "UPDATE docket_tasks SET state = ?2, run_at = ?3, finished_at = ?4, \
                 errors = json_insert(errors, '$[#]', json(?5)), lease_expires_at = NULL WHERE id = ?1",
            )
            .bind(t.id)
            .bind(st.as_str())
            .bind(us(run_at))
            .bind(fin)
            .bind(e.to_string())
            .execute(&mut **tx)
            .await?;
        }
        Ok(())
    }
}

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

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> Backend {
        Backend::Sqlite
    }

    fn supports_listen_notify(&self) -> bool {
        false
    }

    async fn migrate(&self) -> Result<()> {
        sqlx::migrate!("./migrations/sqlite")
            .run(&self.writer)
            .await?;
        Ok(())
    }

    async fn queue_settings_many(
        &self,
        names: &[String],
    ) -> Result<HashMap<String, QueueSettings>> {
        let names_json = serde_json::to_string(names).expect("names serialise");
        let rows = sqlx::query(
            "SELECT * FROM docket_queues WHERE name IN (SELECT value FROM json_each(?))",
        )
        .bind(names_json)
        .fetch_all(&self.reader)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get::<String, _>("name")?, queue_settings(r)?)))
            .collect()
    }

    async fn task_insert_many(&self, p: TaskInsertManyParams) -> Result<Vec<Task>> {
        if p.tasks.is_empty() {
            return Ok(vec![]);
        }
        let mut tx = self.begin().await?;
        let existing = format!(
            "SELECT {COLS} FROM docket_tasks WHERE unique_key = ? AND state IN \
             ('scheduled','available','running','retryable')"
        );
        let mut out = Vec::with_capacity(p.tasks.len());
        for t in p.tasks {
            let id = Self::insert_row(&mut tx, &t, p.now).await?;
            let task = match id {
                Some(id) => t.into_task(id, from_us(us(p.now))),
                None => {
                    let r = sqlx::query(&existing)
                        .bind(&t.unique_key)
                        .fetch_optional(&mut *tx)
                        .await?
                        .ok_or_else(|| StoreError::Conflict("insert refused".into()))?;
                    let mut t = decode(&r)?;
                    t.inserted = Some(false);
                    t
                }
            };
            out.push(task);
        }
        tx.commit().await?;
        // As PostgreSQL's insert trigger does: listeners learn of new available work.
        self.wake_queues(
            out.iter()
                .filter(|t| t.inserted != Some(false) && t.state == TaskState::Available)
                .map(|t| &t.queue),
        );
        Ok(out)
    }

    async fn task_get(&self, id: i64) -> Result<Option<Task>> {
        let sql = format!("SELECT {COLS} FROM docket_tasks WHERE id = ?");
        let row = sqlx::query(&sql)
            .bind(id)
            .fetch_optional(&self.reader)
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
            "SELECT {COLS} FROM docket_tasks WHERE (?1 IS NULL OR queue = ?1) \
             AND (?2 IS NULL OR state IN (SELECT value FROM json_each(?2))) AND (?3 IS NULL OR kind = ?3) \
             AND (?4 IS NULL OR id {cmp} ?4) AND (?6 IS NULL OR concurrency_key = ?6) \
             AND (?7 IS NULL OR instr(lower(payload || ' ' || COALESCE(errors, '')), lower(?7)) > 0) \
             ORDER BY id {order} LIMIT ?5"
        );
        let rows = sqlx::query(&sql)
            .bind(&p.queue)
            .bind((!p.states.is_empty()).then(|| {
                serde_json::json!(p.states.iter().map(|s| s.as_str()).collect::<Vec<_>>())
                    .to_string()
            }))
            .bind(&p.kind)
            .bind(p.after)
            .bind(p.limit)
            .bind(&p.concurrency_key)
            .bind(&p.text)
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(decode).collect()
    }

    async fn task_claim(&self, p: TaskClaimParams) -> Result<Vec<Task>> {
        if p.limit <= 0 {
            return Ok(vec![]);
        }
        let mut tx = self.begin().await?;
        // The writer lock is held for the whole transaction, so the counts below cannot change
        // under us: no row or advisory locks are needed on SQLite.
        let cands = sqlx::query(
            "SELECT t.id, t.concurrency_key, t.concurrency_limit, q.concurrency_limit AS queue_limit \
             FROM docket_tasks t LEFT JOIN docket_queues q ON q.name = t.queue \
             WHERE t.state = 'available' AND t.queue = ?1 \
               AND (t.node IS NULL OR t.node = ?2) \
               AND (?5 IS NULL OR t.kind IN (SELECT value FROM json_each(?5))) \
               AND (t.expires_at IS NULL OR t.expires_at > ?3) \
               AND (q.paused IS NULL OR q.paused = 0) \
               AND (t.concurrency_key IS NULL OR (SELECT count(*) FROM docket_tasks r \
                    WHERE r.state = 'running' AND r.concurrency_key = t.concurrency_key) \
                    < t.concurrency_limit) \
             ORDER BY t.priority DESC, t.run_at, t.id LIMIT ?4",
        )
        .bind(&p.queue)
        .bind(&p.node)
        .bind(us(p.now))
        .bind(p.limit)
        .bind(p.kinds.as_ref().map(|k| serde_json::json!(k).to_string()))
        .fetch_all(&mut *tx)
        .await?;
        if cands.is_empty() {
            tx.commit().await?;
            return Ok(vec![]);
        }
        let queue_limit: Option<i32> = cands[0].try_get("queue_limit")?;
        let mut room = usize::MAX;
        if let Some(limit) = queue_limit {
            let running: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM docket_tasks WHERE state = 'running' AND queue = ?",
            )
            .bind(&p.queue)
            .fetch_one(&mut *tx)
            .await?;
            room = (limit as i64 - running).max(0) as usize;
        }
        let mut key_room: HashMap<String, i64> = HashMap::new();
        let mut ids = Vec::with_capacity(cands.len());
        for r in &cands {
            if ids.len() >= room {
                break;
            }
            if let Some(k) = r.try_get::<Option<String>, _>("concurrency_key")? {
                if !key_room.contains_key(&k) {
                    let l: Option<i32> = r.try_get("concurrency_limit")?;
                    let running: i64 = sqlx::query_scalar(
                        "SELECT count(*) FROM docket_tasks WHERE state = 'running' AND concurrency_key = ?",
                    )
                    .bind(&k)
                    .fetch_one(&mut *tx)
                    .await?;
                    key_room.insert(k.clone(), l.unwrap_or(1) as i64 - running);
                }
                let left = key_room.get_mut(&k).expect("key counted");
                if *left <= 0 {
                    continue;
                }
                *left -= 1;
            }
            ids.push(r.try_get::<i64, _>("id")?);
        }
        if ids.is_empty() {
            tx.commit().await?;
            return Ok(vec![]);
        }
        let sql = format!(
            "UPDATE docket_tasks SET state = 'running', attempt = attempt + 1, attempted_at = ?2, \
               worker = ?3, lease_token = lower(hex(randomblob(16))), \
               lease_ms = COALESCE(?4, timeout_ms), \
               lease_expires_at = ?2 + (CASE WHEN queue LIKE 'process:%' THEN COALESCE(?4, timeout_ms) \
                 ELSE min(COALESCE(?4, timeout_ms), timeout_ms) END) * 1000, cancel_requested_at = NULL \
             WHERE id IN (SELECT value FROM json_each(?1)) RETURNING {COLS}"
        );
        let rows = sqlx::query(&sql)
            .bind(ids_json(&ids))
            .bind(us(p.now))
            .bind(&p.worker)
            .bind(p.lease.map(ms))
            .fetch_all(&mut *tx)
            .await?;
        tx.commit().await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let mut t = decode(r)?;
            t.lease = Some(Lease {
                token: r
                    .try_get::<Option<String>, _>("lease_token")?
                    .unwrap_or_default(),
                expires_at: t.lease_expires_at.unwrap_or(p.now),
            });
            out.push(t);
        }
        sort_claim_order(&mut out);
        Ok(out)
    }

    async fn task_heartbeat(&self, p: TaskHeartbeatParams) -> Result<Task> {
        let mut tx = self.begin().await?;
        let Some((t, token)) = Self::get_in(&mut tx, p.id).await? else {
            return Err(StoreError::NotFound(format!("task {}", p.id)));
        };
        let held = token.as_deref() == Some(p.token.as_str());
        if !held || t.state != TaskState::Running {
            tx.commit().await?;
            return Err(match lease_refusal(&t, held) {
                LeaseOutcome::Cancelled => StoreError::Cancelled,
                _ => StoreError::LeaseLost,
            });
        }
        let progress = p.progress.as_ref().map(|v| v.to_string());
        if t.cancel_requested_at.is_some() {
            sqlx::query(
                "UPDATE docket_tasks SET state = 'cancelled', finished_at = ?2, \
                 lease_expires_at = NULL, progress = COALESCE(?3, progress) WHERE id = ?1",
            )
            .bind(p.id)
            .bind(us(p.now))
            .bind(progress)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            self.wake_queues([&t.queue]);
            return Err(StoreError::Cancelled);
        }
        if past_deadline(&t, p.now) {
            let queue = t.queue.clone();
            let d = t.fail_decision(p.now, None, false);
            let e = error_entry(&t, TIMEOUT_MESSAGE, None, p.now);
            Self::apply_failures(&mut tx, &[(t, d, e)], p.now).await?;
            tx.commit().await?;
            self.wake_queues([&queue]);
            return Err(StoreError::TimedOut);
        }
        // The lease never reaches past the attempt's deadline (process tasks excepted: their
        // lease is the zombie window).
        let sql = format!(
            "UPDATE docket_tasks SET progress = COALESCE(?2, progress), lease_ms = COALESCE(?3, lease_ms), \
               lease_expires_at = CASE WHEN queue LIKE 'process:%' \
                 THEN ?4 + COALESCE(?3, lease_ms, timeout_ms) * 1000 \
                 ELSE min(?4 + COALESCE(?3, lease_ms, timeout_ms) * 1000, attempted_at + timeout_ms * 1000) END \
             WHERE id = ?1 RETURNING {COLS}"
        );
        let row = sqlx::query(&sql)
            .bind(p.id)
            .bind(progress)
            .bind(p.lease.map(ms))
            .bind(us(p.now))
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        decode(&row)
    }

    async fn task_complete_many(
        &self,
        items: &[TaskComplete],
        now: Timestamp,
    ) -> Result<Vec<LeaseOutcome>> {
        if items.is_empty() {
            return Ok(vec![]);
        }
        let mut tx = self.begin().await?;
        // One statement for the whole batch: items travel as one JSON array.
        let batch: Vec<Value> = items
            .iter()
            .map(|it| serde_json::json!({"id": it.id, "token": it.token, "result": it.result}))
            .collect();
        let done: Vec<(i64, i64, String, bool, String, Option<i64>)> = sqlx::query_as(
            "UPDATE docket_tasks SET state = 'completed', finished_at = ?1, result = x.result, \
               lease_expires_at = NULL \
             FROM (SELECT value->>'id' AS id, value->>'token' AS token, value->'result' AS result \
                   FROM json_each(?2)) AS x \
             WHERE docket_tasks.id = x.id AND docket_tasks.lease_token = x.token \
               AND docket_tasks.state = 'running' AND docket_tasks.cancel_requested_at IS NULL \
               AND (docket_tasks.queue LIKE 'process:%' \
                 OR ?1 < docket_tasks.attempted_at + docket_tasks.timeout_ms * 1000) \
             RETURNING docket_tasks.id, docket_tasks.run_at, docket_tasks.queue, \
               (docket_tasks.concurrency_key IS NOT NULL OR EXISTS (SELECT 1 FROM docket_queues q \
                 WHERE q.name = docket_tasks.queue AND q.concurrency_limit IS NOT NULL)) AS frees, \
               docket_tasks.kind, docket_tasks.attempted_at",
        )
        .bind(us(now))
        .bind(Value::Array(batch).to_string())
        .fetch_all(&mut *tx)
        .await?;
        let freed: Vec<String> = done.iter().filter(|r| r.3).map(|r| r.2.clone()).collect();
        let done: HashMap<i64, (i64, TaskLabels)> = done
            .into_iter()
            .map(|r| {
                (
                    r.0,
                    (
                        r.1,
                        TaskLabels {
                            queue: r.2,
                            kind: r.4,
                            attempted_at: r.5.map(from_us),
                        },
                    ),
                )
            })
            .collect();
        let mut out = Vec::with_capacity(items.len());
        let mut timed_out = vec![];
        for it in items {
            if let Some((run_at, labels)) = done.get(&it.id) {
                out.push(LeaseOutcome::Ok {
                    state: TaskState::Completed,
                    run_at: from_us(*run_at),
                    labels: labels.clone(),
                });
                continue;
            }
            let Some((t, token)) = Self::get_in(&mut tx, it.id).await? else {
                out.push(LeaseOutcome::NotFound);
                continue;
            };
            let held = token.as_deref() == Some(it.token.as_str());
            if held && t.state == TaskState::Running && t.cancel_requested_at.is_some() {
                sqlx::query(
                    "UPDATE docket_tasks SET state = 'cancelled', finished_at = ?2, result = ?3, \
                     lease_expires_at = NULL WHERE id = ?1",
                )
                .bind(it.id)
                .bind(us(now))
                .bind(it.result.to_string())
                .execute(&mut *tx)
                .await?;
                out.push(LeaseOutcome::Cancelled);
            } else if held && t.state == TaskState::Running {
                // Held, running, not cancelled, yet not updated: past its deadline.
                let d = t.fail_decision(now, None, false);
                let e = error_entry(&t, TIMEOUT_MESSAGE, None, now);
                timed_out.push((t, d, e));
                out.push(LeaseOutcome::TimedOut);
            } else {
                out.push(lease_refusal(&t, held));
            }
        }
        Self::apply_failures(&mut tx, &timed_out, now).await?;
        tx.commit().await?;
        self.wake_queues(&freed);
        self.wake_queues(timed_out.iter().map(|(t, _, _)| &t.queue));
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
        let mut tx = self.begin().await?;
        let mut out = Vec::with_capacity(items.len());
        let mut freed = vec![];
        for it in items {
            let Some((t, token)) = Self::get_in(&mut tx, it.id).await? else {
                out.push(LeaseOutcome::NotFound);
                continue;
            };
            let held = token.as_deref() == Some(it.token.as_str());
            if !held || t.state != TaskState::Running {
                out.push(lease_refusal(&t, held));
                continue;
            }
            let d = t.fail_decision(now, it.retry_in, it.permanent);
            out.push(outcome_for(&d, &t));
            let e = error_entry(&t, &it.error, worker, now);
            freed.push(t.queue.clone());
            Self::apply_failures(&mut tx, &[(t, d, e)], now).await?;
        }
        tx.commit().await?;
        self.wake_queues(&freed);
        Ok(out)
    }

    async fn task_cancel(&self, id: i64, now: Timestamp) -> Result<Task> {
        let sql = format!(
            "UPDATE docket_tasks SET \
               state = CASE WHEN state = 'running' THEN state ELSE 'cancelled' END, \
               finished_at = CASE WHEN state = 'running' THEN finished_at ELSE ?2 END, \
               cancel_requested_at = CASE WHEN state = 'running' THEN COALESCE(cancel_requested_at, ?2) \
                 ELSE cancel_requested_at END \
             WHERE id = ?1 AND state IN ('scheduled','available','running','retryable') RETURNING {COLS}"
        );
        let mut tx = self.begin().await?;
        let row = sqlx::query(&sql)
            .bind(id)
            .bind(us(now))
            .fetch_optional(&mut *tx)
            .await?;
        let found = match &row {
            Some(r) => Some(decode(r)?),
            None => Self::get_in(&mut tx, id).await?.map(|x| x.0),
        };
        tx.commit().await?;
        match (row, found) {
            (Some(_), Some(t)) => Ok(t),
            (_, None) => Err(StoreError::NotFound(format!("task {id}"))),
            (None, Some(t)) if t.state == TaskState::Cancelled => Ok(t),
            (None, Some(t)) => Err(StoreError::InvalidState(format!(
                "task {id} is {} and cannot be cancelled",
                t.state
            ))),
        }
    }

    async fn task_retry(&self, id: i64, now: Timestamp) -> Result<Task> {
        let sql = format!(
            "UPDATE docket_tasks SET state = 'available', run_at = ?2, finished_at = NULL, \
               cancel_requested_at = NULL, max_attempts = MAX(max_attempts, attempt + 1) \
             WHERE id = ?1 AND state IN ('discarded','cancelled') RETURNING {COLS}"
        );
        let mut tx = self.begin().await?;
        let row = sqlx::query(&sql)
            .bind(id)
            .bind(us(now))
            .fetch_optional(&mut *tx)
            .await?;
        if let Some(r) = row {
            tx.commit().await?;
            return decode(&r);
        }
        let found = Self::get_in(&mut tx, id).await?;
        tx.commit().await?;
        match found {
            None => Err(StoreError::NotFound(format!("task {id}"))),
            Some((t, _)) => Err(StoreError::InvalidState(format!(
                "task {id} is {}; only discarded or cancelled tasks can be retried",
                t.state
            ))),
        }
    }

    async fn task_promote(&self, now: Timestamp, limit: i64) -> Result<Promoted> {
        let mut tx = self.begin().await?;
        let queues: Vec<String> = sqlx::query_scalar(
            "UPDATE docket_tasks SET state = 'available' WHERE id IN ( \
               SELECT id FROM docket_tasks WHERE state IN ('scheduled','retryable') AND run_at <= ?1 \
               AND (expires_at IS NULL OR expires_at > ?1) \
               ORDER BY run_at LIMIT ?2) RETURNING queue",
        )
        .bind(us(now))
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        let count = queues.len() as u64;
        let mut qs = queues;
        qs.sort();
        qs.dedup();
        Ok(Promoted { count, queues: qs })
    }

    async fn task_next_due(&self) -> Result<Option<Timestamp>> {
        let v: Option<i64> = sqlx::query_scalar(
            "SELECT min(run_at) FROM docket_tasks WHERE state IN ('scheduled','retryable')",
        )
        .fetch_one(&self.reader)
        .await?;
        Ok(v.map(from_us))
    }

    async fn task_rescue(&self, now: Timestamp, limit: i64) -> Result<Vec<TaskLabels>> {
        let mut tx = self.begin().await?;
        let sql = format!(
            "SELECT {COLS} FROM docket_tasks WHERE state = 'running' AND lease_expires_at < ? \
               AND queue NOT LIKE 'process:%' ORDER BY lease_expires_at LIMIT ?"
        );
        let rows = sqlx::query(&sql)
            .bind(us(now))
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
        tx.commit().await?;
        self.wake_queues(apply.iter().map(|(t, _, _)| &t.queue));
        Ok(apply.iter().map(|(t, _, _)| TaskLabels::of(t)).collect())
    }

    async fn task_expire(&self, now: Timestamp, limit: i64) -> Result<u64> {
        let mut tx = self.begin().await?;
        let r = sqlx::query(
            "UPDATE docket_tasks SET state = 'discarded', finished_at = ?1, \
               errors = json_insert(errors, '$[#]', json_object('attempt', attempt, 'at', ?2, \
                 'worker', NULL, 'message', 'expired: not started before expires_at')) \
             WHERE id IN (SELECT id FROM docket_tasks WHERE expires_at <= ?1 \
               AND state IN ('scheduled','available','retryable') LIMIT ?3)",
        )
        .bind(us(now))
        .bind(now.to_rfc3339_opts(chrono::SecondsFormat::Micros, true))
        .bind(limit)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(r.rows_affected())
    }

    async fn task_prune(&self, p: TaskPruneParams) -> Result<u64> {
        let mut tx = self.begin().await?;
        let r = sqlx::query(
            "DELETE FROM docket_tasks WHERE id IN ( \
               SELECT t.id FROM docket_tasks t LEFT JOIN docket_queues q ON q.name = t.queue \
               WHERE t.state IN ('completed','discarded','cancelled') AND t.finished_at < ?1 - \
                 CASE WHEN t.state = 'completed' THEN COALESCE(q.retention_completed_ms, ?2) \
                   ELSE COALESCE(q.retention_failed_ms, ?3) END * 1000 \
                 AND NOT (t.queue LIKE 'process:%' AND EXISTS (SELECT 1 FROM docket_processes p \
                   WHERE p.namespace = substr(t.queue, 9) AND t.concurrency_key = p.namespace || ':' || p.id)) \
               LIMIT ?4)",
        )
        .bind(us(p.now))
        .bind(ms(p.retention_completed))
        .bind(ms(p.retention_failed))
        .bind(p.limit)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(r.rows_affected())
    }

    async fn aux_prune(&self, p: AuxPruneParams) -> Result<AuxPruned> {
        let cut = |d: Duration| us(docket_core::time::sub(p.now, d));
        let mut tx = self.begin().await?;
        let notifications = sqlx::query(
            "DELETE FROM docket_notifications WHERE seq IN ( \
               SELECT n.seq FROM docket_notifications n \
               LEFT JOIN docket_sinks s ON s.name = 'webhook:' || n.namespace \
               WHERE n.created_at < ?1 AND (s.name IS NULL OR n.seq <= s.seq) \
               ORDER BY n.seq LIMIT ?2)",
        )
        .bind(cut(p.notifications))
        .bind(p.limit)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        let audit = sqlx::query(
            "DELETE FROM docket_audit WHERE id IN (SELECT id FROM docket_audit WHERE at < ?1 \
             ORDER BY id LIMIT ?2)",
        )
        .bind(cut(p.audit))
        .bind(p.limit)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        let nodes =
            sqlx::query("DELETE FROM docket_nodes WHERE COALESCE(stopped_at, heartbeat_at) < ?1")
                .bind(cut(p.nodes))
                .execute(&mut *tx)
                .await?
                .rows_affected();
        tx.commit().await?;
        Ok(AuxPruned {
            notifications,
            audit,
            nodes,
        })
    }

    async fn queue_list(&self) -> Result<Vec<QueueStats>> {
        let counts = self.counts(None).await?;
        let rows = sqlx::query("SELECT * FROM docket_queues")
            .fetch_all(&self.reader)
            .await?;
        let settings = rows
            .iter()
            .map(|r| Ok((r.try_get::<String, _>("name")?, queue_settings(r)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(merge_queues(settings, counts))
    }

    async fn queue_get(&self, name: &str) -> Result<QueueStats> {
        let row = sqlx::query("SELECT * FROM docket_queues WHERE name = ?")
            .bind(name)
            .fetch_optional(&self.reader)
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
            .map(|b| serde_json::to_string(&b).expect("backoff serialises"));
        let mut tx = self.begin().await?;
        sqlx::query(
            "INSERT INTO docket_queues (name, paused, concurrency_limit, max_attempts, backoff, \
               timeout_ms, retention_completed_ms, retention_failed_ms, updated_at, mask_payload) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) \
             ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, \
               concurrency_limit = excluded.concurrency_limit, max_attempts = excluded.max_attempts, \
               backoff = excluded.backoff, timeout_ms = excluded.timeout_ms, \
               retention_completed_ms = excluded.retention_completed_ms, \
               retention_failed_ms = excluded.retention_failed_ms, updated_at = excluded.updated_at, \
               mask_payload = excluded.mask_payload",
        )
        .bind(name)
        .bind(s.paused as i64)
        .bind(s.concurrency_limit)
        .bind(s.max_attempts)
        .bind(backoff)
        .bind(s.timeout.map(ms))
        .bind(s.retention_completed.map(ms))
        .bind(s.retention_failed.map(ms))
        .bind(us(now))
        .bind(s.mask_payload as i64)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
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
        let mut tx = self.begin().await?;
        sqlx::query(
            "INSERT INTO docket_nodes (name, started_at, heartbeat_at, stopped_at, version, info) \
             VALUES (?1, ?2, ?3, NULL, ?4, ?5) ON CONFLICT (name) DO UPDATE SET \
             started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at, \
             stopped_at = NULL, version = excluded.version, info = excluded.info",
        )
        .bind(&n.name)
        .bind(us(n.started_at))
        .bind(us(n.heartbeat_at))
        .bind(&n.version)
        .bind(n.info.to_string())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn node_stop(&self, name: &str, now: Timestamp) -> Result<()> {
        let mut tx = self.begin().await?;
        sqlx::query("UPDATE docket_nodes SET stopped_at = ?2 WHERE name = ?1")
            .bind(name)
            .bind(us(now))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn node_list(&self) -> Result<Vec<NodeRecord>> {
        let rows = sqlx::query("SELECT * FROM docket_nodes ORDER BY name")
            .fetch_all(&self.reader)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(NodeRecord {
                    name: r.try_get("name")?,
                    started_at: time(r, "started_at")?,
                    heartbeat_at: time(r, "heartbeat_at")?,
                    stopped_at: time_opt(r, "stopped_at")?,
                    version: r.try_get("version")?,
                    info: json(r, "info")?,
                })
            })
            .collect()
    }

    async fn listen(&self) -> Result<Option<tokio::sync::mpsc::Receiver<Wake>>> {
        // Only this process's changes: other processes' are seen by polling.
        let mut sub = self.wake.subscribe();
        let (tx, rx) = tokio::sync::mpsc::channel(1024);
        tokio::spawn(async move {
            loop {
                match sub.recv().await {
                    Ok(q) => {
                        if tx.send(q).await.is_err() {
                            return;
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        if tx.send(Wake::All).await.is_err() {
                            return;
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        Ok(Some(rx))
    }

    async fn namespace_put(&self, name: &str, config: &Value, now: Timestamp) -> Result<()> {
        let mut tx = self.begin().await?;
        sqlx::query(
            "INSERT INTO docket_namespaces (name, config, updated_at) VALUES (?1, ?2, ?3) \
             ON CONFLICT (name) DO UPDATE SET config = excluded.config, updated_at = excluded.updated_at",
        )
        .bind(name)
        .bind(config.to_string())
        .bind(us(now))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn namespace_list(&self) -> Result<Vec<(String, Value)>> {
        let rows: Vec<(String, String)> =
            sqlx::query_as("SELECT name, config FROM docket_namespaces ORDER BY name")
                .fetch_all(&self.reader)
                .await?;
        rows.into_iter()
            .map(|(n, c)| {
                Ok((
                    n,
                    serde_json::from_str(&c).map_err(|e| {
                        StoreError::Corrupt(format!("namespace: column config: {e}"))
                    })?,
                ))
            })
            .collect()
    }

    async fn task_find_by_unique_key(&self, key: &str) -> Result<Option<Task>> {
        let sql = format!(
            "SELECT {COLS} FROM docket_tasks WHERE unique_key = ? ORDER BY id DESC LIMIT 1"
        );
        let row = sqlx::query(&sql)
            .bind(key)
            .fetch_optional(&self.reader)
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
        let mut tx = self.begin().await?;
        let created: Option<String> = sqlx::query_scalar(
            "INSERT INTO docket_processes (namespace, id, status, status_changed_at, created_at) \
             VALUES (?1, ?2, 'init', ?3, ?3) ON CONFLICT DO NOTHING RETURNING id",
        )
        .bind(namespace)
        .bind(id)
        .bind(us(now))
        .fetch_optional(&mut *tx)
        .await?;
        if created.is_none() {
            return Err(StoreError::Conflict(format!(
                "process {namespace}/{id} exists"
            )));
        }
        let queue = init.queue.clone();
        let t = Self::insert_one(&mut tx, init, now).await?;
        Self::publish(
            &mut tx,
            namespace,
            id,
            &[("created", None, serde_json::json!({}))],
            now,
        )
        .await?;
        tx.commit().await?;
        self.wake_queues([&queue]);
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
        let mut tx = self.begin().await?;
        let status: Option<String> = sqlx::query_scalar(
            "SELECT status FROM docket_processes WHERE namespace = ?1 AND id = ?2",
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
        let queue = task.queue.clone();
        let t = Self::insert_one(&mut tx, task, now).await?;
        tx.commit().await?;
        self.wake_queues([&queue]);
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
            sqlx::query("SELECT * FROM docket_processes WHERE namespace = ?1 AND id = ?2")
                .bind(namespace)
                .bind(id)
                .fetch_optional(&self.reader)
                .await?
        else {
            return Ok(None);
        };
        let p = decode_process(&r)?;
        let offset = range.offset.filter(|o| *o > 0);
        let sql = match range.direction {
            Direction::Forward => {
                "SELECT * FROM docket_events WHERE namespace = ?1 AND process_id = ?2 \
                 AND (?3 IS NULL OR event_id > ?3) ORDER BY event_id LIMIT ?4"
            }
            Direction::Backward => {
                "SELECT * FROM docket_events WHERE namespace = ?1 AND process_id = ?2 \
                 AND (?3 IS NULL OR event_id < ?3) ORDER BY event_id DESC LIMIT ?4"
            }
        };
        let rows = sqlx::query(sql)
            .bind(namespace)
            .bind(id)
            .bind(offset)
            .bind(range.limit.unwrap_or(i64::MAX))
            .fetch_all(&self.reader)
            .await?;
        let events = rows
            .iter()
            .map(|e| {
                Ok(Event {
                    event_id: e.try_get("event_id")?,
                    task_id: e.try_get("task_id")?,
                    timestamp: time(e, "timestamp")?,
                    metadata: json(e, "metadata")?,
                    payload: json(e, "payload")?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Some((p, events)))
    }

    async fn process_commit(&self, c: ProcessCommit) -> Result<()> {
        let mut tx = self.begin().await?;
        let key = docket_core::process::key_of(&c.namespace, &c.id);
        let (t, token) = Self::get_in(&mut tx, c.task_id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("task {}", c.task_id)))?;
        if t.state != TaskState::Running || token.as_deref() != Some(c.token.as_str()) {
            return Err(StoreError::LeaseLost);
        }
        let (last, was): (i64, String) = sqlx::query_as(
            "SELECT last_event_id, status FROM docket_processes WHERE namespace = ?1 AND id = ?2",
        )
        .bind(&c.namespace)
        .bind(&c.id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("process {}/{}", c.namespace, c.id)))?;
        let n = c.events.len() as i64;
        for (i, e) in c.events.iter().enumerate() {
            let meta = if e.metadata.is_null() {
                serde_json::json!({})
            } else {
                e.metadata.clone()
            };
            sqlx::query(
                "INSERT INTO docket_events (namespace, process_id, event_id, task_id, timestamp, metadata, payload) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .bind(&c.namespace)
            .bind(&c.id)
            .bind(last + 1 + i as i64)
            .bind(c.task_id)
            .bind(us(c.now))
            .bind(meta.to_string())
            .bind(e.payload.to_string())
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query(
            "UPDATE docket_processes SET \
               previous_status = CASE WHEN status <> 'running' THEN status ELSE previous_status END, \
               status_changed_at = CASE WHEN status <> 'running' THEN ?3 ELSE status_changed_at END, \
               detail = CASE WHEN status = 'error' THEN NULL ELSE detail END, \
               corrupted_by = CASE WHEN status = 'error' THEN NULL ELSE corrupted_by END, \
               status = 'running', aux_state = COALESCE(?4, aux_state), metadata = COALESCE(?5, metadata), \
               last_event_id = last_event_id + ?6 \
             WHERE namespace = ?1 AND id = ?2",
        )
        .bind(&c.namespace)
        .bind(&c.id)
        .bind(us(c.now))
        .bind(c.aux_state.as_ref().map(|v| v.to_string()))
        .bind(c.metadata.as_ref().map(|v| v.to_string()))
        .bind(n)
        .execute(&mut *tx)
        .await?;
        if !matches!(c.timer, TimerChange::Keep) {
            sqlx::query(
                "UPDATE docket_tasks SET state = 'cancelled', finished_at = ?2 WHERE concurrency_key = ?1 \
                 AND kind IN ('timeout', 'remove') AND state IN ('scheduled', 'available', 'retryable')",
            )
            .bind(&key)
            .bind(us(c.now))
            .execute(&mut *tx)
            .await?;
        }
        if let TimerChange::Set(t) = c.timer {
            Self::insert_one(&mut tx, *t, c.now).await?;
        }
        for t in c.also {
            Self::insert_one(&mut tx, t, c.now).await?;
        }
        sqlx::query(
            "UPDATE docket_tasks SET state = 'completed', finished_at = ?2, result = ?3, lease_expires_at = NULL \
             WHERE id = ?1",
        )
        .bind(c.task_id)
        .bind(us(c.now))
        .bind(c.response.to_string())
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
        Self::publish(&mut tx, &c.namespace, &c.id, &items, c.now).await?;
        tx.commit().await?;
        self.wake_queues([&t.queue]);
        Ok(())
    }

    async fn process_fail(&self, f: ProcessFail) -> Result<LeaseOutcome> {
        let mut tx = self.begin().await?;
        let Some((t, token)) = Self::get_in(&mut tx, f.fail.id).await? else {
            return Ok(LeaseOutcome::NotFound);
        };
        let held = token.as_deref() == Some(f.fail.token.as_str());
        if !held || t.state != TaskState::Running {
            return Ok(lease_refusal(&t, held));
        }
        let d = t.fail_decision(f.now, f.fail.retry_in, f.fail.permanent);
        let outcome = outcome_for(&d, &t);
        let e = error_entry(&t, &f.fail.error, None, f.now);
        let queue = t.queue.clone();
        let gave_up = matches!(d, FailDecision::Discard);
        Self::apply_failures(&mut tx, &[(t, d, e)], f.now).await?;
        sqlx::query("UPDATE docket_tasks SET result = ?2 WHERE id = ?1")
            .bind(f.fail.id)
            .bind(serde_json::json!({"error": f.error_value}).to_string())
            .execute(&mut *tx)
            .await?;
        if let (true, ProcessBreak::Break { corrupted }) = (gave_up, f.on_give_up) {
            let corrupted_by = corrupted.then_some(f.fail.id);
            Self::break_process(
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
        tx.commit().await?;
        self.wake_queues([&queue]);
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
        let mut tx = self.begin().await?;
        let (t, tok) = Self::get_in(&mut tx, task_id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("task {task_id}")))?;
        if t.state != TaskState::Running || tok.as_deref() != Some(token) {
            return Err(StoreError::LeaseLost);
        }
        sqlx::query("DELETE FROM docket_events WHERE namespace = ?1 AND process_id = ?2")
            .bind(namespace)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM docket_processes WHERE namespace = ?1 AND id = ?2")
            .bind(namespace)
            .bind(id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("DELETE FROM docket_tasks WHERE concurrency_key = ?1")
            .bind(docket_core::process::key_of(namespace, id))
            .execute(&mut *tx)
            .await?;
        Self::publish(
            &mut tx,
            namespace,
            id,
            &[("removed", None, serde_json::json!({}))],
            _now,
        )
        .await?;
        tx.commit().await?;
        self.wake_queues([&t.queue]);
        Ok(())
    }

    async fn process_import(&self, p: ProcessImport) -> Result<()> {
        let pr = &p.process;
        let mut tx = self.begin().await?;
        let created: Option<String> = sqlx::query_scalar(
            "INSERT INTO docket_processes (namespace, id, status, previous_status, status_changed_at, detail, \
               aux_state, metadata, corrupted_by, created_at, last_event_id) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, NULL, ?9, ?10) ON CONFLICT DO NOTHING RETURNING id",
        )
        .bind(&pr.namespace)
        .bind(&pr.id)
        .bind(pr.status.as_str())
        .bind(pr.previous_status.map(|s| s.as_str()))
        .bind(us(pr.status_changed_at))
        .bind(&pr.detail)
        .bind(pr.aux_state.to_string())
        .bind(pr.metadata.to_string())
        .bind(us(pr.created_at))
        .bind(p.history.len() as i64)
        .fetch_optional(&mut *tx)
        .await?;
        if created.is_none() {
            return Err(StoreError::Conflict(format!(
                "process {}/{} exists",
                pr.namespace, pr.id
            )));
        }
        for e in &p.history {
            sqlx::query(
                "INSERT INTO docket_events (namespace, process_id, event_id, task_id, timestamp, metadata, payload) \
                 VALUES (?1, ?2, ?3, NULL, ?4, ?5, ?6)",
            )
            .bind(&pr.namespace)
            .bind(&pr.id)
            .bind(e.event_id)
            .bind(us(e.timestamp))
            .bind(e.metadata.to_string())
            .bind(e.payload.to_string())
            .execute(&mut *tx)
            .await?;
        }
        let queue = p.timer.as_ref().map(|t| t.queue.clone());
        if let Some(t) = p.timer {
            Self::insert_one(&mut tx, t, p.now).await?;
        }
        Self::publish(
            &mut tx,
            &pr.namespace,
            &pr.id,
            &[("created", None, serde_json::json!({"imported": true}))],
            p.now,
        )
        .await?;
        tx.commit().await?;
        if let Some(q) = queue {
            self.wake_queues([&q]);
        }
        Ok(())
    }

    async fn notification_list(
        &self,
        namespace: Option<&str>,
        after: i64,
        limit: i64,
    ) -> Result<Vec<Notification>> {
        let rows = sqlx::query(
            "SELECT * FROM docket_notifications WHERE seq > ?1 AND (?2 IS NULL OR namespace = ?2) \
             ORDER BY seq LIMIT ?3",
        )
        .bind(after)
        .bind(namespace)
        .bind(limit)
        .fetch_all(&self.reader)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(Notification {
                    seq: r.try_get("seq")?,
                    namespace: r.try_get("namespace")?,
                    process_id: r.try_get("process_id")?,
                    kind: r.try_get("kind")?,
                    event_id: r.try_get("event_id")?,
                    data: json(r, "data")?,
                    created_at: time(r, "created_at")?,
                })
            })
            .collect()
    }

    async fn notification_last_seq(&self) -> Result<i64> {
        Ok(
            sqlx::query_scalar("SELECT COALESCE(max(seq), 0) FROM docket_notifications")
                .fetch_one(&self.reader)
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
        let mut tx = self.begin().await?;
        sqlx::query("INSERT INTO docket_sinks (name) VALUES (?1) ON CONFLICT DO NOTHING")
            .bind(name)
            .execute(&mut *tx)
            .await?;
        let seq: Option<i64> = sqlx::query_scalar(
            "UPDATE docket_sinks SET owner = ?2, lease_until = ?3 WHERE name = ?1 \
             AND (owner IS NULL OR owner = ?2 OR lease_until < ?4) RETURNING seq",
        )
        .bind(name)
        .bind(owner)
        .bind(us(until))
        .bind(us(now))
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(seq)
    }

    async fn sink_advance(&self, name: &str, owner: &str, seq: i64) -> Result<bool> {
        let mut tx = self.begin().await?;
        let r = sqlx::query("UPDATE docket_sinks SET seq = ?3 WHERE name = ?1 AND owner = ?2")
            .bind(name)
            .bind(owner)
            .bind(seq)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(r.rows_affected() == 1)
    }

    async fn task_run_now(&self, id: i64, now: Timestamp) -> Result<Task> {
        let mut tx = self.begin().await?;
        let row = sqlx::query(&format!(
            "UPDATE docket_tasks SET state = 'available', run_at = ?2 \
             WHERE id = ?1 AND state IN ('scheduled', 'retryable') RETURNING {COLS}"
        ))
        .bind(id)
        .bind(us(now))
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        match row {
            Some(r) => {
                let t = decode(&r)?;
                let _ = self.wake.send(Wake::Queue(t.queue.clone()));
                Ok(t)
            }
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
        let rows: Vec<(i64, i64, i64)> = sqlx::query_as(
            "SELECT (finished_at / 60000000) * 60000000 AS m, \
               sum(state = 'completed'), sum(state = 'discarded') \
             FROM docket_tasks WHERE finished_at >= ?1 AND state IN ('completed', 'discarded') \
             GROUP BY m ORDER BY m",
        )
        .bind(us(since))
        .fetch_all(&self.reader)
        .await?;
        rows.into_iter()
            .map(|(m, completed, failed)| {
                Ok(Throughput {
                    minute: decode::micros("throughput", "minute", m)?,
                    completed,
                    failed,
                })
            })
            .collect()
    }

    async fn audit_add(
        &self,
        actor: &str,
        action: &str,
        target: &str,
        detail: Option<Value>,
        now: Timestamp,
    ) -> Result<()> {
        let mut tx = self.begin().await?;
        sqlx::query(
            "INSERT INTO docket_audit (at, actor, action, target, detail) VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .bind(us(now))
        .bind(actor)
        .bind(action)
        .bind(target)
        .bind(detail.map(|d| d.to_string()))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn token_create(&self, p: TokenCreate) -> Result<TokenRecord> {
        let mut tx = self.begin().await?;
        let row = sqlx::query(&format!(
            "INSERT INTO docket_tokens (name, hash, scopes, queues, created_at, expires_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING {TOKEN_COLS}"
        ))
        .bind(&p.name)
        .bind(&p.hash)
        .bind(serde_json::to_string(&p.scopes).expect("scopes serialise"))
        .bind(serde_json::to_string(&p.queues).expect("queues serialise"))
        .bind(us(p.now))
        .bind(p.expires_at.map(us))
        .fetch_one(&mut *tx)
        .await?;
        let t = decode_token(&row)?;
        tx.commit().await?;
        Ok(t)
    }

    async fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {TOKEN_COLS} FROM docket_tokens WHERE hash = ?1"
        ))
        .bind(hash)
        .fetch_optional(&self.reader)
        .await?;
        row.as_ref().map(decode_token).transpose()
    }

    async fn token_list(&self) -> Result<Vec<TokenRecord>> {
        let rows = sqlx::query(&format!(
            "SELECT {TOKEN_COLS} FROM docket_tokens ORDER BY id"
        ))
        .fetch_all(&self.reader)
        .await?;
        rows.iter().map(decode_token).collect()
    }

    async fn token_revoke(&self, p: TokenRevoke) -> Result<bool> {
        let mut tx = self.begin().await?;
        let r = sqlx::query(
            "UPDATE docket_tokens SET revoked_at = ?2 WHERE name = ?1 AND revoked_at IS NULL",
        )
        .bind(&p.name)
        .bind(us(p.now))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(r.rows_affected() > 0)
    }

    async fn token_touch(&self, p: TokenTouch) -> Result<()> {
        let mut tx = self.begin().await?;
        sqlx::query("UPDATE docket_tokens SET last_used_at = ?2 WHERE id = ?1")
            .bind(p.id)
            .bind(us(p.now))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn audit_list(&self, limit: i64) -> Result<Vec<AuditEntry>> {
        let rows: Vec<(i64, i64, String, String, String, Option<String>)> = sqlx::query_as(
            "SELECT id, at, actor, action, target, detail FROM docket_audit ORDER BY id DESC LIMIT ?1",
        )
        .bind(limit)
        .fetch_all(&self.reader)
        .await?;
        rows.into_iter()
            .map(|(id, at, actor, action, target, detail)| {
                let row = format!("audit entry {id}");
                Ok(AuditEntry {
                    id,
                    at: decode::micros(&row, "at", at)?,
                    actor,
                    action,
                    target,
                    detail: detail
                        .map(|d| {
                            serde_json::from_str(&d).map_err(|e| {
                                StoreError::Corrupt(format!("{row}: column detail: {e}"))
                            })
                        })
                        .transpose()?,
                })
            })
            .collect()
    }

    fn pool_connections(&self) -> (usize, usize) {
        let idle = self.writer.num_idle() + self.reader.num_idle();
        let size = (self.writer.size() + self.reader.size()) as usize;
        (size - idle.min(size), idle)
    }

    async fn queue_oldest_available(&self) -> Result<Vec<(String, Timestamp)>> {
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "SELECT queue, min(run_at) FROM docket_tasks WHERE state = 'available' GROUP BY queue",
        )
        .fetch_all(&self.reader)
        .await?;
        rows.into_iter()
            .map(|(q, t)| Ok((q, decode::micros("queue", "run_at", t)?)))
            .collect()
    }

    async fn schedule_put(
        &self,
        spec: &ScheduleSpec,
        next_run_at: Timestamp,
        now: Timestamp,
    ) -> Result<Schedule> {
        let mut tx = self.begin().await?;
        let row = sqlx::query(&format!(
            "INSERT INTO docket_schedules (name, spec, next_run_at, created_at, updated_at) \
             VALUES (?1, ?2, ?3, ?4, ?4) ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, \
             next_run_at = excluded.next_run_at, updated_at = excluded.updated_at RETURNING {SCHEDULE_COLS}"
        ))
        .bind(&spec.name)
        .bind(serde_json::to_string(spec).map_err(|e| StoreError::Invalid(e.to_string()))?)
        .bind(us(next_run_at))
        .bind(us(now))
        .fetch_one(&mut *tx)
        .await?;
        let s = decode_schedule(&row)?;
        tx.commit().await?;
        Ok(s)
    }

    async fn schedule_get(&self, name: &str) -> Result<Option<Schedule>> {
        let row = sqlx::query(&format!(
            "SELECT {SCHEDULE_COLS} FROM docket_schedules WHERE name = ?1"
        ))
        .bind(name)
        .fetch_optional(&self.reader)
        .await?;
        row.as_ref().map(decode_schedule).transpose()
    }

    async fn schedule_list(&self) -> Result<Vec<Schedule>> {
        let rows = sqlx::query(&format!(
            "SELECT {SCHEDULE_COLS} FROM docket_schedules ORDER BY name"
        ))
        .fetch_all(&self.reader)
        .await?;
        rows.iter().map(decode_schedule).collect()
    }

    async fn schedule_delete(&self, name: &str) -> Result<bool> {
        let mut tx = self.begin().await?;
        let r = sqlx::query("DELETE FROM docket_schedules WHERE name = ?1")
            .bind(name)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(r.rows_affected() == 1)
    }

    async fn schedule_pause(
        &self,
        name: &str,
        paused: bool,
        next_run_at: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<Option<Schedule>> {
        let mut tx = self.begin().await?;
        let row = sqlx::query(&format!(
            "UPDATE docket_schedules SET paused = ?2, next_run_at = COALESCE(?3, next_run_at), \
             updated_at = ?4 WHERE name = ?1 RETURNING {SCHEDULE_COLS}"
        ))
        .bind(name)
        .bind(paused)
        .bind(next_run_at.map(us))
        .bind(us(now))
        .fetch_optional(&mut *tx)
        .await?;
        let s = row.as_ref().map(decode_schedule).transpose()?;
        tx.commit().await?;
        Ok(s)
    }

    async fn schedule_due(&self, now: Timestamp, limit: i64) -> Result<Vec<Schedule>> {
        let rows = sqlx::query(&format!(
            "SELECT {SCHEDULE_COLS} FROM docket_schedules WHERE paused = 0 AND next_run_at <= ?1 \
             ORDER BY next_run_at LIMIT ?2"
        ))
        .bind(us(now))
        .bind(limit)
        .fetch_all(&self.reader)
        .await?;
        rows.iter().map(decode_schedule).collect()
    }

    async fn schedule_next_due(&self) -> Result<Option<Timestamp>> {
        let v: Option<i64> =
            sqlx::query_scalar("SELECT min(next_run_at) FROM docket_schedules WHERE paused = 0")
                .fetch_one(&self.reader)
                .await?;
        Ok(v.map(from_us))
    }

    async fn schedule_fire(&self, p: ScheduleFireParams) -> Result<Option<Option<Task>>> {
        let mut tx = self.begin().await?;
        let moved = sqlx::query(
            "UPDATE docket_schedules SET next_run_at = ?3, last_run_at = ?4, updated_at = ?4 \
             WHERE name = ?1 AND next_run_at = ?2 AND paused = 0",
        )
        .bind(&p.name)
        .bind(us(p.occurrence))
        .bind(us(p.next_run_at))
        .bind(us(p.now))
        .execute(&mut *tx)
        .await?;
        if moved.rows_affected() == 0 {
            return Ok(None);
        }
        let task = Self::insert_row(&mut tx, &p.task, p.now)
            .await?
            .map(|id| p.task.clone().into_task(id, from_us(us(p.now))));
        if let Some(t) = &task {
            sqlx::query("UPDATE docket_schedules SET last_task_id = ?2 WHERE name = ?1")
                .bind(&p.name)
                .bind(t.id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(Some(task))
    }

    async fn process_simple_repair(&self, namespace: &str, id: &str, now: Timestamp) -> Result<()> {
        let mut tx = self.begin().await?;
        let r = sqlx::query(
            "UPDATE docket_processes SET previous_status = status, status = 'running', status_changed_at = ?3, \
               detail = NULL, corrupted_by = NULL WHERE namespace = ?1 AND id = ?2 AND status = 'error'",
        )
        .bind(namespace)
        .bind(id)
        .bind(us(now))
        .execute(&mut *tx)
        .await?;
        if r.rows_affected() == 1 {
            Self::publish(
                &mut tx,
                namespace,
                id,
                &[("repaired", None, serde_json::json!({"simple": true}))],
                now,
            )
            .await?;
        }
        let st: Option<String> = sqlx::query_scalar(
            "SELECT status FROM docket_processes WHERE namespace = ?1 AND id = ?2",
        )
        .bind(namespace)
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        tx.commit().await?;
        match (r.rows_affected(), st) {
            (1, _) => Ok(()),
            (_, None) => Err(StoreError::NotFound(format!("process {namespace}/{id}"))),
            (_, Some(st)) => Err(StoreError::InvalidState(format!("process is {st}"))),
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
            "SELECT * FROM docket_processes WHERE namespace = ?1 AND (?2 IS NULL OR status = ?2) \
             AND (?3 IS NULL OR id > ?3) ORDER BY id LIMIT ?4",
        )
        .bind(namespace)
        .bind(status.map(|s| s.as_str()))
        .bind(after)
        .bind(limit)
        .fetch_all(&self.reader)
        .await?;
        rows.iter().map(decode_process).collect()
    }

    async fn process_collect_zombies(&self, now: Timestamp, limit: i64) -> Result<u64> {
        let mut tx = self.begin().await?;
        let sql = format!(
            "SELECT {COLS} FROM docket_tasks WHERE state = 'running' AND lease_expires_at < ? \
               AND queue LIKE 'process:%' ORDER BY lease_expires_at LIMIT ?"
        );
        let rows = sqlx::query(&sql)
            .bind(us(now))
            .bind(limit)
            .fetch_all(&mut *tx)
            .await?;
        let mut queues = vec![];
        for r in &rows {
            let t = decode(r)?;
            let ns = t.queue.trim_start_matches("process:").to_string();
            let pid = t.payload["process_id"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let e = error_entry(&t, "zombie detected", None, now);
            Self::apply_failures(&mut tx, &[(t.clone(), FailDecision::Discard, e)], now).await?;
            Self::break_process(&mut tx, &ns, &pid, "zombie detected", t.id, Some(t.id), now)
                .await?;
            queues.push(t.queue.clone());
        }
        tx.commit().await?;
        self.wake_queues(&queues);
        Ok(rows.len() as u64)
    }

    async fn close(&self) {
        self.writer.close().await;
        self.reader.close().await;
    }
}

const SCHEDULE_COLS: &str =
    "spec, paused, next_run_at, last_run_at, last_task_id, created_at, updated_at";

fn decode_schedule(r: &sqlx::sqlite::SqliteRow) -> Result<Schedule> {
    let spec: String = r.try_get("spec")?;
    Ok(Schedule {
        spec: serde_json::from_str(&spec)
            .map_err(|e| StoreError::Corrupt(format!("schedule: column spec: {e}")))?,
        paused: r.try_get("paused")?,
        next_run_at: time(r, "next_run_at")?,
        last_run_at: time_opt(r, "last_run_at")?,
        last_task_id: r.try_get("last_task_id")?,
        created_at: time(r, "created_at")?,
        updated_at: time(r, "updated_at")?,
    })
}

const TOKEN_COLS: &str =
    "id, name, hash, scopes, queues, created_at, expires_at, revoked_at, last_used_at";

fn decode_token(r: &SqliteRow) -> Result<TokenRecord> {
    let id: i64 = r.try_get("id")?;
    let parse = |c: &str| -> Result<Value> {
        let text: String = r.try_get(c)?;
        serde_json::from_str(&text)
            .map_err(|e| StoreError::Corrupt(format!("token {id}: stored {c} is not JSON: {e}")))
    };
    let (scopes, queues) = crate::decode_grant(id, &parse("scopes")?, &parse("queues")?)?;
    Ok(TokenRecord {
        id,
        name: r.try_get("name")?,
        hash: r.try_get("hash")?,
        scopes,
        queues,
        created_at: time(r, "created_at")?,
        expires_at: time_opt(r, "expires_at")?,
        revoked_at: time_opt(r, "revoked_at")?,
        last_used_at: time_opt(r, "last_used_at")?,
    })
}
