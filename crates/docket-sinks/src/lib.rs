//! docket's event sinks: a namespace's process events and lifecycle changes published to a
//! message broker — progressor's notifier (`prg_notifier`, seed 001), which writes to Kafka,
//! on the brokers this project can test against: NATS JetStream ([`nats::Nats`]) and RabbitMQ
//! ([`rabbitmq::Rabbit`]).
//!
//! The engine owns delivery (outbox cursor, order per process, retries, metrics: see
//! `docket_engine::process::Sink`); a sink here only publishes a wave of messages and says
//! which the broker confirmed. [`SinkConfig`] is the `[[sinks]]` table of `docket serve`'s
//! config file; [`SinkConfig::build`] makes the engine's [`SinkSpec`] of it without
//! connecting (a broker that is down at start is retried like one that goes down later).

pub mod nats;
pub mod rabbitmq;
#[cfg(feature = "testing")]
pub mod testing;

use docket_engine::process::{check_sink_name, Sink, SinkSpec};
use std::sync::Arc;
use std::time::Duration;

/// How long a publish waits for the broker's confirmation before counting as failed.
pub const CONFIRM_TIMEOUT: Duration = Duration::from_secs(10);
/// How long connecting to a broker may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// One `[[sinks]]` entry of the config file.
///
/// ```toml
/// [[sinks]]
/// name = "events"                 # its cursors are sink:events:<namespace>
/// type = "nats"                   # or "rabbitmq"
/// url = "nats://127.0.0.1:4222"   # amqp://guest:guest@127.0.0.1:5672/%2f for RabbitMQ
/// namespaces = ["orders"]         # or ["*"]: every namespace
/// queues = ["emails"]             # task events of these queues
/// ```
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SinkConfig {
    /// The sink's name: 1–64 characters of `A-Z a-z 0-9 _ . -`, unique among the sinks.
    pub name: String,
    /// `nats` (JetStream) or `rabbitmq`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The broker: `nats://host:port` (also `tls://`), or `amqp://user:pass@host:port/vhost`
    /// (also `amqps://`).
    pub url: String,
    /// Namespaces whose notifications go to this sink; `*` is every namespace.
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Queues whose task events (enqueued, started, completed, …) go to this sink: subjects
    /// `<prefix>.tasks.<queue>`, routing keys `tasks.<queue>` (the queue as one token). A queue
    /// goes to one sink at most.
    #[serde(default)]
    pub queues: Vec<String>,
    /// NATS: subjects are `<prefix>.events.<namespace>` and `<prefix>.lifecycle.<namespace>`
    /// (default `docket`).
    #[serde(default)]
    pub subject_prefix: Option<String>,
    /// NATS: a stream of this name capturing `<prefix>.>` is created when missing (default: none
    /// is created, and one must exist — a publish no stream takes is an error, and waits).
    #[serde(default)]
    pub stream: Option<String>,
    /// RabbitMQ: the topic exchange (declared durable when missing; default `docket`); routing
    /// keys are `events.<namespace>` and `lifecycle.<namespace>`.
    #[serde(default)]
    pub exchange: Option<String>,
}

impl SinkConfig {
    /// Checks the entry and makes the engine's sink of it (nothing connects yet).
    ///
    /// # Errors
    /// A message naming the sink and what is wrong: its name, type, URL scheme, an empty or
    /// malformed namespace list, a NATS subject prefix or RabbitMQ exchange that is not a
    /// plain name.
    pub fn build(&self) -> Result<SinkSpec, String> {
        let n = &self.name;
        check_sink_name(n)?;
        if self.namespaces.is_empty() && self.queues.is_empty() {
            return Err(format!(
                "sink {n}: namespaces and queues are empty (name namespaces, or \"*\", or queues)"
            ));
        }
        for q in &self.queues {
            docket_core::task::check_name("queue", q).map_err(|e| format!("sink {n}: {e}"))?;
            if q.starts_with("process:") {
                return Err(format!(
                    "sink {n}: queue {q:?} is a namespace's: name the namespace instead"
                ));
            }
        }
        for ns in &self.namespaces {
            if ns != "*" {
                docket_core::process::check_namespace(ns).map_err(|e| format!("sink {n}: {e}"))?;
            }
        }
        let token = |what: &str, v: &str| {
            if v.is_empty()
                || v.len() > 128
                || !v
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
                || v.starts_with('.')
                || v.ends_with('.')
            {
                Err(format!(
                    "sink {n}: {what} {v:?} must be 1 to 128 characters of A-Z a-z 0-9 _ - ."
                ))
            } else {
                Ok(())
            }
        };
        let scheme = self.url.split("://").next().unwrap_or("");
        let sink: Arc<dyn Sink> = match self.kind.as_str() {
            "nats" => {
                if !["nats", "tls"].contains(&scheme) || !self.url.contains("://") {
                    return Err(format!("sink {n}: url must be nats://host:port or tls://host:port"));
                }
                if self.exchange.is_some() {
                    return Err(format!("sink {n}: exchange is for rabbitmq sinks"));
                }
                let prefix = self.subject_prefix.clone().unwrap_or_else(|| "docket".into());
                token("subject_prefix", &prefix)?;
                if let Some(s) = &self.stream {
                    token("stream", s)?;
                    if s.contains('.') {
                        return Err(format!("sink {n}: stream {s:?} may not contain '.'"));
                    }
                }
                Arc::new(nats::Nats::new(&self.url, &prefix, self.stream.clone()))
            }
            "rabbitmq" => {
                if !["amqp", "amqps"].contains(&scheme) || !self.url.contains("://") {
                    return Err(format!("sink {n}: url must be amqp://… or amqps://…"));
                }
                if self.subject_prefix.is_some() || self.stream.is_some() {
                    return Err(format!(
                        "sink {n}: subject_prefix and stream are for nats sinks"
                    ));
                }
                let exchange = self.exchange.clone().unwrap_or_else(|| "docket".into());
                token("exchange", &exchange)?;
                Arc::new(rabbitmq::Rabbit::new(&self.url, &exchange))
            }
            other => {
                return Err(format!(
                    "sink {n}: type {other:?} is not one of nats, rabbitmq (Kafka: see docs/src/operations/sinks.md)"
                ))
            }
        };
        Ok(SinkSpec {
            name: n.clone(),
            namespaces: self.namespaces.clone(),
            queues: self.queues.clone(),
            sink,
        })
    }
}

/// Builds every entry, refusing two of one name.
///
/// # Errors
/// Every problem, one per line.
pub fn build_all(cfgs: &[SinkConfig]) -> Result<Vec<SinkSpec>, Vec<String>> {
    let mut out = vec![];
    let mut errs = vec![];
    let mut names = std::collections::HashSet::new();
    let mut queues = std::collections::HashMap::new();
    for c in cfgs {
        if !names.insert(c.name.as_str()) {
            errs.push(format!("sink {}: the name is given twice", c.name));
            continue;
        }
        for q in &c.queues {
            if let Some(other) = queues.insert(q.as_str(), c.name.as_str()) {
                errs.push(format!(
                    "sink {}: queue {q:?} already goes to sink {other} (a queue's task events go to one sink)",
                    c.name
                ));
            }
        }
        match c.build() {
            Ok(s) => out.push(s),
            Err(e) => errs.push(e),
        }
    }
    if errs.is_empty() {
        Ok(out)
    } else {
        Err(errs)
    }
}

/// The same outcome for every message (a broker that cannot be reached fails them all).
fn all_failed(n: usize, why: &str) -> Vec<Result<(), String>> {
    vec![Err(why.to_string()); n]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(kind: &str, url: &str) -> SinkConfig {
        SinkConfig {
            name: "s".into(),
            kind: kind.into(),
            url: url.into(),
            namespaces: vec!["orders".into()],
            queues: vec![],
            subject_prefix: None,
            stream: None,
            exchange: None,
        }
    }

    #[test]
    fn bad_entries_are_refused_with_their_reason() {
        assert!(cfg("nats", "nats://127.0.0.1:4222").build().is_ok());
        assert!(cfg("rabbitmq", "amqp://127.0.0.1:5672/%2f").build().is_ok());
        let err = |c: SinkConfig| c.build().unwrap_err();
        assert!(err(cfg("kafka", "x://y")).contains("is not one of nats, rabbitmq"));
        assert!(err(cfg("nats", "amqp://h")).contains("url must be nats://"));
        assert!(err(cfg("rabbitmq", "nats://h")).contains("url must be amqp://"));
        let mut c = cfg("nats", "nats://h:1");
        c.name = "a:b".into();
        assert!(err(c).contains("sink name"));
        let mut c = cfg("nats", "nats://h:1");
        c.namespaces = vec![];
        assert!(err(c).contains("namespaces and queues are empty"));
        let mut c = cfg("nats", "nats://h:1");
        c.queues = vec!["process:orders".into()];
        assert!(err(c).contains("is a namespace's"));
        let mut c = cfg("nats", "nats://h:1");
        c.queues = vec![String::new()];
        assert!(err(c).contains("queue must not be empty"));
        let (mut a, mut b) = (cfg("nats", "nats://h:1"), cfg("nats", "nats://h:1"));
        (a.queues, b.queues, b.name) = (vec!["q".into()], vec!["q".into()], "t".into());
        assert!(build_all(&[a, b]).unwrap_err()[0].contains("already goes to sink s"));
        let mut c = cfg("nats", "nats://h:1");
        c.subject_prefix = Some("a.>".into());
        assert!(err(c).contains("subject_prefix"));
        let mut c = cfg("nats", "nats://h:1");
        c.stream = Some("a.b".into());
        assert!(err(c).contains("may not contain"));
        let mut c = cfg("rabbitmq", "amqp://h");
        c.exchange = Some(String::new());
        assert!(err(c).contains("exchange"));
        let twice = build_all(&[cfg("nats", "nats://h:1"), cfg("nats", "nats://h:1")]);
        assert_eq!(twice.unwrap_err(), vec!["sink s: the name is given twice"]);
    }
}
