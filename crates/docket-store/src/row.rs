//! Reading rows, once for every backend: [`Cols`] is how a backend's row gives a column as a
//! Rust value (times, JSON and flags are stored differently: `timestamptz`/`jsonb` on
//! PostgreSQL, integer µs and text on SQLite, `DATETIME(6)` and `JSON` text on MySQL), and the
//! functions here build each record from it — a task, a process and its events, a schedule, a
//! token, a queue's settings, a node, a worker report, a notification, an audit entry. A value
//! that does not decode is an error naming the row and column ([`crate::decode`]).

use crate::{decode, NodeRecord, Result, StoreError, TokenRecord, WorkerRecord};
use docket_core::api::AuditEntry;
use docket_core::process::{Event, Notification, Process};
use docket_core::{Backoff, QueueSettings, Schedule, Task, Timestamp};
use serde_json::Value;
use std::time::Duration;

/// The [`Cols`] methods a backend's row answers with its driver's own decoding of the Rust type
/// (`sqlx::Row::try_get`), inside its `impl Cols`: `try_get_cols!(int: i64, float: f64)`. The
/// columns a backend keeps in another form (SQLite's µs times, MySQL's JSON text) are written
/// out beside it.
macro_rules! try_get_cols {
    ($($name:ident: $t:ty),* $(,)?) => {
        $(
            fn $name(&self, c: &str) -> crate::Result<$t> {
                Ok(sqlx::Row::try_get(self, c)?)
            }
        )*
    };
}
pub(crate) use try_get_cols;

/// A row of a backend, column by column. Each backend implements it for its row type; the
/// record decoders below are written once against it.
pub(crate) trait Cols {
    /// A text column.
    fn text(&self, c: &str) -> Result<String>;
    /// A nullable text column.
    fn text_opt(&self, c: &str) -> Result<Option<String>>;
    /// A 64-bit integer column.
    fn int(&self, c: &str) -> Result<i64>;
    /// A nullable 64-bit integer column.
    fn int_opt(&self, c: &str) -> Result<Option<i64>>;
    /// A 32-bit integer column.
    fn int32(&self, c: &str) -> Result<i32>;
    /// A nullable 32-bit integer column.
    fn int32_opt(&self, c: &str) -> Result<Option<i32>>;
    /// A floating-point column.
    fn float(&self, c: &str) -> Result<f64>;
    /// A boolean column.
    fn flag(&self, c: &str) -> Result<bool>;
    /// A time column.
    fn time(&self, c: &str) -> Result<Timestamp>;
    /// A nullable time column.
    fn time_opt(&self, c: &str) -> Result<Option<Timestamp>>;
    /// A JSON column.
    fn json(&self, c: &str) -> Result<Value>;
    /// A nullable JSON column.
    fn json_opt(&self, c: &str) -> Result<Option<Value>>;
    /// The claim nonce a `lease_token` column holds ([`docket_core::lease::LeaseToken`]); a
    /// value of another form holds nothing.
    fn nonce(&self, c: &str) -> Result<Option<u128>>;
}

/// Parses stored JSON text (SQLite, MySQL).
pub(crate) fn parse_json(c: &str, s: &str) -> Result<Value> {
    serde_json::from_str(s).map_err(|e| StoreError::Corrupt(format!("column {c}: {e}")))
}

/// A task's affinity as stored: a JSON object (`docket_core::labels::Affinity`), or NULL.
pub(crate) fn affinity_json(a: Option<&docket_core::labels::Affinity>) -> Option<Value> {
    a.map(|a| serde_json::to_value(a).unwrap_or(Value::Null))
}

/// A claim's labels as its statements take them: a JSON object (`{}` for none).
pub(crate) fn labels_json(labels: &docket_core::labels::Labels) -> Value {
    serde_json::to_value(labels).unwrap_or_else(|_| serde_json::json!({}))
}

/// A task's tags as stored: a JSON array, or NULL for none.
pub(crate) fn tags_json(tags: &[String]) -> Option<Value> {
    (!tags.is_empty()).then(|| Value::from(tags.to_vec()))
}

/// A task from a row of [`crate::TASK_COLS`].
pub(crate) fn task(row: &impl Cols) -> Result<Task> {
    let id = row.int("id")?;
    task_of(row, id).map_err(|e| match e {
        StoreError::Corrupt(m) if !m.starts_with("task ") => {
            StoreError::Corrupt(format!("task {id}: {m}"))
        }
        e => e,
    })
}

fn task_of(row: &impl Cols, id: i64) -> Result<Task> {
    let r = format!("task {id}");
    let ms = |c: &str| -> Result<Duration> { decode::millis(&r, c, row.int(c)?) };
    let trace_id = row.text_opt("trace_id")?;
    let affinity: Option<docket_core::labels::Affinity> = row
        .json_opt("affinity")?
        .map(serde_json::from_value)
        .transpose()
        .map_err(|e| StoreError::Corrupt(format!("{r}: affinity: {e}")))?;
    let mut t = Task {
        id,
        queue: row.text("queue")?,
        kind: row.text("kind")?,
        payload: row.json("payload")?,
        priority: row.int32("priority")?,
        state: decode::state(&r, &row.text("state")?)?,
        run_at: row.time("run_at")?,
        expires_at: row.time_opt("expires_at")?,
        attempt: row.int32("attempt")?,
        max_attempts: row.int32("max_attempts")?,
        backoff: Backoff {
            kind: decode::backoff_kind(&r, &row.text("backoff_kind")?)?,
            initial: ms("backoff_initial_ms")?,
            coefficient: row.float("backoff_coefficient")?,
            max: ms("backoff_max_ms")?,
            jitter: row.float("backoff_jitter")?,
        },
        timeout: ms("timeout_ms")?,
        unique_key: row.text_opt("unique_key")?,
        concurrency_key: row.text_opt("concurrency_key")?,
        concurrency_limit: row.int32_opt("concurrency_limit")?,
        node: row.text_opt("node")?,
        user_id: row.text_opt("user_id")?,
        process: match (row.text_opt("namespace")?, row.text_opt("process_id")?) {
            (Some(namespace), Some(id)) => Some(docket_core::ProcessRef { namespace, id }),
            _ => None,
        },
        batch_id: row.int_opt("batch_id")?,
        rate_limit: row.text_opt("rate_limit")?,
        partition_key: row.text_opt("partition_key")?,
        debounce_key: row.text_opt("debounce_key")?,
        tags: match row.json_opt("tags")? {
            Some(v) => {
                serde_json::from_value(v).map_err(|e| StoreError::Corrupt(format!("tags: {e}")))?
            }
            None => vec![],
        },
        requires: affinity.as_ref().and_then(|a| a.requires.clone()),
        prefer: affinity
            .as_ref()
            .and_then(docket_core::labels::Affinity::prefer),
        dead_letter_of: match row.json_opt("dead_letter_of")? {
            Some(v) => Some(
                serde_json::from_value(v)
                    .map_err(|e| StoreError::Corrupt(format!("dead_letter_of: {e}")))?,
            ),
            None => None,
        },
        replaced: None,
        deps: None,
        stage: row.text_opt("stage")?,
        stages_done: decode::stages(&r, row.json_opt("stages_done")?)?,
        runs: decode::runs(&r, row.json_opt("runs")?, trace_id.as_deref())?,
        trace_id,
        run_count: row.int32("run_count")?,
        attempt_node: row.text_opt("attempt_node")?,
        result: row.json_opt("result")?,
        errors: decode::errors(&r, row.json("errors")?)?,
        progress: row.json_opt("progress")?,
        created_at: row.time("created_at")?,
        attempted_at: row.time_opt("attempted_at")?,
        finished_at: row.time_opt("finished_at")?,
        worker: row.text_opt("worker")?,
        lease_expires_at: row.time_opt("lease_expires_at")?,
        cancel_requested_at: row.time_opt("cancel_requested_at")?,
        updated_at: docket_core::time::min(),
        lease: None,
        inserted: None,
    };
    decode::last_run(&mut t);
    t.touch(row.time_opt("edited_at")?);
    Ok(t)
}

/// The token a running task's row answers to (what its holder was given).
pub(crate) fn token_of(row: &impl Cols) -> Result<Option<String>> {
    Ok(docket_core::lease::token_string(
        row.nonce("lease_token")?,
        row.int("id")?,
    ))
}

/// A process from a row of `docket_processes`.
pub(crate) fn process(r: &impl Cols) -> Result<Process> {
    let namespace = r.text("namespace")?;
    let id = r.text("id")?;
    let row = format!("process {namespace}/{id}");
    Ok(Process {
        status: decode::process_status_req(&row, "status", r.text_opt("status")?.as_deref())?,
        previous_status: decode::process_status(
            &row,
            "previous_status",
            r.text_opt("previous_status")?.as_deref(),
        )?,
        namespace,
        id,
        status_changed_at: r.time("status_changed_at")?,
        detail: r.text_opt("detail")?,
        aux_state: r.json("aux_state")?,
        metadata: r.json("metadata")?,
        corrupted_by: r.int_opt("corrupted_by")?,
        created_at: r.time("created_at")?,
        last_event_id: r.int("last_event_id")?,
    })
}

/// An event from a row of `docket_events`.
pub(crate) fn event(e: &impl Cols) -> Result<Event> {
    Ok(Event {
        event_id: e.int("event_id")?,
        task_id: e.int_opt("task_id")?,
        timestamp: e.time("timestamp")?,
        metadata: e.json("metadata")?,
        payload: e.json("payload")?,
    })
}

/// A schedule from a row of [`crate::sql::SCHEDULE_COLS`].
pub(crate) fn schedule(r: &impl Cols) -> Result<Schedule> {
    let spec = r.json("spec")?;
    Ok(Schedule {
        spec: serde_json::from_value(spec)
            .map_err(|e| StoreError::Corrupt(format!("schedule: column spec: {e}")))?,
        paused: r.flag("paused")?,
        next_run_at: r.time("next_run_at")?,
        last_run_at: r.time_opt("last_run_at")?,
        last_task_id: r.int_opt("last_task_id")?,
        created_at: r.time("created_at")?,
        updated_at: r.time("updated_at")?,
    })
}

/// A token from a row of [`crate::sql::TOKEN_COLS`].
pub(crate) fn token(r: &impl Cols) -> Result<TokenRecord> {
    let id = r.int("id")?;
    let (scopes, queues) = crate::decode_grant(id, &r.json("scopes")?, &r.json("queues")?)?;
    Ok(TokenRecord {
        id,
        name: r.text("name")?,
        hash: r.text("hash")?,
        scopes,
        queues,
        created_at: r.time("created_at")?,
        expires_at: r.time_opt("expires_at")?,
        revoked_at: r.time_opt("revoked_at")?,
        last_used_at: r.time_opt("last_used_at")?,
    })
}

/// A queue's settings from a row of `docket_queues`.
pub(crate) fn queue_settings(row: &impl Cols) -> Result<QueueSettings> {
    let r = row
        .text("name")
        .map_or_else(|_| "queue".to_string(), |n| format!("queue {n}"));
    let d = |c: &str| decode::millis_opt(&r, c, row.int_opt(c)?);
    Ok(QueueSettings {
        paused: row.flag("paused")?,
        concurrency_limit: row.int32_opt("concurrency_limit")?,
        max_attempts: row.int32_opt("max_attempts")?,
        backoff: decode::backoff(&r, row.json_opt("backoff")?)?,
        timeout: d("timeout_ms")?,
        retention_completed: d("retention_completed_ms")?,
        retention_failed: d("retention_failed_ms")?,
        mask_payload: row.flag("mask_payload")?,
        schedule_limit: row.int32_opt("schedule_limit")?,
        schedule_interval: d("schedule_interval_ms")?,
        rate_limit: row.text_opt("rate_limit")?,
        dead_letter: row.text_opt("dead_letter")?,
        fair: row.flag("fair")?,
        partition_limit: row.int32_opt("partition_limit")?,
        partition_weights: match row.json_opt("partition_weights")? {
            Some(v) => Some(
                serde_json::from_value(v)
                    .map_err(|e| StoreError::Corrupt(format!("{r}: partition_weights: {e}")))?,
            ),
            None => None,
        },
    })
}

/// A queue settings row's created_at and updated_at.
pub(crate) fn queue_times(row: &impl Cols) -> Result<crate::QueueTimes> {
    Ok((row.time_opt("created_at")?, row.time_opt("updated_at")?))
}

/// A node from a row of `docket_nodes`.
pub(crate) fn node(r: &impl Cols) -> Result<NodeRecord> {
    Ok(NodeRecord {
        name: r.text("name")?,
        started_at: r.time("started_at")?,
        heartbeat_at: r.time("heartbeat_at")?,
        stopped_at: r.time_opt("stopped_at")?,
        draining_at: r.time_opt("draining_at")?,
        version: r.text("version")?,
        info: r.json("info")?,
    })
}

/// A worker's report from a row of `docket_workers`.
pub(crate) fn worker(r: &impl Cols) -> Result<WorkerRecord> {
    Ok(WorkerRecord {
        name: r.text("name")?,
        report: r.json("report")?,
        reported_at: r.time("reported_at")?,
        interval_ms: r.int("interval_ms")?,
    })
}

/// A notification from a row of `docket_notifications`.
pub(crate) fn notification(r: &impl Cols) -> Result<Notification> {
    Ok(Notification {
        seq: r.int("seq")?,
        namespace: r.text("namespace")?,
        process_id: r.text("process_id")?,
        kind: r.text("kind")?,
        event_id: r.int_opt("event_id")?,
        data: r.json("data")?,
        created_at: r.time("created_at")?,
    })
}

/// An audit entry from a row of `docket_audit`.
pub(crate) fn audit(r: &impl Cols) -> Result<AuditEntry> {
    let id = r.int("id")?;
    let named = |e: StoreError| match e {
        StoreError::Corrupt(m) => StoreError::Corrupt(format!("audit entry {id}: {m}")),
        e => e,
    };
    Ok(AuditEntry {
        id,
        at: r.time("at").map_err(named)?,
        actor: r.text("actor")?,
        action: r.text("action")?,
        target: r.text("target")?,
        detail: r.json_opt("detail").map_err(named)?,
    })
}

/// A task transition from a row of `docket_task_events`.
pub(crate) fn task_transition(row: &impl Cols) -> Result<docket_core::sink::TaskTransition> {
    Ok(docket_core::sink::TaskTransition {
        seq: row.int("seq")?,
        task_id: row.int("task_id")?,
        queue: row.text("queue")?,
        kind: row.text("kind")?,
        from_state: row.text_opt("from_state")?,
        to_state: row.text("to_state")?,
        attempt: row.int32("attempt")?,
        from_stage: row.text_opt("from_stage")?,
        stage: row.text_opt("stage")?,
        at: row.time("at")?,
    })
}

/// A batch (uncounted) from a row of `docket_batches`.
pub(crate) fn batch(r: &impl Cols) -> Result<docket_core::batch::Batch> {
    let id = r.int("id")?;
    let corrupt =
        |c: &str, e: serde_json::Error| StoreError::Corrupt(format!("batch {id}: {c}: {e}"));
    Ok(docket_core::batch::Batch {
        id,
        name: r.text_opt("name")?,
        open: !r.flag("sealed")?,
        total: 0,
        done: 0,
        counts: Default::default(),
        callbacks: serde_json::from_value(r.json("callbacks")?)
            .map_err(|e| corrupt("callbacks", e))?,
        fired: match r.json_opt("fired")? {
            Some(v) => serde_json::from_value(v).map_err(|e| corrupt("fired", e))?,
            None => Default::default(),
        },
        created_at: r.time("created_at")?,
        settled_at: r.time_opt("settled_at")?,
    })
}

/// A workflow run from a row of [`crate::sql::RUN_COLS`].
pub(crate) fn workflow_run(r: &impl Cols) -> Result<docket_core::durable::WorkflowRun> {
    let id = r.text("id")?;
    let state = r.text("state")?;
    Ok(docket_core::durable::WorkflowRun {
        state: docket_core::durable::RunState::parse(&state)
            .map_err(|e| StoreError::Corrupt(format!("workflow run {id}: column state: {e}")))?,
        workflow: r.text("workflow")?,
        queue: r.text("queue")?,
        input: r.json("input")?,
        result: r.json_opt("result")?,
        error: r.text_opt("error")?,
        parent_id: r.text_opt("parent_id")?,
        task_id: r.int("task_id")?,
        steps: r.int("steps")?,
        waiting_for: r.text_opt("waiting_for")?,
        wake_at: r.time_opt("wake_at")?,
        created_at: r.time("created_at")?,
        updated_at: r.time("updated_at")?,
        finished_at: r.time_opt("finished_at")?,
        id,
    })
}

/// A journal entry from a row of [`crate::sql::ENTRY_COLS`].
pub(crate) fn entry(r: &impl Cols) -> Result<docket_core::durable::Entry> {
    use docket_core::durable::{EntryKind, EntryState};
    let seq = r.int("seq")?;
    let corrupt =
        |c: &str, e: String| StoreError::Corrupt(format!("journal entry {seq}: column {c}: {e}"));
    Ok(docket_core::durable::Entry {
        kind: EntryKind::parse(&r.text("kind")?).map_err(|e| corrupt("kind", e))?,
        state: EntryState::parse(&r.text("state")?).map_err(|e| corrupt("state", e))?,
        name: r.text("name")?,
        output: r.json_opt("output")?,
        error: r.text_opt("error")?,
        attempts: r.int32("attempts")?,
        child_id: r.text_opt("child_id")?,
        started_at: r.time("started_at")?,
        finished_at: r.time_opt("finished_at")?,
        wake_at: r.time_opt("wake_at")?,
        seq,
    })
}
