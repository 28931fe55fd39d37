//! Metric names (one place) and the Prometheus recorder.
//!
//! progressor's eight histograms keep their exact names, in milliseconds, labelled by
//! `namespace` (plus `task_type` / `completion_type` where progressor has them). Where docket's
//! design differs, the histogram measures docket's counterpart:
//! - calls scanning: a namespace runner's claim (calls and due timers are claimed together,
//!   calls first); timers scanning: the scheduler promoting due tasks (all queues, label
//!   `namespace="*"`); zombie collection: the zombie step of maintenance (`namespace="*"`);
//! - request preparing: loading the process and history and building the request;
//! - task processing: the processor's HTTP call; task completion: the commit or failure
//!   transaction (`completion_type` = `complete` | `error`); process removing: a remove task;
//! - notification: publishing a finished step to waiting callers (`notification_type="done"`).

use docket_core::{Task, TaskState, Timestamp};
use docket_store::LeaseOutcome;
use metrics::{counter, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::collections::HashMap;
use std::sync::OnceLock;
use std::time::Instant;

/// progressor's histogram names.
pub const CALLS_SCANNING: &str = "progressor_calls_scanning_duration_ms";
/// See the module docs.
pub const TIMERS_SCANNING: &str = "progressor_timers_scanning_duration_ms";
/// See the module docs.
pub const ZOMBIE_COLLECTION: &str = "progressor_zombie_collection_duration_ms";
/// See the module docs.
pub const REQUEST_PREPARING: &str = "progressor_request_preparing_duration_ms";
/// See the module docs.
pub const TASK_PROCESSING: &str = "progressor_task_processing_duration_ms";
/// See the module docs.
pub const TASK_COMPLETION: &str = "progressor_task_completion_duration_ms";
/// See the module docs.
pub const PROCESS_REMOVING: &str = "progressor_process_removing_duration_ms";
/// See the module docs.
pub const NOTIFICATION: &str = "progressor_notification_duration_ms";

/// Workflow runs started (durable functions), by `workflow`.
pub const RUNS_STARTED: &str = "docket_workflow_runs_started_total";
/// Workflow runs that ended, by `workflow` and `state` (completed, failed, cancelled).
pub const RUNS_FINISHED: &str = "docket_workflow_runs_finished_total";
/// Steps recorded in workflow runs' journals.
pub const RUN_STEPS: &str = "docket_workflow_steps_total";

/// A run of `workflow` started.
pub fn record_run_started(workflow: &str) {
    counter!(RUNS_STARTED, "workflow" => workflow.to_string()).increment(1);
}

/// A run of `workflow` ended in `state`.
pub fn record_run_finished(workflow: &str, state: &str) {
    counter!(RUNS_FINISHED, "workflow" => workflow.to_string(), "state" => state.to_string())
        .increment(1);
}

/// `n` steps were recorded.
pub fn record_run_steps(n: usize) {
    if n > 0 {
        counter!(RUN_STEPS).increment(n as u64);
    }
}

/// Bucket bounds in ms (1 ms … 60 s).
const BUCKETS_MS: &[f64] = &[
    1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0, 30000.0,
    60000.0,
];

/// Bucket bounds in seconds for docket's `_seconds` histograms (1 ms … 5 min).
const BUCKETS_S: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// Bucket bounds for batch sizes.
const BUCKETS_BATCH: &[f64] = &[
    1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 5000.0, 10000.0,
];

/// Tasks enqueued (inserted, not matched by a unique key), by `queue` and `kind`.
pub const TASKS_ENQUEUED: &str = "docket_tasks_enqueued_total";
/// Debounced enqueues (issue 43), by queue and outcome (`created` / `replaced`).
pub const TASKS_DEBOUNCED: &str = "docket_tasks_debounced_total";
/// Claimed tasks with an affinity (issue 43, worker labels), by queue and `affinity`:
/// `required` (the claim had the labels the task requires), `preferred` (it had the preferred
/// ones), `fallback` (it had not, and the preference had run out).
pub const TASKS_CLAIMED_AFFINITY: &str = "docket_tasks_claimed_affinity_total";
/// Attempts that completed, by `queue` and `kind`.
pub const TASKS_COMPLETED: &str = "docket_tasks_completed_total";
/// Attempts that failed and will be retried, by `queue` and `kind`.
pub const TASKS_FAILED: &str = "docket_tasks_failed_total";
/// Tasks discarded (out of attempts, permanent failure, expired), by `queue` and `kind`.
pub const TASKS_DISCARDED: &str = "docket_tasks_discarded_total";
/// Running tasks whose lease expired and were rescued by this node, by `queue` and `kind`.
pub const TASKS_RESCUED: &str = "docket_tasks_rescued_total";
/// Maintenance steps that failed (store error or panic) and were skipped until the next pass,
/// by `step` (`heartbeat`, `schedule`, `promote`, `rescue`, `prune`, `next_due`) and `error`
/// (`store` or `panic`).
pub const MAINTENANCE_ERRORS: &str = "docket_maintenance_errors_total";
/// Turns of the ring of task slots (PostgreSQL) tried by this node, by `outcome` (`turned`,
/// `truncated`: turned and emptied a slot, `full`: waiting for a backlog in the slot to drain,
/// `blocked`: its lock was not granted in time).
pub const RING_TURNS: &str = "docket_ring_turns_total";
/// Tasks the ring's turns moved to the fixed slot 0 (still running or waiting after three turns).
pub const RING_MOVED: &str = "docket_ring_moved_total";
/// Unix time (s) of this node's last maintenance pass that finished.
pub const MAINTENANCE_LAST_PASS: &str = "docket_maintenance_last_pass_timestamp_seconds";
/// Connections closed at accept because `max_connections` were open.
pub const HTTP_CONNECTIONS_REFUSED: &str = "docket_http_connections_refused_total";
/// Heartbeats by queue and outcome (`ok`, `lease_lost`, `cancelled`, `timed_out`, `error`).
pub const TASK_HEARTBEATS: &str = "docket_task_heartbeats_total";
/// Tasks claimed, by `queue`.
pub const TASKS_CLAIMED: &str = "docket_tasks_claimed_total";
/// Run time of an attempt (start to complete/fail), by `queue` and `kind`.
pub const TASK_RUN: &str = "docket_task_run_seconds";
/// Pickup latency: from when a task was due (run_at) to its claim, by `queue`.
pub const TASK_PICKUP: &str = "docket_task_pickup_seconds";
/// Tasks per claim statement.
pub const CLAIM_BATCH: &str = "docket_claim_batch_size";
/// Outcomes per completion statement.
pub const COMPLETE_BATCH: &str = "docket_complete_batch_size";
/// Tasks per queue and state (read from the database at scrape time).
pub const QUEUE_TASKS: &str = "docket_queue_tasks";
/// Age of the oldest available task per queue (at scrape time).
pub const QUEUE_OLDEST: &str = "docket_queue_oldest_available_seconds";
/// Whether a queue is paused (1) or not (0).
pub const QUEUE_PAUSED: &str = "docket_queue_paused";
/// Database connections of this node's pool, by `state` (`in_use`, `idle`).
pub const DB_CONNECTIONS: &str = "docket_db_connections";
/// HTTP request durations, by `route` (the matched path pattern), `method` and `status`.
pub const HTTP_REQUEST: &str = "docket_http_request_duration_seconds";
/// Tasks enqueued by schedules, by `schedule`.
pub const SCHEDULE_RUNS: &str = "docket_schedule_runs_total";
/// Counter: batches settled (their callbacks enqueued).
pub const BATCHES_SETTLED: &str = "docket_batches_settled_total";
/// Counter: batch callback tasks enqueued, by `callback` (completed, succeeded, discarded,
/// cancelled).
pub const BATCH_CALLBACKS: &str = "docket_batch_callbacks_total";

/// Counter: tasks admitted by claims, by rate `limit`, cluster-wide (read from the database
/// at scrape time: every node reports the same totals).
pub const RATE_LIMIT_ADMITTED: &str = "docket_rate_limit_admitted_total";
/// Counter: claims that met a key of rate `limit` at the limit (each held the key's other
/// tasks back), cluster-wide (read at scrape time).
pub const RATE_LIMIT_DELAYED: &str = "docket_rate_limit_delayed_total";
/// Keys of a rate `limit` (the name and each partition seen in the last day).
pub const RATE_LIMIT_KEYS: &str = "docket_rate_limit_keys";
/// Keys of a rate `limit` at the limit now (their tasks wait for the next window or token).
pub const RATE_LIMIT_BLOCKED: &str = "docket_rate_limit_blocked_keys";

/// Sets the rate limit metrics from a fresh read of the database.
pub fn record_rate_limits(all: &[docket_core::rate_limit::RateLimit]) {
    for l in all {
        let n = |v: i64| v.max(0).unsigned_abs();
        counter!(RATE_LIMIT_ADMITTED, "limit" => l.name.clone()).absolute(n(l.admitted));
        counter!(RATE_LIMIT_DELAYED, "limit" => l.name.clone()).absolute(n(l.delayed));
        gauge!(RATE_LIMIT_KEYS, "limit" => l.name.clone()).set(l.keys as f64);
        gauge!(RATE_LIMIT_BLOCKED, "limit" => l.name.clone()).set(l.blocked as f64);
    }
}

/// Counts enqueued tasks (one counter update per queue and kind of the batch).
pub fn record_enqueued(tasks: &[Task]) {
    let mut by: HashMap<(&str, &str), u64> = HashMap::new();
    for t in tasks.iter().filter(|t| t.inserted != Some(false)) {
        *by.entry((&t.queue, &t.kind)).or_default() += 1;
    }
    for ((queue, kind), n) in by {
        counter!(TASKS_ENQUEUED, "queue" => queue.to_string(), "kind" => kind.to_string())
            .increment(n);
    }
}

/// Records a debounced enqueue's outcome (a created task is counted as enqueued too).
pub fn record_debounced(t: &Task) {
    let outcome = if t.replaced == Some(true) {
        "replaced"
    } else {
        "created"
    };
    counter!(TASKS_DEBOUNCED, "queue" => t.queue.clone(), "outcome" => outcome).increment(1);
}

/// Records a claim: batch size, pickup latency per task (one histogram handle per batch).
pub fn record_claimed(
    queue: &str,
    tasks: &[Task],
    labels: &docket_core::labels::Labels,
    now: Timestamp,
) {
    if tasks.is_empty() {
        return;
    }
    histogram!(CLAIM_BATCH).record(tasks.len() as f64);
    counter!(TASKS_CLAIMED, "queue" => queue.to_string()).increment(tasks.len() as u64);
    let pickup = histogram!(TASK_PICKUP, "queue" => queue.to_string());
    for t in tasks {
        let affinity = match (&t.requires, &t.prefer) {
            (_, Some(p)) if docket_core::labels::has(labels, &p.labels) => Some("preferred"),
            (_, Some(_)) => Some("fallback"),
            (Some(_), None) => Some("required"),
            (None, None) => None,
        };
        if let Some(a) = affinity {
            counter!(TASKS_CLAIMED_AFFINITY, "queue" => queue.to_string(), "affinity" => a)
                .increment(1);
        }
        let late = (now - t.run_at).num_microseconds().unwrap_or(0).max(0) as f64 / 1e6;
        pickup.record(late);
    }
}

/// Records completion/failure outcomes: counters by state and the run time of each attempt,
/// with one metric handle per (state, queue, kind) of the batch rather than one per task.
pub fn record_outcomes(outcomes: &[LeaseOutcome], now: Timestamp) {
    if outcomes.is_empty() {
        return;
    }
    histogram!(COMPLETE_BATCH).record(outcomes.len() as f64);
    let mut by: HashMap<(&'static str, &str, &str), Vec<f64>> = HashMap::new();
    for o in outcomes {
        let LeaseOutcome::Ok { state, labels, .. } = o else {
            continue;
        };
        let name = match state {
            TaskState::Completed => TASKS_COMPLETED,
            TaskState::Retryable => TASKS_FAILED,
            TaskState::Discarded => TASKS_DISCARDED,
            _ => continue,
        };
        let runs = by.entry((name, &labels.queue, &labels.kind)).or_default();
        if let Some(start) = labels.attempted_at {
            runs.push((now - start).num_microseconds().unwrap_or(0).max(0) as f64 / 1e6);
        } else {
            runs.push(f64::NAN);
        }
    }
    for ((name, queue, kind), runs) in by {
        counter!(name, "queue" => queue.to_string(), "kind" => kind.to_string())
            .increment(runs.len() as u64);
        let h = histogram!(TASK_RUN, "queue" => queue.to_string(), "kind" => kind.to_string());
        for secs in runs.into_iter().filter(|s| !s.is_nan()) {
            h.record(secs);
        }
    }
}

/// Sets the queue gauges from a fresh read of the database.
pub fn record_queues(queues: &[docket_core::QueueStats], oldest: &[(String, f64)]) {
    for q in queues {
        for (state, n) in &q.counts {
            gauge!(QUEUE_TASKS, "queue" => q.name.clone(), "state" => state.as_str().to_string())
                .set(*n as f64);
        }
        gauge!(QUEUE_PAUSED, "queue" => q.name.clone()).set(if q.settings.paused {
            1.0
        } else {
            0.0
        });
        let age = oldest
            .iter()
            .find(|(n, _)| *n == q.name)
            .map_or(0.0, |(_, a)| *a);
        gauge!(QUEUE_OLDEST, "queue" => q.name.clone()).set(age);
    }
}

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the process-wide recorder once and returns the handle that renders `/metrics`.
pub fn prometheus() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets(BUCKETS_MS)
                .expect("bucket bounds are valid")
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), BUCKETS_S)
                .expect("bucket bounds are valid")
                .set_buckets_for_metric(Matcher::Suffix("_batch_size".into()), BUCKETS_BATCH)
                .expect("bucket bounds are valid")
                .build_recorder();
            let handle = recorder.handle();
            // Another recorder (an embedding program's) may be installed already: then ours
            // only renders what it sees, and the program's own exporter has the metrics.
            let _ = metrics::set_global_recorder(recorder);
            describe();
            handle
        })
        .clone()
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!(TASKS_ENQUEUED, "Tasks enqueued, by queue and kind");
    describe_counter!(
        TASKS_DEBOUNCED,
        "Debounced enqueues, by queue and outcome (created, replaced)"
    );
    describe_counter!(TASKS_COMPLETED, "Attempts completed, by queue and kind");
    describe_counter!(
        TASKS_FAILED,
        "Attempts failed and retried later, by queue and kind"
    );
    describe_counter!(
        TASKS_DISCARDED,
        "Tasks discarded after failing, by queue and kind"
    );
    describe_counter!(
        TASKS_RESCUED,
        "Running tasks whose lease expired, rescued by this node, by queue and kind"
    );
    describe_counter!(TASKS_CLAIMED, "Tasks claimed, by queue");
    describe_counter!(
        TASKS_CLAIMED_AFFINITY,
        "Claimed tasks with an affinity (worker labels), by queue and affinity (required, \
         preferred, fallback)"
    );
    describe_counter!(
        RING_TURNS,
        "Runs of the rotate job by this node, by outcome (PostgreSQL's ring of task slots: turned, \
         truncated, full, blocked; MySQL: archived)"
    );
    describe_counter!(
        RING_MOVED,
        "Tasks moved by the rotate job: to slot 0 (PostgreSQL) or to docket_tasks_done (MySQL)"
    );
    describe_counter!(
        TASK_HEARTBEATS,
        "Heartbeats (in-process and HTTP), by queue and outcome"
    );
    describe_histogram!(
        TASK_RUN,
        Unit::Seconds,
        "Attempt run time, by queue and kind"
    );
    describe_histogram!(TASK_PICKUP, Unit::Seconds, "From run_at to claim, by queue");
    describe_histogram!(CLAIM_BATCH, "Tasks per claim statement");
    describe_histogram!(COMPLETE_BATCH, "Outcomes per completion statement");
    describe_gauge!(QUEUE_TASKS, "Tasks by queue and state");
    describe_gauge!(
        QUEUE_OLDEST,
        Unit::Seconds,
        "Age of the oldest available task, by queue"
    );
    describe_gauge!(QUEUE_PAUSED, "1 when the queue is paused");
    describe_gauge!(
        DB_CONNECTIONS,
        "Database pool connections by state (in_use, idle)"
    );
    describe_histogram!(
        HTTP_REQUEST,
        Unit::Seconds,
        "HTTP request durations by route, method and status"
    );
    describe_counter!(SCHEDULE_RUNS, "Tasks enqueued by schedules, by schedule");
    describe_counter!(
        BATCHES_SETTLED,
        "Batches settled (their callbacks enqueued)"
    );
    describe_counter!(
        BATCH_CALLBACKS,
        "Batch callback tasks enqueued, by callback"
    );
    describe_counter!(
        RATE_LIMIT_ADMITTED,
        "Tasks admitted by claims, by rate limit (cluster-wide)"
    );
    describe_counter!(
        RATE_LIMIT_DELAYED,
        "Claims that met a key of the rate limit at its limit (cluster-wide)"
    );
    describe_gauge!(
        RATE_LIMIT_KEYS,
        "Keys of a rate limit (name and partitions)"
    );
    describe_gauge!(RATE_LIMIT_BLOCKED, "Keys of a rate limit at the limit now");
    describe_histogram!(
        CALLS_SCANNING,
        "Calls (call, repair) scanning durations in millisecond"
    );
    describe_histogram!(
        TIMERS_SCANNING,
        "Timers (timeout, remove) scanning durations in millisecond"
    );
    describe_histogram!(
        ZOMBIE_COLLECTION,
        "Zombie tasks collecting durations in millisecond"
    );
    describe_histogram!(
        REQUEST_PREPARING,
        "Preparing request (init, call, repair) durations in millisecond"
    );
    describe_histogram!(TASK_PROCESSING, "Task processing durations in millisecond");
    describe_histogram!(TASK_COMPLETION, "Task completion durations in millisecond");
    describe_histogram!(PROCESS_REMOVING, "Task completion durations in millisecond");
    describe_histogram!(NOTIFICATION, "Notification durations in millisecond");
}

/// Milliseconds since `t`.
pub fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}
