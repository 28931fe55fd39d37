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
    /// Task lifecycle ([`task_event`]); the message's `scope` is the queue.
    Tasks,
}

impl Topic {
    /// `events` or `lifecycle`: the middle part of a NATS subject or RabbitMQ routing key.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Topic::Events => "events",
            Topic::Lifecycle => "lifecycle",
            Topic::Tasks => "tasks",
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
    /// Events, lifecycle or tasks.
    pub topic: Topic,
    /// The process's namespace, or the task's queue (topic [`Topic::Tasks`]): the last part of
    /// a subject or routing key, through [`subject_token`].
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

/// A change of a task's state as the database recorded it (`docket_task_events`, written in
/// the transaction of the change for the queues a sink asks for).
#[derive(Debug, Clone, PartialEq)]
pub struct TaskTransition {
    /// Position in the task event outbox.
    pub seq: i64,
    /// The task.
    pub task_id: i64,
    /// Its queue.
    pub queue: String,
    /// Its kind.
    pub kind: String,
    /// The state before (`None`: the task was inserted).
    pub from_state: Option<String>,
    /// The state after.
    pub to_state: String,
    /// The attempt (after the change).
    pub attempt: i32,
    /// The stage before and after (multi-stage tasks).
    pub from_stage: Option<String>,
    /// The stage after.
    pub stage: Option<String>,
    /// When the database wrote it.
    pub at: crate::Timestamp,
}

/// The task event a state change is, if any: `enqueued` (inserted waiting), `started`
/// (claimed), `completed`, `stage_completed` (a stage done, the next one waiting), `retried` (an
/// attempt failed and will run again, or a finished task was retried), `discarded`,
/// `cancelled`. Changes that are none of these (a scheduled task becoming due, a retryable
/// one available, an insert of a finished row) are `None`: nothing is published.
#[must_use]
pub fn task_event(t: &TaskTransition) -> Option<&'static str> {
    let waiting = |s: &str| matches!(s, "available" | "scheduled" | "retryable");
    match (t.from_state.as_deref(), t.to_state.as_str()) {
        (None, to) if waiting(to) => Some("enqueued"),
        (_, "running") => Some("started"),
        (Some("running"), "completed") => Some("completed"),
        (Some("running"), to) if waiting(to) && t.stage != t.from_stage => Some("stage_completed"),
        (Some("running" | "completed" | "discarded" | "cancelled"), to) if waiting(to) => {
            Some("retried")
        }
        (Some(_), "discarded") => Some("discarded"),
        (Some(_), "cancelled") => Some("cancelled"),
        _ => None,
    }
}

/// The durable function's run a task drives (a sink's message of that task names it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRun {
    /// The task.
    pub task_id: i64,
    /// The run's id.
    pub run_id: String,
    /// Its workflow.
    pub workflow: String,
}

/// What a transition of a run's task is for the run (issue 41): `started` (its task inserted:
/// the run started), `running` (an execution began: a worker claimed it), `suspended` (it
/// sleeps or waits: the task was handed back to stage `resume`), `retried` (an execution
/// crashed or timed out and will replay, or a finished run was retried), `completed`,
/// `failed` (its task discarded), `cancelled`. `None` where [`task_event`] is `None` (a
/// sleep's end, an event waking it: its `running` follows).
#[must_use]
pub fn run_event(t: &TaskTransition) -> Option<&'static str> {
    let event = task_event(t)?;
    Some(match event {
        "enqueued" => "started",
        "started" => "running",
        "completed" => "completed",
        "discarded" => "failed",
        "cancelled" => "cancelled",
        _ if t.from_state.as_deref() == Some("running")
            && t.to_state == "scheduled"
            && t.stage.as_deref() == Some(crate::durable::RESUME_STAGE) =>
        {
            "suspended"
        }
        _ => "retried",
    })
}

/// The message of task transition `t` that is event `event` ([`task_event`]).
///
/// Body: `{"message_id", "key", "seq", "event", "task_id", "queue", "kind", "from_state",
/// "to_state", "attempt", "stage", "at", "format_version"}`; `message_id` is
/// `"task/<task id>/<seq>"`, `key` `"<queue> <task id>"` (a task's messages are published in
/// order). The task of a durable function's run (`run`) adds `"workflow_run"` (its id),
/// `"workflow"` and `"run_event"` ([`run_event`]).
#[must_use]
pub fn task_message(t: &TaskTransition, event: &str, run: Option<&TaskRun>) -> Message {
    let id = format!("task/{}/{}", t.task_id, t.seq);
    let key = format!("{} {}", t.queue, t.task_id);
    let mut body = json!({
        "message_id": id,
        "key": key,
        "seq": t.seq,
        "event": event,
        "task_id": t.task_id,
        "queue": t.queue,
        "kind": t.kind,
        "from_state": t.from_state,
        "to_state": t.to_state,
        "attempt": t.attempt,
        "stage": t.stage,
        "at": t.at,
        "format_version": FORMAT_VERSION,
    });
    if let Some(r) = run {
        body["workflow_run"] = json!(r.run_id);
        body["workflow"] = json!(r.workflow);
        body["run_event"] = json!(run_event(t));
    }
    Message {
        id,
        key,
        seq: t.seq,
        topic: Topic::Tasks,
        namespace: t.queue.clone(),
        body: serde_json::to_vec(&body).expect("a message serialises"),
    }
}

/// A name as one token of a NATS subject or AMQP routing key: `A-Z a-z 0-9 _ -` pass, any
/// other character becomes `~` and the hex of its UTF-8 bytes (`a.b` → `a~2eb`, `~` → `~7e`),
/// so a queue named `a.*` cannot add levels or wildcards. Namespaces only hold `.` of those.
#[must_use]
pub fn subject_token(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            out.push(c);
        } else {
            let mut b = [0; 4];
            for byte in c.encode_utf8(&mut b).bytes() {
                out.push_str(&format!("~{byte:02x}"));
            }
        }
    }
    out
}

/// `<topic>.<name>`: a RabbitMQ routing key, and a NATS subject after its prefix —
/// `events.<namespace>`, `lifecycle.<namespace>` (a namespace's `.` stays a separator, as
/// progressor's topic names have it), `tasks.<queue as one token>` ([`subject_token`]).
#[must_use]
pub fn subject_tail(m: &Message) -> String {
    match m.topic {
        Topic::Tasks => format!("tasks.{}", subject_token(&m.namespace)),
        t => format!("{}.{}", t.as_str(), m.namespace),
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

    fn tr(
        from: Option<&str>,
        to: &str,
        from_stage: Option<&str>,
        stage: Option<&str>,
    ) -> TaskTransition {
        TaskTransition {
            seq: 1,
            task_id: 7,
            queue: "q".into(),
            kind: "k".into(),
            from_state: from.map(String::from),
            to_state: to.into(),
            attempt: 1,
            from_stage: from_stage.map(String::from),
            stage: stage.map(String::from),
            at: chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap(),
        }
    }

    #[test]
    fn task_transitions_are_events() {
        let e = |from, to| task_event(&tr(from, to, None, None));
        assert_eq!(e(None, "available"), Some("enqueued"));
        assert_eq!(e(None, "scheduled"), Some("enqueued"));
        assert_eq!(
            e(None, "completed"),
            None,
            "a finished row moved back (MySQL)"
        );
        assert_eq!(e(Some("available"), "running"), Some("started"));
        assert_eq!(e(Some("running"), "completed"), Some("completed"));
        assert_eq!(e(Some("running"), "retryable"), Some("retried"));
        assert_eq!(e(Some("running"), "available"), Some("retried"));
        assert_eq!(e(Some("discarded"), "available"), Some("retried"));
        assert_eq!(e(Some("running"), "discarded"), Some("discarded"));
        assert_eq!(e(Some("available"), "cancelled"), Some("cancelled"));
        assert_eq!(e(Some("scheduled"), "available"), None, "due");
        assert_eq!(e(Some("retryable"), "available"), None);
        let next = tr(Some("running"), "available", Some("a"), Some("b"));
        assert_eq!(task_event(&next), Some("stage_completed"));
        let m = task_message(
            &tr(Some("running"), "completed", None, None),
            "completed",
            None,
        );
        assert_eq!(
            (m.id.as_str(), m.key.as_str(), m.topic),
            ("task/7/1", "q 7", Topic::Tasks)
        );
    }

    #[test]
    fn a_run_task_s_transitions_are_run_events() {
        let e = |from, to, from_stage, stage| run_event(&tr(from, to, from_stage, stage));
        assert_eq!(e(None, "available", None, None), Some("started"));
        assert_eq!(e(Some("available"), "running", None, None), Some("running"));
        // The first suspend moves the stage to resume, later ones keep it: both suspended.
        assert_eq!(
            e(Some("running"), "scheduled", None, Some("resume")),
            Some("suspended")
        );
        assert_eq!(
            e(Some("running"), "scheduled", Some("resume"), Some("resume")),
            Some("suspended")
        );
        assert_eq!(
            e(
                Some("scheduled"),
                "available",
                Some("resume"),
                Some("resume")
            ),
            None
        );
        assert_eq!(e(Some("running"), "retryable", None, None), Some("retried"));
        assert_eq!(
            e(Some("cancelled"), "available", None, Some("resume")),
            Some("retried")
        );
        assert_eq!(
            e(Some("running"), "completed", None, None),
            Some("completed")
        );
        assert_eq!(e(Some("running"), "discarded", None, None), Some("failed"));
        assert_eq!(
            e(Some("scheduled"), "cancelled", None, None),
            Some("cancelled")
        );
        let run = TaskRun {
            task_id: 7,
            run_id: "r1".into(),
            workflow: "checkout".into(),
        };
        let m = task_message(
            &tr(Some("running"), "completed", None, None),
            "completed",
            Some(&run),
        );
        let body: Value = serde_json::from_slice(&m.body).unwrap();
        assert_eq!(
            (&body["workflow_run"], &body["workflow"], &body["run_event"]),
            (&json!("r1"), &json!("checkout"), &json!("completed"))
        );
    }

    #[test]
    fn names_become_one_token() {
        assert_eq!(subject_token("emails_2-x"), "emails_2-x");
        assert_eq!(subject_token("a.*>"), "a~2e~2a~3e");
        assert_eq!(subject_token("é ~"), "~c3~a9~20~7e");
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
