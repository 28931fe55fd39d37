//! docket's event sinks: a namespace's process events and lifecycle changes published to a
//! message broker — progressor's notifier (`prg_notifier`, seed 001): Kafka ([`kafka::Kafka`],
//! progressor's own broker, its topics, keys and partitions), NATS JetStream ([`nats::Nats`])
//! and RabbitMQ ([`rabbitmq::Rabbit`]).
//!
//! The engine owns delivery (outbox cursor, order per process, retries, metrics: see
//! `docket_engine::process::Sink`); a sink here only publishes a wave of messages and says
//! which the broker confirmed. [`SinkConfig`] is the `[[sinks]]` table of `docket serve`'s
//! config file; [`SinkConfig::build`] makes the engine's [`SinkSpec`] of it without
//! connecting (a broker that is down at start is retried like one that goes down later).

pub mod kafka;
pub mod mg_proto;
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
///
/// Kafka (`type = "kafka"`, `url = "kafka://host:9092,host2:9092"`) takes progressor's
/// per-namespace topic names:
///
/// ```toml
/// [sinks.topics.orders]
/// topic = "orders_events"
/// lifecycle_topic = "orders_lifecycle"
/// ```
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SinkConfig {
    /// The sink's name: 1–64 characters of `A-Z a-z 0-9 _ . -`, unique among the sinks.
    pub name: String,
    /// `kafka`, `nats` (JetStream) or `rabbitmq`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The broker: `kafka://host:port` (several: `kafka://h1:9092,h2:9092`), `nats://host:port`
    /// (also `tls://`), or `amqp://user:pass@host:port/vhost` (also `amqps://`).
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
    /// Kafka: topics are `<prefix>.events.<namespace>`, `<prefix>.lifecycle.<namespace>` and
    /// `<prefix>.tasks.<queue>` (default `docket`), unless `topics` names a namespace's.
    #[serde(default)]
    pub topic_prefix: Option<String>,
    /// Kafka: a namespace's two topics by name, as progressor's `notifier` options give them
    /// (`topic`, `lifecycle_topic`).
    #[serde(default)]
    pub topics: std::collections::HashMap<String, kafka::NamespaceTopics>,
    /// Kafka: `phash2` (default; progressor's `erlang:phash2(Key) rem PartitionsCount`) or
    /// `murmur2` (Kafka's default partitioner, as the Java client's).
    #[serde(default)]
    pub partitioner: Option<String>,
    /// Kafka: an idempotent producer (default true; librdkafka's `enable.idempotence`). Turn it
    /// off only for a broker that does not support it.
    #[serde(default)]
    pub idempotence: Option<bool>,
    /// Kafka: `json` (default; the body every sink sends) or `mg_proto` (progressor's Thrift
    /// `SinkEvent` / `LifecycleEvent`, [`mg_proto`]; task events stay JSON).
    #[serde(default)]
    pub format: Option<String>,
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
        if self.kind != "kafka"
            && (self.topic_prefix.is_some()
                || !self.topics.is_empty()
                || self.partitioner.is_some()
                || self.idempotence.is_some()
                || self.format.is_some())
        {
            return Err(format!(
                "sink {n}: topic_prefix, topics, partitioner, idempotence and format are for kafka sinks"
            ));
        }
        let sink: Arc<dyn Sink> = match self.kind.as_str() {
            "kafka" => self.kafka()?,
            "nats" => {
                if !["nats", "tls"].contains(&scheme) || !self.url.contains("://") {
                    return Err(format!(
                        "sink {n}: url must be nats://host:port or tls://host:port"
                    ));
                }
                if self.exchange.is_some() {
                    return Err(format!("sink {n}: exchange is for rabbitmq sinks"));
                }
                let prefix = self
                    .subject_prefix
                    .clone()
                    .unwrap_or_else(|| "docket".into());
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
                    "sink {n}: type {other:?} is not one of kafka, nats, rabbitmq"
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

impl SinkConfig {
    fn kafka(&self) -> Result<Arc<dyn Sink>, String> {
        let n = &self.name;
        let brokers = self
            .url
            .strip_prefix("kafka://")
            .ok_or_else(|| format!("sink {n}: url must be kafka://host:port[,host:port…]"))?;
        for b in brokers.split(',') {
            let ok = b.rsplit_once(':').is_some_and(|(h, p)| {
                !h.is_empty() && !h.contains('/') && p.parse::<u16>().is_ok_and(|p| p > 0)
            });
            if !ok {
                return Err(format!(
                    "sink {n}: broker {b:?} in url is not host:port (kafka://host:port[,host:port…])"
                ));
            }
        }
        if self.subject_prefix.is_some() || self.stream.is_some() || self.exchange.is_some() {
            return Err(format!(
                "sink {n}: subject_prefix, stream and exchange are for nats and rabbitmq sinks"
            ));
        }
        let prefix = self.topic_prefix.clone().unwrap_or_else(|| "docket".into());
        kafka_topic_name(n, "topic_prefix", &prefix)?;
        for ns in &self.namespaces {
            if ns != "*" && !self.topics.contains_key(ns) {
                kafka_topic_name(n, "topic", &format!("{prefix}.lifecycle.{ns}"))?;
            }
        }
        for q in &self.queues {
            kafka_topic_name(n, "queue's topic", &format!("{prefix}.tasks.{q}"))?;
        }
        for (ns, t) in &self.topics {
            docket_core::process::check_namespace(ns).map_err(|e| format!("sink {n}: {e}"))?;
            if !self.namespaces.iter().any(|x| x == "*" || x == ns) {
                return Err(format!(
                    "sink {n}: topics names namespace {ns:?}, which is not in namespaces"
                ));
            }
            kafka_topic_name(n, "topic", &t.topic)?;
            kafka_topic_name(n, "lifecycle_topic", &t.lifecycle_topic)?;
            if let Some(alias) = &t.namespace {
                if alias.is_empty() || alias.len() > 255 || alias.chars().any(char::is_control) {
                    return Err(format!(
                        "sink {n}: topics.{ns}.namespace must be 1 to 255 bytes without control characters"
                    ));
                }
            }
        }
        let partitioner = match self.partitioner.as_deref().unwrap_or("phash2") {
            "phash2" => kafka::Partitioner::Phash2,
            "murmur2" => kafka::Partitioner::Murmur2,
            other => {
                return Err(format!(
                    "sink {n}: partitioner {other:?} is not one of phash2, murmur2"
                ))
            }
        };
        let mg_proto = match self.format.as_deref().unwrap_or("json") {
            "json" => false,
            "mg_proto" => true,
            other => {
                return Err(format!(
                    "sink {n}: format {other:?} is not one of json, mg_proto"
                ))
            }
        };
        Ok(Arc::new(kafka::Kafka::new(
            brokers,
            &prefix,
            self.topics.clone(),
            partitioner,
            self.idempotence.unwrap_or(true),
            mg_proto,
        )))
    }
}

/// Kafka's rule for a topic name: 1–249 characters of `A-Z a-z 0-9 . _ -`, not `.` or `..`.
fn kafka_topic_name(sink: &str, what: &str, t: &str) -> Result<(), String> {
    if t.is_empty()
        || t.len() > 249
        || t == "."
        || t == ".."
        || !t
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        return Err(format!(
            "sink {sink}: {what} {t:?} is not a Kafka topic name (1 to 249 characters of A-Z a-z 0-9 . _ -)"
        ));
    }
    Ok(())
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
            ..Default::default()
        }
    }

    #[test]
    fn bad_entries_are_refused_with_their_reason() {
        assert!(cfg("nats", "nats://127.0.0.1:4222").build().is_ok());
        assert!(cfg("rabbitmq", "amqp://127.0.0.1:5672/%2f").build().is_ok());
        let err = |c: SinkConfig| c.build().unwrap_err();
        assert!(err(cfg("kinesis", "x://y")).contains("is not one of kafka, nats, rabbitmq"));
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
        let mut c = cfg("nats", "nats://h:1");
        c.partitioner = Some("phash2".into());
        assert!(err(c).contains("are for kafka sinks"));
        let twice = build_all(&[cfg("nats", "nats://h:1"), cfg("nats", "nats://h:1")]);
        assert_eq!(twice.unwrap_err(), vec!["sink s: the name is given twice"]);
    }

    #[test]
    fn kafka_entries_are_checked() {
        assert!(cfg("kafka", "kafka://127.0.0.1:9092").build().is_ok());
        assert!(cfg("kafka", "kafka://a:9092,b.example:19092")
            .build()
            .is_ok());
        let err = |c: SinkConfig| c.build().unwrap_err();
        assert!(err(cfg("kafka", "nats://h:1")).contains("url must be kafka://"));
        for url in [
            "kafka://",
            "kafka://h",
            "kafka://h:0",
            "kafka://h:x",
            "kafka://:9",
            "kafka://h:1,",
        ] {
            assert!(err(cfg("kafka", url)).contains("is not host:port"), "{url}");
        }
        let mut c = cfg("kafka", "kafka://h:1");
        c.exchange = Some("x".into());
        assert!(err(c).contains("are for nats and rabbitmq sinks"));
        let mut c = cfg("kafka", "kafka://h:1");
        c.partitioner = Some("random".into());
        assert!(err(c).contains("is not one of phash2, murmur2"));
        let mut c = cfg("kafka", "kafka://h:1");
        c.format = Some("avro".into());
        assert!(err(c).contains("is not one of json, mg_proto"));
        let mut c = cfg("kafka", "kafka://h:1");
        c.topic_prefix = Some("a/b".into());
        assert!(err(c).contains("is not a Kafka topic name"));
        let mut c = cfg("kafka", "kafka://h:1");
        c.topic_prefix = Some("p".repeat(200));
        c.namespaces = vec!["n".repeat(64)];
        assert!(
            err(c).contains("is not a Kafka topic name"),
            "longer than 249"
        );
        let mut c = cfg("kafka", "kafka://h:1");
        c.queues = vec!["emails:eu".into()];
        assert!(err(c).contains("queue's topic"));
        let topics = |t: &str, l: &str| kafka::NamespaceTopics {
            topic: t.into(),
            lifecycle_topic: l.into(),
            namespace: None,
        };
        let mut c = cfg("kafka", "kafka://h:1");
        c.topics.insert(
            "orders".into(),
            topics("default_topic", "default_lifecycle_topic"),
        );
        assert!(c.build().is_ok());
        c.topics.insert("orders".into(), topics("", "x"));
        assert!(err(c.clone()).contains("topic \"\""));
        c.topics
            .insert("orders".into(), topics("x", &"y".repeat(250)));
        assert!(err(c.clone()).contains("lifecycle_topic"));
        c.topics.insert(
            "orders".into(),
            kafka::NamespaceTopics {
                namespace: Some("default/\u{0}".into()),
                ..topics("a", "b")
            },
        );
        assert!(err(c.clone()).contains("without control characters"));
        c.topics.clear();
        c.topics.insert("other".into(), topics("a", "b"));
        assert!(err(c).contains("which is not in namespaces"));
        // The TOML shape the docs give.
        let c: SinkConfig = toml::from_str(
            "name = \"k\"\ntype = \"kafka\"\nurl = \"kafka://127.0.0.1:9092\"\n\
             namespaces = [\"orders\"]\npartitioner = \"murmur2\"\n\
             [topics.orders]\ntopic = \"t\"\nlifecycle_topic = \"l\"\n",
        )
        .unwrap();
        assert_eq!(c.topics["orders"], topics("t", "l"));
        assert!(c.build().is_ok());
    }
}
