//! A consumer of docket's Kafka sink with librdkafka (the `rdkafka` crate): a consumer group on
//! the sink's topics, committing offsets once a batch is handled and dropping repeats by the
//! `docket-message-id` header. Run it with `cargo run -p docket-sinks --example consume_kafka
//! -- 127.0.0.1:9092 docket.events.orders docket.lifecycle.orders`; the sink tests
//! (crates/docket-sinks/tests/sinks.rs) read Kafka through [`Reader::next_batch`].

// ANCHOR: consumer
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::{Headers, Message};
use std::time::{Duration, Instant};

/// One message: where it was, its id, key and JSON body.
pub struct Received {
    /// The topic and partition it was read from.
    pub topic: String,
    /// Its partition.
    pub partition: i32,
    /// `"<namespace>/<process id>/<seq>"` (header `docket-message-id`): the same for every copy.
    pub id: String,
    /// The Kafka key: `"<namespace> <process id>"`.
    pub key: String,
    /// The message (see docs/src/operations/sinks.md).
    pub body: serde_json::Value,
}

/// A member of consumer group `group` reading `topics` from their start.
pub struct Reader {
    consumer: BaseConsumer,
}

impl Reader {
    /// Joins `group` on the brokers `brokers` (`host:port,…`) for `topics`.
    ///
    /// # Errors
    /// librdkafka's, as text.
    pub fn new(brokers: &str, group: &str, topics: &[&str]) -> Result<Reader, String> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", brokers)
            .set("group.id", group)
            .set("auto.offset.reset", "earliest")
            .set("enable.auto.commit", "false")
            .set("session.timeout.ms", "10000")
            .create()
            .map_err(|e| e.to_string())?;
        consumer.subscribe(topics).map_err(|e| e.to_string())?;
        Ok(Reader { consumer })
    }

    /// Up to `max` messages, or fewer once none came for `idle`; their offsets are committed.
    /// A blocking call (librdkafka's poll): run it off an async runtime's workers.
    ///
    /// # Errors
    /// librdkafka's, and a body that is not JSON, as text.
    pub fn next_batch(&self, max: usize, idle: Duration) -> Result<Vec<Received>, String> {
        let mut out = vec![];
        let mut last = Instant::now();
        while out.len() < max && last.elapsed() < idle {
            let Some(m) = self.consumer.poll(Duration::from_millis(50)) else {
                continue;
            };
            let m = m.map_err(|e| e.to_string())?;
            last = Instant::now();
            let id = m
                .headers()
                .and_then(|h| h.iter().find(|h| h.key == "docket-message-id"))
                .and_then(|h| h.value)
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .unwrap_or_default();
            let key = String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned();
            let body = serde_json::from_slice(m.payload().unwrap_or_default())
                .map_err(|e| e.to_string())?;
            out.push(Received {
                topic: m.topic().to_string(),
                partition: m.partition(),
                id,
                key,
                body,
            });
        }
        if !out.is_empty() {
            self.consumer
                .commit_consumer_state(CommitMode::Sync)
                .map_err(|e| e.to_string())?;
        }
        Ok(out)
    }
}

#[allow(dead_code)]
fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let brokers = args.next().unwrap_or_else(|| "127.0.0.1:9092".into());
    let topics: Vec<String> = args.collect();
    let topics: Vec<&str> = topics.iter().map(String::as_str).collect();
    let reader = Reader::new(&brokers, "example", &topics)?;
    // A real consumer keeps the ids of a window: a message is repeated only when docket did not
    // see the broker's acknowledgement, soon after the first copy.
    let mut seen = std::collections::HashSet::new();
    loop {
        for m in reader.next_batch(100, Duration::from_millis(500))? {
            if seen.insert(m.id.clone()) {
                println!("{} {} {}", m.id, m.body["kind"], m.body["payload"]);
            }
        }
    }
}
// ANCHOR_END: consumer
