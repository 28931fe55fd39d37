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

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
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

/// Bucket bounds in ms (1 ms … 60 s).
const BUCKETS_MS: &[f64] = &[
    1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0, 30000.0,
    60000.0,
];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the process-wide recorder once and returns the handle that renders `/metrics`.
pub fn prometheus() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets(BUCKETS_MS)
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
    use metrics::describe_histogram;
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
