//! Tying a task's spans to its trace id. The crates that run tasks (the in-process pool, the
//! process runners, `docket worker`) call [`link_span`] on each task span; an exporter that
//! understands trace ids (the binary's OpenTelemetry layer) installs the linker, so a task's
//! spans join the trace of the request that enqueued it. Without a linker nothing happens.

use std::sync::OnceLock;

/// Makes `span` part of the trace `trace_id` (32 hex digits).
pub type SpanLinker = fn(&tracing::Span, &str);

static LINKER: OnceLock<SpanLinker> = OnceLock::new();

/// Installs the process-wide linker (the first call wins).
pub fn set_span_linker(f: SpanLinker) {
    let _ = LINKER.set(f);
}

/// Links `span` to `trace_id` when a linker is installed and the task has a trace id.
pub fn link_span(span: &tracing::Span, trace_id: Option<&str>) {
    if let (Some(f), Some(t)) = (LINKER.get(), trace_id) {
        f(span, t);
    }
}

/// The span of one attempt of `task` — every log line of it carries the task's id, queue,
/// kind, attempt and trace id — linked to the task's trace ([`link_span`]). The in-process pool
/// and `docket worker` run each attempt in one.
pub fn task_span(task: &crate::Task) -> tracing::Span {
    let span = tracing::info_span!(
        "task",
        task_id = task.id,
        queue = %task.queue,
        kind = %task.kind,
        attempt = task.attempt,
        trace_id = task.trace_id.as_deref().unwrap_or("")
    );
    link_span(&span, task.trace_id.as_deref());
    span
}
