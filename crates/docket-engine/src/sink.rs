//! Event sinks' types: the [`Sink`] a broker implements, a sink's configuration and what a
//! node knows of its delivery. The delivery loop is `process::sinks` (the engine decides; a
//! sink publishes).

use docket_core::sink::Message;
use std::sync::Arc;

/// A broker the engine publishes notifications to.
#[async_trait::async_trait]
pub trait Sink: Send + Sync + 'static {
    /// `nats`, `rabbitmq`, …: the metrics' `notification_type` and the dashboard's label.
    fn kind(&self) -> &'static str;

    /// Publishes `msgs` — at most one per key, so all may be in flight at once — and returns
    /// one outcome per message, in order: `Ok` once the broker confirmed it (stored: a JetStream
    /// ack, an AMQP publisher confirm), `Err` with the reason otherwise. Must not panic and
    /// must return within a bounded time (a broker that does not answer is an `Err`).
    async fn publish(&self, msgs: &[Message]) -> Vec<Result<(), String>>;
}

/// A sink and the namespaces it receives.
#[derive(Clone)]
pub struct SinkSpec {
    /// The sink's name (`[A-Za-z0-9_.-]`, 1–64; its cursors are `sink:NAME:NS`).
    pub name: String,
    /// Namespaces whose notifications it receives; `*` is every namespace.
    pub namespaces: Vec<String>,
    /// Queues whose task events it receives (a queue in at most one sink).
    pub queues: Vec<String>,
    /// The broker.
    pub sink: Arc<dyn Sink>,
}

impl SinkSpec {
    /// Whether it receives namespace `ns`'s notifications.
    #[must_use]
    pub fn covers(&self, ns: &str) -> bool {
        self.namespaces.iter().any(|n| n == "*" || n == ns)
    }
}

impl std::fmt::Debug for SinkSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SinkSpec")
            .field("name", &self.name)
            .field("kind", &self.sink.kind())
            .field("namespaces", &self.namespaces)
            .field("queues", &self.queues)
            .finish()
    }
}

/// Checks a sink's name: 1–64 characters of `A-Z a-z 0-9 _ . -` (no `:`, which separates the
/// parts of its cursors' names).
///
/// # Errors
/// The message says what is wrong.
pub fn check_sink_name(name: &str) -> Result<(), String> {
    docket_core::process::check_plain_name("sink name", name)
}

/// What this node knows of one (sink, namespace) pair (the dashboard's sinks table).
#[derive(Debug, Clone, serde::Serialize)]
pub struct SinkStatus {
    /// The sink's name.
    pub sink: String,
    /// `nats`, `rabbitmq`.
    pub kind: String,
    /// The namespace (empty for a queue's task events).
    pub namespace: String,
    /// The queue, for task events.
    pub queue: Option<String>,
    /// Whether this node holds the cursor (only the holder publishes and measures).
    pub holder: bool,
    /// The cursor: every notification up to this seq was confirmed by the broker.
    pub delivered_seq: i64,
    /// Notifications after the cursor (counted up to 100,000).
    pub backlog: i64,
    /// Age (s) of the oldest undelivered notification.
    pub oldest_age_s: Option<f64>,
    /// Messages this node published to it since it started.
    pub published: u64,
    /// Failed publishing passes since this node started.
    pub failures: u64,
    /// The last failure, and when (RFC 3339).
    pub last_error: Option<(String, docket_core::Timestamp)>,
}

/// Metric names of sinks (documented in docs/src/operations/metrics.md).
pub mod metric {
    /// Messages the broker confirmed, by `sink` and `namespace`.
    pub const PUBLISHED: &str = "docket_sink_published_total";
    /// Publishing passes that failed (the batch waits and is retried), by `sink`, `namespace`.
    pub const FAILURES: &str = "docket_sink_failures_total";
    /// Notifications not yet delivered, by `sink` and `namespace` (set by the cursor's holder).
    pub const BACKLOG: &str = "docket_sink_backlog";
    /// Age of the oldest undelivered notification (s), by `sink` and `namespace`.
    pub const OLDEST: &str = "docket_sink_oldest_seconds";
    /// From the commit that wrote a notification to the broker's confirmation (s), by `sink`.
    pub const LAG: &str = "docket_sink_lag_seconds";
}
