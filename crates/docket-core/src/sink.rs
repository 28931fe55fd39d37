//! Messages of event sinks — progressor's notifier (`prg_notifier`, seed 001) on a broker.
//!
//! progressor produces two streams per namespace: an **event sink** (every event a process step
//! writes) and a **lifecycle sink** (process created, failed with its reason, repaired,
//! removed), each message keyed `"<namespace> <process id>"` so one process's messages stay in
//! order. docket builds both from its notification outbox (`docket_notifications`, written in
//! the transaction of the change): [`message`] is the one place a notification becomes a
//! message, [`waves`] the one rule that keeps a key's messages in order while publishing many
//! at once.

use crate::process::Notification;
use serde_json::{json, Value};

/// The version of the message shape ([`message`]); bumped on an incompatible change.
pub const FORMAT_VERSION: u32 = 1;

/// Which of progressor's two sinks a message belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topic {
    /// Process events (notification kind `event`).
    Events,
    /// Process lifecycle: `created`, `failed`, `repaired`, `removed`.
    Lifecycle,
}

impl Topic {
    /// `events` or `lifecycle`: the middle part of a NATS subject or RabbitMQ routing key.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Topic::Events => "events",
            Topic::Lifecycle => "lifecycle",
        }
    }
}

/// One message for a broker.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// Stable across redeliveries: `"<namespace>/<process id>/<seq>"` (JetStream `Nats-Msg-Id`,
    /// AMQP `message_id`); a consumer drops a message whose id it has seen.
    pub id: String,
    /// `"<namespace> <process id>"`: progressor's Kafka key; messages of one key are published
    /// in order.
    pub key: String,
    /// The notification's seq (the outbox cursor advances past it once the broker confirmed).
    pub seq: i64,
    /// Events or lifecycle.
    pub topic: Topic,
    /// The process's namespace.
    pub namespace: String,
    /// The body: JSON, see [`message`].
    pub body: Vec<u8>,
}

/// The message of notification `n`.
///
/// Body, kind `event`: `{"message_id", "key", "seq", "namespace", "process_id", "kind":
/// "event", "event_id", "created_at", "timestamp", "metadata", "payload", "format_version"}`
/// — progressor's event sink fields (namespace, id, event id, created_at, payload, format
/// version) with the event's own timestamp and metadata. Kinds `created`, `repaired`,
/// `removed`, `failed`: `{"message_id", "key", "seq", "namespace", "process_id", "kind",
/// "created_at", "reason", "format_version"}`, `reason` being the failure's detail (`failed`)
/// or null. `created_at` is when the change was committed (RFC 3339, UTC).
#[must_use]
pub fn message(n: &Notification) -> Message {
    let id = format!("{}/{}/{}", n.namespace, n.process_id, n.seq);
    let key = format!("{} {}", n.namespace, n.process_id);
    let mut body = json!({
        "message_id": id,
        "key": key,
        "seq": n.seq,
        "namespace": n.namespace,
        "process_id": n.process_id,
        "kind": n.kind,
        "created_at": n.created_at,
        "format_version": FORMAT_VERSION,
    });
    let field = |k: &str| n.data.get(k).cloned().unwrap_or(Value::Null);
    let topic = if n.kind == "event" {
        body["event_id"] = json!(n.event_id);
        for k in ["timestamp", "metadata", "payload"] {
            body[k] = field(k);
        }
        Topic::Events
    } else {
        body["reason"] = field("detail");
        Topic::Lifecycle
    };
    Message {
        id,
        key,
        seq: n.seq,
        topic,
        namespace: n.namespace.clone(),
        body: serde_json::to_vec(&body).expect("a message serialises"),
    }
}

/// Orders the publishing of `msgs` (in seq order) into waves that may each be published at
/// once: a message's wave is the number of messages of its key before it in `msgs` (a key's
/// first message in wave 0, its second in wave 1, …), and a wave longer than `max` (at least 1)
/// is split into consecutive ones. So a key's next message is sent only after the broker
/// confirmed the one before (waves go one after another), while the messages of different keys
/// go out together. Returns the waves as indexes into `msgs`, ascending within each; every
/// index appears once.
///
/// The cursor advances only over the longest prefix of `msgs` the broker confirmed, so after a
/// failure the messages past it are published again — repeats with their ids, and per key still
/// in order (a key's message past a failed one was never sent).
#[must_use]
pub fn waves(msgs: &[Message], max: usize) -> Vec<Vec<usize>> {
    let max = max.max(1);
    let mut level_of_key: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut levels: Vec<Vec<usize>> = vec![];
    for (i, m) in msgs.iter().enumerate() {
        let l = level_of_key.entry(m.key.as_str()).or_insert(0);
        if levels.len() <= *l {
            levels.push(vec![]);
        }
        levels[*l].push(i);
        *l += 1;
    }
    levels
        .into_iter()
        .flat_map(|l| l.chunks(max).map(<[usize]>::to_vec).collect::<Vec<_>>())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(seq: i64, pid: &str, kind: &str, data: Value) -> Notification {
        Notification {
            seq,
            namespace: "orders".into(),
            process_id: pid.into(),
            kind: kind.into(),
            event_id: (kind == "event").then_some(seq),
            data,
            created_at: chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap(),
        }
    }

    #[test]
    fn events_carry_progressors_fields() {
        let m = message(&n(
            7,
            "p 1",
            "event",
            json!({"event_id": 7, "timestamp": "t", "metadata": {"m": 1}, "payload": {"x": 2}}),
        ));
        assert_eq!(
            (m.id.as_str(), m.key.as_str(), m.topic),
            ("orders/p 1/7", "orders p 1", Topic::Events)
        );
        let body: Value = serde_json::from_slice(&m.body).unwrap();
        assert_eq!(
            body,
            json!({"message_id": "orders/p 1/7", "key": "orders p 1", "seq": 7,
                "namespace": "orders", "process_id": "p 1", "kind": "event", "event_id": 7,
                "created_at": "2023-11-14T22:13:20Z", "timestamp": "t", "metadata": {"m": 1},
                "payload": {"x": 2}, "format_version": 1})
        );
    }

    #[test]
    fn lifecycle_carries_the_reason() {
        let failed = message(&n(3, "p", "failed", json!({"detail": "boom"})));
        let body: Value = serde_json::from_slice(&failed.body).unwrap();
        assert_eq!(failed.topic, Topic::Lifecycle);
        assert_eq!(
            (body["kind"].clone(), body["reason"].clone()),
            (json!("failed"), json!("boom"))
        );
        let created = message(&n(4, "p", "created", json!({})));
        let body: Value = serde_json::from_slice(&created.body).unwrap();
        assert_eq!(
            (body["kind"].clone(), body["reason"].clone()),
            (json!("created"), Value::Null)
        );
    }

    #[test]
    fn a_wave_never_holds_a_key_twice() {
        let ms: Vec<_> = ["a", "b", "a", "c", "c", "d", "a"]
            .iter()
            .enumerate()
            .map(|(i, k)| message(&n(i as i64, k, "created", json!({}))))
            .collect();
        let w = waves(&ms, 100);
        assert_eq!(w, vec![vec![0, 1, 3, 5], vec![2, 4], vec![6]]);
        assert_eq!(
            waves(&ms, 3),
            vec![vec![0, 1, 3], vec![5], vec![2, 4], vec![6]]
        );
        assert_eq!(waves(&ms, 0).len(), 7);
        assert!(waves(&[], 10).is_empty());
        // Whatever the keys: every message once, no key twice in a wave, a key's messages in
        // ascending waves.
        for max in [1, 2, 5, 100] {
            let w = waves(&ms, max);
            let mut all: Vec<usize> = w.iter().flatten().copied().collect();
            all.sort_unstable();
            assert_eq!(all, (0..ms.len()).collect::<Vec<_>>());
            let mut last_wave = std::collections::HashMap::new();
            for (wi, wave) in w.iter().enumerate() {
                let mut keys = std::collections::HashSet::new();
                for &i in wave {
                    assert!(keys.insert(&ms[i].key), "a key twice in a wave");
                    if let Some(prev) = last_wave.insert(&ms[i].key, (wi, i)) {
                        assert!(prev.0 < wi && prev.1 < i, "a key out of order");
                    }
                }
            }
        }
    }
}
