//! Updating a task that waits (asyncflow's setTask, node-daemons' "move tasks to another
//! node"): `PATCH /v1/tasks/{id}` and `docket task set`. The rule is here; the store applies it
//! to the row it holds locked, so a change never races a claim.

use crate::{task::check_name, Task, TaskState, Timestamp};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::time::Duration;

/// Largest `attempt` a patch may set: far beyond any retry budget, and far enough from
/// `i32::MAX` that the claims and retries after it (`attempt + 1`) cannot overflow.
pub const MAX_ATTEMPT: i32 = 1_000_000;

/// The JSON body of `PATCH /v1/tasks/{id}`: every field optional, at least one change.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskPatch {
    /// New priority (higher runs first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// New earliest start (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub run_at: Option<Timestamp>,
    /// New start after this delay from now (humantime), instead of `run_at`.
    #[serde(
        default,
        with = "crate::duration::serde_opt",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, example = "5m")]
    pub run_in: Option<Duration>,
    /// New payload (a running task's context, with its lease).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    /// New progress (a running task, with its lease).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Value>,
    /// Pin to this node; `null` lets any node run it.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, min_length = 1, max_length = 256, pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$")]
    pub node: Option<Option<String>>,
    /// Move to this queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$"
    )]
    pub queue: Option<String>,
    /// New attempt budget (at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub max_attempts: Option<i32>,
    /// Move to this stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$"
    )]
    pub stage: Option<String>,
    /// New retry policy (replaces the whole policy; asyncflow's `maxRetryInterval` is its `max`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<crate::Backoff>,
    /// Attempts counted as made (asyncflow's `crtRetryNum`): a waiting task's next claim makes
    /// attempt `attempt + 1`, so it must leave one within `max_attempts`; a running task's is
    /// the attempt in hand (1..=`max_attempts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0, maximum = 1_000_000)]
    pub attempt: Option<i32>,
    /// The lease of a running task: with it, `payload`, `progress`, `priority`, `run_at`,
    /// `max_attempts`, `backoff` and `attempt` may change (not `queue`, `node`, `stage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1)]
    pub lease: Option<String>,
    /// Apply only if the task is still at this version (its `ETag`); the `If-Match` header
    /// does the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// A field present with `null` is `Some(None)`; absent is `None` (by `default`).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

/// Why a patch was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PatchError {
    /// A field is bad (names it).
    Invalid(String),
    /// The task's state does not allow it (finished; running without its lease).
    State(String),
    /// The task changed since the version the client read.
    Version(String),
    /// The lease does not hold the running task.
    LeaseLost,
}

/// A task's version: the first 16 bytes (32 hex digits) of the SHA-256 of its JSON, lease and
/// insert flag left out. Anything that changes the task — a claim, a heartbeat, a finish, an
/// update — changes it; it is what `ETag` and `If-Match` carry.
pub fn version(t: &Task) -> String {
    let mut t = t.clone();
    t.lease = None;
    t.inserted = None;
    let bytes = serde_json::to_vec(&t).unwrap_or_default();
    Sha256::digest(&bytes)[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl TaskPatch {
    /// Checks the fields alone (before the task is read).
    ///
    /// # Errors
    /// [`PatchError::Invalid`] naming the field.
    pub fn validate(&self) -> Result<(), PatchError> {
        let bad = PatchError::Invalid;
        if self.priority.is_none()
            && self.run_at.is_none()
            && self.run_in.is_none()
            && self.payload.is_none()
            && self.progress.is_none()
            && self.node.is_none()
            && self.queue.is_none()
            && self.max_attempts.is_none()
            && self.stage.is_none()
            && self.backoff.is_none()
            && self.attempt.is_none()
        {
            return Err(bad("nothing to change: give at least one of priority, run_at, run_in, payload, progress, node, queue, max_attempts, stage, backoff, attempt".into()));
        }
        if let Some(b) = &self.backoff {
            b.validate().map_err(bad)?;
        }
        if let Some(l) = &self.lease {
            crate::api::check_lease("lease", l).map_err(bad)?;
        }
        if let Some(a) = self.attempt {
            if !(0..=MAX_ATTEMPT).contains(&a) {
                return Err(bad(format!(
                    "attempt must be within 0..={MAX_ATTEMPT}, got {a}"
                )));
            }
        }
        if self.run_at.is_some() && self.run_in.is_some() {
            return Err(bad("give run_at or run_in, not both".into()));
        }
        if let Some(t) = self.run_at {
            crate::time::check("run_at", t).map_err(bad)?;
        }
        if let Some(m) = self.max_attempts {
            if m < 1 {
                return Err(bad(format!("max_attempts must be at least 1, got {m}")));
            }
        }
        for (f, v) in [
            ("queue", self.queue.as_ref()),
            ("stage", self.stage.as_ref()),
            ("node", self.node.as_ref().and_then(Option::as_ref)),
        ] {
            if let Some(v) = v {
                check_name(f, v).map_err(bad)?;
            }
        }
        for (f, v) in [("payload", &self.payload), ("progress", &self.progress)] {
            if v.as_ref().is_some_and(crate::task::has_nul) {
                return Err(bad(format!(
                    "{f} must not contain NUL characters (\\u0000)"
                )));
            }
        }
        if let Some(v) = &self.version {
            if v.is_empty() || v.len() > 64 || !v.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(bad(format!(
                    "version must be the hex digits of an ETag, got {v:?}"
                )));
            }
        }
        Ok(())
    }

    /// The task after this patch. `t` is the task as stored, `token` its lease token (running
    /// tasks), `if_match` the version the caller read (body `version` or `If-Match`).
    ///
    /// Rules: a finished task cannot change; a running task changes only `payload` and
    /// `progress`, and only with its lease; a waiting task (scheduled, available, retryable)
    /// may change every field, and a new start time makes it `scheduled` (or keeps it
    /// `retryable`) when in the future, else `available`.
    ///
    /// # Errors
    /// See [`PatchError`].
    pub fn apply(
        &self,
        t: &Task,
        token: Option<&str>,
        if_match: Option<&str>,
        now: Timestamp,
    ) -> Result<Task, PatchError> {
        self.validate()?;
        // A bulk action's task is docket's own: its payload is what an admin confirmed.
        if t.queue == crate::bulk::QUEUE && self.lease.is_none() {
            return Err(PatchError::State(format!(
                "task {} is a bulk action: docket runs it (cancel it to stop it)",
                t.id
            )));
        }
        if self.queue.as_deref() == Some(crate::bulk::QUEUE) {
            return Err(PatchError::Invalid(format!(
                "queue {} is docket's own (POST /v1/tasks/bulk)",
                crate::bulk::QUEUE
            )));
        }
        if let Some(v) = if_match.or(self.version.as_deref()) {
            let cur = version(t);
            if !v.eq_ignore_ascii_case(&cur) {
                return Err(PatchError::Version(format!(
                    "task {} changed: it is at version {cur}, not {v}",
                    t.id
                )));
            }
        }
        let mut n = t.clone();
        // The edit's time, which the store keeps as the task's edited_at (see Task::touch).
        n.updated_at = now;
        match t.state {
            TaskState::Completed | TaskState::Discarded | TaskState::Cancelled => {
                return Err(PatchError::State(format!(
                    "task {} is {}: a finished task cannot change (retry it first)",
                    t.id,
                    t.state.as_str()
                )));
            }
            TaskState::Running => {
                let Some(lease) = &self.lease else {
                    return Err(PatchError::State(format!(
                        "task {} is running: send its lease to change its payload or progress",
                        t.id
                    )));
                };
                if token != Some(lease.as_str()) {
                    return Err(PatchError::LeaseLost);
                }
                if self.node.is_some() || self.queue.is_some() || self.stage.is_some() {
                    return Err(PatchError::State(format!(
                        "task {} is running: its queue, node and stage cannot change until it finishes (a stage is handed on by completing it with next_stage)",
                        t.id
                    )));
                }
            }
            TaskState::Scheduled | TaskState::Available | TaskState::Retryable => {
                if self.lease.is_some() {
                    return Err(PatchError::Invalid(format!(
                        "task {} is not running: it has no lease to send",
                        t.id
                    )));
                }
            }
        }
        if let Some(p) = self.priority {
            n.priority = p;
        }
        if let Some(p) = &self.payload {
            n.payload = p.clone();
        }
        if let Some(p) = &self.progress {
            n.progress = Some(p.clone());
        }
        if let Some(node) = &self.node {
            n.node = node.clone();
        }
        if let Some(q) = &self.queue {
            n.queue = q.clone();
        }
        if let Some(m) = self.max_attempts {
            n.max_attempts = m;
        }
        if let Some(s) = &self.stage {
            n.stage = Some(s.clone());
        }
        if let Some(b) = self.backoff {
            n.backoff = b;
        }
        if let Some(a) = self.attempt {
            n.attempt = a;
        }
        let running = t.state == TaskState::Running;
        let counted = self.attempt.is_some() || self.max_attempts.is_some();
        if running && counted && !(1..=n.max_attempts).contains(&n.attempt) {
            return Err(PatchError::Invalid(format!(
                "attempt {} of a running task must be within 1..={} (max_attempts)",
                n.attempt, n.max_attempts
            )));
        }
        if !running && counted && n.attempt >= n.max_attempts {
            return Err(PatchError::Invalid(format!(
                "attempt {} leaves no attempt within max_attempts {}",
                n.attempt, n.max_attempts
            )));
        }
        let run_at = match (self.run_at, self.run_in) {
            (Some(at), _) => Some(at),
            (None, Some(d)) => Some(crate::time::add(now, d)),
            (None, None) => None,
        };
        if let Some(at) = run_at {
            use chrono::SubsecRound;
            n.run_at = at.trunc_subsecs(6);
            if running {
                // The attempt in hand runs on; what is shown is the time it was due (asyncflow's
                // orderTime on a held task). A retry sets its own time.
                return Ok(n);
            }
            n.state = if n.run_at <= now {
                TaskState::Available
            } else if t.state == TaskState::Retryable {
                TaskState::Retryable
            } else {
                TaskState::Scheduled
            };
            if let Some(e) = n.expires_at {
                if e <= n.run_at {
                    return Err(PatchError::Invalid(format!(
                        "run_at ({}) must be before the task's expires_at ({e})",
                        n.run_at
                    )));
                }
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::{NewTask, TaskDefaults};
    use chrono::TimeZone;

    fn task(state: TaskState) -> Task {
        let now = chrono::Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap();
        let mut t = NewTask::new("k", serde_json::json!({"a": 1}))
            .resolve(None, &TaskDefaults::default(), now)
            .unwrap()
            .into_task(7, now);
        t.state = state;
        t
    }

    #[test]
    fn waiting_tasks_take_every_field_and_a_new_time_sets_the_state() {
        let t = task(TaskState::Available);
        let now = t.created_at;
        let p = TaskPatch {
            priority: Some(5),
            run_in: Some(Duration::from_secs(60)),
            node: Some(Some("n2".into())),
            queue: Some("q2".into()),
            stage: Some("ship".into()),
            max_attempts: Some(3),
            ..Default::default()
        };
        let n = p.apply(&t, None, None, now).unwrap();
        assert_eq!(n.state, TaskState::Scheduled);
        assert_eq!(n.run_at, now + chrono::TimeDelta::try_seconds(60).unwrap());
        assert_eq!(
            (
                n.priority,
                n.node.as_deref(),
                n.queue.as_str(),
                n.max_attempts
            ),
            (5, Some("n2"), "q2", 3)
        );
        let back = TaskPatch {
            run_at: Some(now),
            node: Some(None),
            ..Default::default()
        };
        let m = back.apply(&n, None, None, now).unwrap();
        assert_eq!((m.state, m.node), (TaskState::Available, None));
        let mut r = task(TaskState::Retryable);
        r.run_at = now;
        let later = TaskPatch {
            run_in: Some(Duration::from_secs(5)),
            ..Default::default()
        };
        assert_eq!(
            later.apply(&r, None, None, now).unwrap().state,
            TaskState::Retryable
        );
    }

    #[test]
    fn running_needs_its_lease_and_keeps_its_queue_node_and_stage() {
        let t = task(TaskState::Running);
        let now = t.created_at;
        let p = TaskPatch {
            progress: Some(serde_json::json!(50)),
            lease: Some("tok".into()),
            ..Default::default()
        };
        assert_eq!(
            p.apply(&t, Some("tok"), None, now).unwrap().progress,
            Some(serde_json::json!(50))
        );
        assert_eq!(
            p.apply(&t, Some("other"), None, now),
            Err(PatchError::LeaseLost)
        );
        let no_lease = TaskPatch {
            progress: Some(serde_json::json!(1)),
            ..Default::default()
        };
        assert!(matches!(
            no_lease.apply(&t, Some("tok"), None, now),
            Err(PatchError::State(_))
        ));
        // With its lease a running task takes new retry settings and priority (asyncflow's
        // setTask on a held task), not a new queue, node or stage.
        let retry = TaskPatch {
            priority: Some(1),
            max_attempts: Some(50),
            attempt: Some(8),
            backoff: Some(crate::Backoff {
                max: Duration::from_secs(88),
                ..Default::default()
            }),
            lease: Some("tok".into()),
            ..Default::default()
        };
        let n = retry.apply(&t, Some("tok"), None, now).unwrap();
        assert_eq!(
            (
                n.state,
                n.priority,
                n.max_attempts,
                n.attempt,
                n.backoff.max
            ),
            (TaskState::Running, 1, 50, 8, Duration::from_secs(88))
        );
        let queue = TaskPatch {
            queue: Some("q2".into()),
            lease: Some("tok".into()),
            ..Default::default()
        };
        assert!(matches!(
            queue.apply(&t, Some("tok"), None, now),
            Err(PatchError::State(_))
        ));
        let zero = TaskPatch {
            attempt: Some(0),
            lease: Some("tok".into()),
            ..Default::default()
        };
        assert!(matches!(
            zero.apply(&t, Some("tok"), None, now),
            Err(PatchError::Invalid(_))
        ));
        assert!(matches!(
            no_lease.apply(&task(TaskState::Completed), None, None, now),
            Err(PatchError::State(_))
        ));
    }

    #[test]
    fn attempts_must_leave_one_to_run() {
        let t = task(TaskState::Available);
        let now = t.created_at;
        let p = |attempt, max| TaskPatch {
            attempt: Some(attempt),
            max_attempts: max,
            ..Default::default()
        };
        assert_eq!(
            p(7, Some(10)).apply(&t, None, None, now).unwrap().attempt,
            7
        );
        assert!(matches!(
            p(10, Some(10)).apply(&t, None, None, now),
            Err(PatchError::Invalid(_))
        ));
        assert!(matches!(
            p(-1, None).validate(),
            Err(PatchError::Invalid(_))
        ));
        assert!(matches!(
            p(MAX_ATTEMPT + 1, Some(i32::MAX)).validate(),
            Err(PatchError::Invalid(_))
        ));
    }

    #[test]
    fn versions_guard_against_lost_updates() {
        let t = task(TaskState::Available);
        let v = version(&t);
        assert_eq!(v.len(), 32);
        let p = TaskPatch {
            priority: Some(2),
            ..Default::default()
        };
        let n = p.apply(&t, None, Some(&v), t.created_at).unwrap();
        assert_ne!(version(&n), v, "a change changes the version");
        assert!(matches!(
            p.apply(&n, None, Some(&v), t.created_at),
            Err(PatchError::Version(_))
        ));
    }

    #[test]
    fn bad_fields_are_named() {
        let cases = [
            (TaskPatch::default(), "nothing to change"),
            (
                TaskPatch {
                    max_attempts: Some(0),
                    ..Default::default()
                },
                "max_attempts",
            ),
            (
                TaskPatch {
                    queue: Some(String::new()),
                    ..Default::default()
                },
                "queue",
            ),
            (
                TaskPatch {
                    payload: Some(serde_json::json!("a\u{0}b")),
                    ..Default::default()
                },
                "payload",
            ),
            (
                TaskPatch {
                    priority: Some(1),
                    version: Some("zz".into()),
                    ..Default::default()
                },
                "version",
            ),
        ];
        for (p, field) in cases {
            match p.validate() {
                Err(PatchError::Invalid(m)) => assert!(m.contains(field), "{m}"),
                other => panic!("{field}: {other:?}"),
            }
        }
        let p: TaskPatch = serde_json::from_str(r#"{"node": null}"#).unwrap();
        assert_eq!(p.node, Some(None));
        let p: TaskPatch = serde_json::from_str(r#"{"priority": 1}"#).unwrap();
        assert_eq!(p.node, None);
    }
}
