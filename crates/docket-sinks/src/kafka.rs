//! Kafka, as progressor's notifier (`prg_notifier`) writes it: one topic for a namespace's
//! events and one for its lifecycle, each message keyed `"<ns> <process id>"` and sent to the
//! partition `erlang:phash2(Key) rem PartitionsCount` ([`Partitioner::Phash2`], the default),
//! or to the one Kafka's Java client would choose (murmur2 of the key,
//! [`Partitioner::Murmur2`]). Messages carry a `docket-message-id` header (the stable id a
//! consumer drops repeats by) and `content-type`. A message counts as delivered when every
//! in-sync replica has it (`acks=all`); the producer is idempotent by default (librdkafka's
//! `enable.idempotence`), so its own retries never write a message twice or out of order.
//!
//! Per-key order holds without `max.in.flight = 1`: the engine never has two messages of one key
//! in flight (`docket_core::sink::waves`), and a key always maps to one partition while the
//! topic's partition count stays the same (as in progressor, adding partitions moves keys).

use crate::{all_failed, CONFIRM_TIMEOUT, CONNECT_TIMEOUT};
use docket_core::sink::{Message, Topic};
use docket_engine::process::Sink;
use rdkafka::config::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a topic's partition count is used before it is read again.
const PARTITIONS_TTL: Duration = Duration::from_secs(30);

/// How a message's partition is chosen from its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partitioner {
    /// progressor's: `erlang:phash2(Key) rem PartitionsCount` ([`phash2_binary`]).
    Phash2,
    /// Kafka's default (the Java client's `murmur2` of the key; librdkafka's `murmur2_random`).
    Murmur2,
}

/// A namespace's two topics, as progressor's `notifier => #{options => #{topic,
/// lifecycle_topic}}` names them.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamespaceTopics {
    /// The event sink's topic.
    pub topic: String,
    /// The lifecycle sink's topic.
    pub lifecycle_topic: String,
    /// The namespace as progressor named it, where docket's name differs (progressor allows
    /// `default/default`, docket `default.default`): the first part of the Kafka key — so the
    /// key and its partition are progressor's — and, with `mg_proto`, `source_ns` /
    /// `machine_ns`. The JSON body keeps docket's names.
    #[serde(default)]
    pub namespace: Option<String>,
}

/// A Kafka sink; makes its producer on first use, and a new one after a fatal error (an
/// idempotent producer that lost its sequence, for one).
pub struct Kafka {
    brokers: String,
    prefix: String,
    topics: HashMap<String, NamespaceTopics>,
    partitioner: Partitioner,
    idempotence: bool,
    mg_proto: bool,
    producer: std::sync::Mutex<Option<FutureProducer>>,
    partitions: tokio::sync::Mutex<HashMap<String, (usize, Instant)>>,
}

impl Kafka {
    /// A sink to the brokers `brokers` (`host:port,host:port`): topics from `topics` for the
    /// namespaces it names, `<prefix>.events.<ns>` and `<prefix>.lifecycle.<ns>` for the others,
    /// `<prefix>.tasks.<queue>` for task events; with `mg_proto`, process messages in
    /// progressor's Thrift encoding ([`crate::mg_proto`]) instead of JSON.
    #[must_use]
    pub fn new(
        brokers: &str,
        prefix: &str,
        topics: HashMap<String, NamespaceTopics>,
        partitioner: Partitioner,
        idempotence: bool,
        mg_proto: bool,
    ) -> Self {
        Kafka {
            brokers: brokers.to_string(),
            prefix: prefix.to_string(),
            topics,
            partitioner,
            idempotence,
            mg_proto,
            producer: std::sync::Mutex::new(None),
            partitions: tokio::sync::Mutex::new(HashMap::new()),
        }
    }

    /// The topic a message goes to.
    #[must_use]
    pub fn topic(&self, m: &Message) -> String {
        let own = self.topics.get(&m.namespace);
        match (m.topic, own) {
            (Topic::Events, Some(t)) => t.topic.clone(),
            (Topic::Lifecycle, Some(t)) => t.lifecycle_topic.clone(),
            (t, _) => format!("{}.{}.{}", self.prefix, t.as_str(), m.namespace),
        }
    }

    /// The bytes of a message and their content type: docket's JSON, or with `mg_proto` a
    /// process message in progressor's Thrift encoding. One that cannot be encoded fails (and
    /// holds the sink there, shown with its reason) rather than being skipped.
    fn encode<'m>(
        &self,
        m: &'m Message,
    ) -> Result<(std::borrow::Cow<'m, [u8]>, &'static str), String> {
        if !self.mg_proto || m.topic == Topic::Tasks {
            return Ok((std::borrow::Cow::Borrowed(&m.body), "application/json"));
        }
        let mut body: serde_json::Value =
            serde_json::from_slice(&m.body).map_err(|e| format!("{}: {e}", m.id))?;
        body["namespace"] = self.namespace_of(m).into();
        let bytes = crate::mg_proto::encode(&body)
            .map_err(|e| format!("{}: cannot encode as mg_proto: {e}", m.id))?;
        Ok((
            std::borrow::Cow::Owned(bytes),
            "application/vnd.apache.thrift.binary",
        ))
    }

    /// The namespace a process message carries to Kafka: progressor's name when `topics` gives
    /// one, else docket's (task events: always the queue's).
    fn namespace_of<'m>(&'m self, m: &'m Message) -> &'m str {
        match m.topic {
            Topic::Tasks => &m.namespace,
            _ => self
                .topics
                .get(&m.namespace)
                .and_then(|t| t.namespace.as_deref())
                .unwrap_or(&m.namespace),
        }
    }

    /// The Kafka key: `"<namespace> <process id>"` with [`Kafka::namespace_of`].
    fn key_of(&self, m: &Message) -> String {
        let ns = self.namespace_of(m);
        if ns == m.namespace {
            return m.key.clone();
        }
        let id = m
            .key
            .strip_prefix(m.namespace.as_str())
            .and_then(|k| k.strip_prefix(' '))
            .unwrap_or(&m.key);
        format!("{ns} {id}")
    }

    fn producer(&self) -> Result<FutureProducer, String> {
        let mut g = self.producer.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = g.as_ref() {
            match p.client().fatal_error() {
                None => return Ok(p.clone()),
                Some((code, why)) => {
                    tracing::warn!(%code, %why, "kafka producer failed fatally: making a new one");
                }
            }
        }
        let timeout_ms = CONFIRM_TIMEOUT.as_millis().to_string();
        let p: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", &self.brokers)
            .set("client.id", "docket")
            .set("acks", "all")
            .set("enable.idempotence", self.idempotence.to_string())
            // librdkafka gives up on a message after this, so a delivery future always ends.
            .set("message.timeout.ms", &timeout_ms)
            .set(
                "socket.connection.setup.timeout.ms",
                CONNECT_TIMEOUT.as_millis().to_string(),
            )
            .set("partitioner", "murmur2_random")
            .set("linger.ms", "1")
            .create()
            .map_err(|e| format!("cannot make a Kafka producer: {e}"))?;
        *g = Some(p.clone());
        Ok(p)
    }

    /// The partition count of `topic`, read from the brokers at most every 30 s.
    async fn partition_count(&self, p: &FutureProducer, topic: &str) -> Result<usize, String> {
        let mut g = self.partitions.lock().await;
        if let Some((n, at)) = g.get(topic) {
            if at.elapsed() < PARTITIONS_TTL {
                return Ok(*n);
            }
        }
        let (p2, t) = (p.clone(), topic.to_string());
        let md = tokio::task::spawn_blocking(move || {
            p2.client().fetch_metadata(Some(&t), CONNECT_TIMEOUT)
        })
        .await
        .map_err(|e| format!("reading topic {topic}'s metadata: {e}"))?
        .map_err(|e| format!("cannot read topic {topic}'s metadata: {e}"))?;
        let Some(t) = md.topics().iter().find(|t| t.name() == topic) else {
            return Err(format!("the brokers did not describe topic {topic}"));
        };
        if let Some(e) = t.error() {
            return Err(format!(
                "topic {topic}: {}",
                rdkafka::error::RDKafkaErrorCode::from(e)
            ));
        }
        let n = t.partitions().len();
        if n == 0 {
            return Err(format!("topic {topic} has no partitions"));
        }
        g.insert(topic.to_string(), (n, Instant::now()));
        Ok(n)
    }
}

#[async_trait::async_trait]
impl Sink for Kafka {
    fn kind(&self) -> &'static str {
        "kafka"
    }

    async fn publish(&self, msgs: &[Message]) -> Vec<Result<(), String>> {
        let p = match self.producer() {
            Ok(p) => p,
            Err(e) => return all_failed(msgs.len(), &e),
        };
        let mut pending = Vec::with_capacity(msgs.len());
        for m in msgs {
            let topic = self.topic(m);
            let key = self.key_of(m);
            let partition = match self.partitioner {
                Partitioner::Murmur2 => Ok(None),
                Partitioner::Phash2 => self
                    .partition_count(&p, &topic)
                    .await
                    .map(|n| Some(partition_of(&key, n))),
            };
            let partition = match partition {
                Ok(part) => part,
                Err(e) => {
                    pending.push(Err(e));
                    continue;
                }
            };
            let (body, content_type) = match self.encode(m) {
                Ok(b) => b,
                Err(e) => {
                    pending.push(Err(e));
                    continue;
                }
            };
            let headers = OwnedHeaders::new()
                .insert(Header {
                    key: "docket-message-id",
                    value: Some(m.id.as_str()),
                })
                .insert(Header {
                    key: "content-type",
                    value: Some(content_type),
                });
            let mut rec = FutureRecord::to(&topic)
                .key(key.as_bytes())
                .payload(body.as_ref())
                .headers(headers);
            if let Some(part) = partition {
                rec = rec.partition(part);
            }
            pending.push(
                p.send_result(rec)
                    .map_err(|(e, _)| format!("the producer refused the message: {e}")),
            );
        }
        let mut out = Vec::with_capacity(msgs.len());
        let mut stale = vec![];
        for (m, d) in msgs.iter().zip(pending) {
            let r = match d {
                Err(e) => Err(e),
                Ok(fut) => match tokio::time::timeout(CONFIRM_TIMEOUT + CONNECT_TIMEOUT, fut).await
                {
                    Err(_) => Err("no acknowledgement from Kafka in time".into()),
                    Ok(Err(_)) => Err("the producer dropped the message".into()),
                    Ok(Ok(Err((e, _)))) => Err(format!("Kafka did not take it: {e}")),
                    Ok(Ok(Ok(_))) => Ok(()),
                },
            };
            if r.is_err() {
                stale.push(self.topic(m));
            }
            out.push(r);
        }
        if !stale.is_empty() {
            // A failure may come from a changed topic (recreated, more partitions): read it again.
            let mut g = self.partitions.lock().await;
            for t in stale {
                g.remove(&t);
            }
        }
        out
    }
}

/// The partition of `key` among `n` (≥ 1), as progressor's `prg_notifier:partition/2`.
#[must_use]
pub fn partition_of(key: &str, n: usize) -> i32 {
    let n = u32::try_from(n.max(1)).unwrap_or(u32::MAX);
    // phash2 is below 2^27 and the remainder below n: both fit an i32.
    i32::try_from(phash2_binary(key.as_bytes()) % n).unwrap_or(0)
}

/// `erlang:phash2(B)` for a binary `B`: ERTS's `make_hash2` (Bob Jenkins' lookup2 over the
/// bytes, seeded with the binary's type constant), masked to 27 bits as `phash2/1` is. The
/// value is portable across Erlang nodes and versions, which is why progressor partitions
/// by it; the tests compare it with a real `erl`.
#[must_use]
pub fn phash2_binary(b: &[u8]) -> u32 {
    const GOLDEN: u32 = 0x9e37_79b9;
    // GOLDEN × 13 (mod 2^32): the constant ERTS mixes into a binary's hash.
    const BINARY: u32 = 0x08d1_2e65;
    let h = if b.is_empty() {
        BINARY
    } else {
        block_hash(b, BINARY, GOLDEN)
    };
    h & ((1 << 27) - 1)
}

fn block_hash(k: &[u8], init: u32, golden: u32) -> u32 {
    let word = |w: &[u8]| {
        w.iter().enumerate().fold(0u32, |acc, (i, &x)| {
            acc.wrapping_add(u32::from(x) << (8 * i))
        })
    };
    let (mut a, mut b, mut c) = (golden, golden, init);
    let mut chunks = k.chunks_exact(12);
    for ch in &mut chunks {
        a = a.wrapping_add(word(&ch[0..4]));
        b = b.wrapping_add(word(&ch[4..8]));
        c = c.wrapping_add(word(&ch[8..12]));
        mix(&mut a, &mut b, &mut c);
    }
    let rest = chunks.remainder();
    // The length is added modulo 2^32, as ERTS adds its 32-bit size.
    #[allow(clippy::cast_possible_truncation)]
    let len = k.len() as u32;
    c = c.wrapping_add(len);
    // The tail: a takes bytes 0-3, b 4-7, c 8-10 shifted one byte up (its low byte holds the
    // length).
    for (i, &x) in rest.iter().enumerate() {
        let x = u32::from(x);
        match i {
            0..=3 => a = a.wrapping_add(x << (8 * i)),
            4..=7 => b = b.wrapping_add(x << (8 * (i - 4))),
            _ => c = c.wrapping_add(x << (8 * (i - 7))),
        }
    }
    mix(&mut a, &mut b, &mut c);
    c
}

fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    let steps: [(u32, bool); 9] = [
        (13, false),
        (8, true),
        (13, false),
        (12, false),
        (16, true),
        (5, false),
        (3, false),
        (10, true),
        (15, false),
    ];
    for (i, (s, left)) in steps.into_iter().enumerate() {
        // a, b, c take turns: x -= y; x -= z; x ^= z >> s (or y << s).
        let (x, y, z) = match i % 3 {
            0 => (&mut *a, *b, *c),
            1 => (&mut *b, *c, *a),
            _ => (&mut *c, *a, *b),
        };
        *x = x.wrapping_sub(y).wrapping_sub(z);
        *x ^= if left { z << s } else { z >> s };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phash2_matches_a_known_value() {
        // `erl -noshell -eval 'io:format("~p~n", [erlang:phash2(<<"ns id">>)]), halt().'`
        assert_eq!(phash2_binary(b"ns id"), 9_776_574);
    }
}
