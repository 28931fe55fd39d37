//! Batches (issue 26): tasks grouped under one id, with callback tasks enqueued exactly once
//! when every member has finished. The names follow Sidekiq's batch callbacks (`complete`,
//! `success`, `death`) and Oban Pro's (`batch_exhausted`, `batch_completed`,
//! `batch_discarded`, `batch_cancelled`); the table in docs/src/batches.md maps them.
//!
//! The rules, each written here once:
//! - A batch **settles** when it is sealed (`open: false`, the default, or sealed later) and
//!   none of its members is `scheduled`, `available`, `running` or `retryable`. Settling is one
//!   transaction under the batch's row lock: of two nodes settling at once, the second finds it
//!   settled and does nothing — that is what makes each callback run once.
//! - At settling, [`due`] says which callbacks to enqueue from the members' final states.
//! - Tasks may be added while the batch has not settled (also from a member while it runs).

use crate::task::NewTask;
use crate::{TaskState, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Most tasks in one `POST /v1/batches` or one addition (as `POST /v1/tasks`).
pub const MAX_TASKS_PER_REQUEST: usize = 10_000;
/// Most member ids a callback's payload lists in `failed_ids` (the rest are counted).
pub const MAX_FAILED_IDS: usize = 1_000;
/// Longest batch name (characters).
pub const MAX_NAME_LEN: usize = 256;

/// The callbacks, in the order they are enqueued when several are due.
pub const CALLBACKS: [&str; 4] = ["completed", "succeeded", "discarded", "cancelled"];

/// A batch to create. JSON shape of `POST /v1/batches`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewBatch {
    /// A label for people (1–256 characters); not unique.
    #[serde(default)]
    pub name: Option<String>,
    /// The members, 0..=10,000 (0 only with `open: true`). No member may carry `unique_key`: a
    /// task turned away by it would not be in the batch.
    #[serde(default)]
    pub tasks: Vec<NewTask>,
    /// Task specs enqueued when the batch settles; see [`Callbacks`].
    #[serde(default)]
    pub callbacks: Callbacks,
    /// Keep the batch open: callbacks wait until `POST /v1/batches/{id}/seal`, so tasks can be
    /// added in several requests first. Default false (sealed at once).
    #[serde(default)]
    pub open: bool,
}

/// The callback task specs of a batch. Each is a task spec as `POST /v1/tasks` takes (no
/// `unique_key`, and times relative to the settling: `run_in` / `expires_in`, not `run_at` /
/// `expires_at`); its `payload` must be an object or null, and docket adds a `batch` key to it:
/// `{"id", "name", "callback", "total", "completed", "discarded", "cancelled", "failed_ids"}`
/// (`failed_ids`: the discarded and cancelled members, the first 1,000 by id).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Callbacks {
    /// Every member finished, whatever the outcome (Sidekiq `complete`, Oban `batch_exhausted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed: Option<NewTask>,
    /// Every member completed (Sidekiq `success`, Oban `batch_completed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub succeeded: Option<NewTask>,
    /// Every member finished and at least one was discarded (Oban `batch_discarded`; Sidekiq's
    /// `death` fires at the first death instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discarded: Option<NewTask>,
    /// Every member finished and at least one was cancelled (Oban `batch_cancelled`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancelled: Option<NewTask>,
}

impl Callbacks {
    /// The spec of callback `name` (one of [`CALLBACKS`]).
    pub fn get(&self, name: &str) -> Option<&NewTask> {
        match name {
            "completed" => self.completed.as_ref(),
            "succeeded" => self.succeeded.as_ref(),
            "discarded" => self.discarded.as_ref(),
            "cancelled" => self.cancelled.as_ref(),
            _ => None,
        }
    }
}

/// How many members are in each state. JSON: `{"available": 3, "completed": 10, ...}`, states
/// with none left out.
pub type StateCounts = BTreeMap<TaskState, i64>;

/// A batch as stored and returned by `GET /v1/batches/{id}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct Batch {
    /// Id, increasing with creation.
    pub id: i64,
    /// The label given at creation.
    pub name: Option<String>,
    /// Still taking tasks before callbacks may run (not yet sealed).
    pub open: bool,
    /// Members in all.
    pub total: i64,
    /// Members finished (completed, discarded or cancelled).
    pub done: i64,
    /// Members by state.
    #[schema(value_type = Object)]
    pub counts: StateCounts,
    /// The callback specs given at creation.
    pub callbacks: Callbacks,
    /// The callbacks enqueued at settling: name → task id.
    pub fired: BTreeMap<String, i64>,
    /// When created.
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Timestamp,
    /// When it settled (its callbacks were enqueued); null before.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub settled_at: Option<Timestamp>,
}

impl Batch {
    /// Fills `total` and `done` from `counts`.
    pub fn with_counts(mut self, counts: StateCounts) -> Batch {
        self.total = counts.values().sum();
        self.done = counts
            .iter()
            .filter(|(s, _)| s.is_finished())
            .map(|(_, n)| n)
            .sum();
        self.counts = counts;
        self
    }

    /// Every member has finished (vacuously true for none).
    pub fn all_finished(&self) -> bool {
        self.done == self.total
    }
}

/// The answer to `POST /v1/batches` and `POST /v1/batches/{id}/tasks`: the batch (counted)
/// and the tasks just inserted, in input order.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct BatchCreated {
    /// The batch.
    pub batch: Batch,
    /// The tasks inserted by this request.
    pub tasks: Vec<crate::Task>,
}

/// `POST /v1/batches/{id}/tasks`: members to add to a batch that has not settled.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchAdd {
    /// 0..=10,000 task specs (no `unique_key`).
    #[serde(default)]
    pub tasks: Vec<NewTask>,
    /// Seal the batch too (callbacks may run once every member finished). Default false.
    #[serde(default)]
    pub seal: bool,
}

/// `GET /v1/batches`: newest first.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct BatchList {
    /// The batches.
    pub batches: Vec<Batch>,
}

/// Checks a batch spec beyond what each task's own checks cover.
///
/// # Errors
/// A message naming the problem: a name too long or with control characters, too many tasks, a
/// sealed batch without tasks, a member or callback with `unique_key`, a callback whose payload
/// is neither an object nor null.
pub fn check(b: &NewBatch) -> Result<(), String> {
    if let Some(n) = &b.name {
        check_name(n)?;
    }
    check_members(&b.tasks)?;
    if b.tasks.is_empty() && !b.open {
        return Err("a batch needs tasks, or \"open\": true to add them later".into());
    }
    for name in CALLBACKS {
        if let Some(t) = b.callbacks.get(name) {
            if t.unique_key.is_some() {
                return Err(format!(
                    "callbacks.{name}: no unique_key (docket enqueues each callback once)"
                ));
            }
            if t.run_at.is_some() || t.expires_at.is_some() {
                return Err(format!(
                    "callbacks.{name}: use run_in / expires_in (a callback starts when the batch settles)"
                ));
            }
            if !(t.payload.is_object() || t.payload.is_null()) {
                return Err(format!(
                    "callbacks.{name}.payload must be an object or null: docket adds a `batch` key"
                ));
            }
        }
    }
    Ok(())
}

/// Checks tasks to add to a batch.
///
/// # Errors
/// More than [`MAX_TASKS_PER_REQUEST`], or a task with `unique_key` (its index is named).
pub fn check_members(tasks: &[NewTask]) -> Result<(), String> {
    if tasks.len() > MAX_TASKS_PER_REQUEST {
        return Err(format!("at most {MAX_TASKS_PER_REQUEST} tasks per request"));
    }
    if let Some(i) = tasks.iter().position(|t| t.unique_key.is_some()) {
        return Err(format!(
            "tasks[{i}]: a batch's tasks carry no unique_key (a task it turned away would not be in the batch)"
        ));
    }
    Ok(())
}

fn check_name(n: &str) -> Result<(), String> {
    if n.is_empty() || n.chars().count() > MAX_NAME_LEN || n.chars().any(char::is_control) {
        return Err(format!(
            "name must be 1 to {MAX_NAME_LEN} characters without control characters"
        ));
    }
    Ok(())
}

/// The callbacks due when a batch settles, from its members' final states (a subset of
/// [`CALLBACKS`], in that order): `completed` always; `succeeded` when none was discarded or
/// cancelled; `discarded` / `cancelled` when at least one was.
pub fn due(counts: &StateCounts) -> Vec<&'static str> {
    let n = |s: TaskState| counts.get(&s).copied().unwrap_or(0);
    let (discarded, cancelled) = (n(TaskState::Discarded), n(TaskState::Cancelled));
    CALLBACKS
        .into_iter()
        .filter(|c| match *c {
            "completed" => true,
            "succeeded" => discarded == 0 && cancelled == 0,
            "discarded" => discarded > 0,
            "cancelled" => cancelled > 0,
            _ => false,
        })
        .collect()
}

/// The callback tasks to enqueue as `batch` settles: for each due callback that has a spec,
/// the spec with `batch` info added to its payload. `failed` are the discarded and cancelled
/// members' ids (at most [`MAX_FAILED_IDS`] are listed).
pub fn callbacks_to_enqueue(batch: &Batch, failed: &[i64]) -> Vec<(&'static str, NewTask)> {
    let n = |s: TaskState| batch.counts.get(&s).copied().unwrap_or(0);
    due(&batch.counts)
        .into_iter()
        .filter_map(|name| {
            let mut t = batch.callbacks.get(name)?.clone();
            let info = json!({
                "id": batch.id,
                "name": batch.name,
                "callback": name,
                "total": batch.total,
                "completed": n(TaskState::Completed),
                "discarded": n(TaskState::Discarded),
                "cancelled": n(TaskState::Cancelled),
                "failed_ids": &failed[..failed.len().min(MAX_FAILED_IDS)],
            });
            let mut m = match std::mem::take(&mut t.payload) {
                Value::Object(m) => m,
                _ => Map::new(),
            };
            m.insert("batch".into(), info);
            t.payload = Value::Object(m);
            Some((name, t))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(c: i64, d: i64, x: i64) -> StateCounts {
        [
            (TaskState::Completed, c),
            (TaskState::Discarded, d),
            (TaskState::Cancelled, x),
        ]
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .collect()
    }

    #[test]
    fn callbacks_due_by_outcome() {
        assert_eq!(due(&counts(3, 0, 0)), vec!["completed", "succeeded"]);
        assert_eq!(due(&counts(3, 1, 0)), vec!["completed", "discarded"]);
        assert_eq!(
            due(&counts(0, 1, 2)),
            vec!["completed", "discarded", "cancelled"]
        );
        assert_eq!(due(&counts(1, 0, 1)), vec!["completed", "cancelled"]);
    }

    fn batch(c: StateCounts) -> Batch {
        Batch {
            id: 7,
            name: Some("b".into()),
            open: false,
            total: 0,
            done: 0,
            counts: StateCounts::new(),
            callbacks: Callbacks {
                completed: Some(NewTask::new("done", json!({"to": "ops"}))),
                discarded: Some(NewTask::new("failed", Value::Null)),
                ..Default::default()
            },
            fired: BTreeMap::new(),
            created_at: crate::time::min(),
            settled_at: None,
        }
        .with_counts(c)
    }

    #[test]
    fn callback_payloads_carry_counts_and_failed_ids() {
        let b = batch(counts(2, 1, 0));
        assert_eq!((b.total, b.done), (3, 3));
        let out = callbacks_to_enqueue(&b, &[42]);
        // succeeded is not due (one discarded); cancelled has no spec.
        assert_eq!(
            out.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            ["completed", "discarded"]
        );
        assert_eq!(out[0].1.payload["to"], "ops");
        assert_eq!(out[0].1.payload["batch"]["completed"], 2);
        assert_eq!(out[1].1.payload["batch"]["failed_ids"], json!([42]));
        assert_eq!(out[1].1.payload["batch"]["callback"], "discarded");
        let many: Vec<i64> = (0..5000).collect();
        let out = callbacks_to_enqueue(&b, &many);
        assert_eq!(
            out[1].1.payload["batch"]["failed_ids"]
                .as_array()
                .unwrap()
                .len(),
            MAX_FAILED_IDS
        );
    }

    #[test]
    fn specs_are_checked() {
        let ok = NewBatch {
            tasks: vec![NewTask::new("k", Value::Null)],
            ..Default::default()
        };
        assert!(check(&ok).is_ok());
        assert!(check(&NewBatch::default()).unwrap_err().contains("open"));
        assert!(check(&NewBatch {
            open: true,
            ..Default::default()
        })
        .is_ok());
        let mut b = ok.clone();
        b.tasks[0].unique_key = Some("u".into());
        assert!(check(&b).unwrap_err().contains("tasks[0]"));
        let mut b = ok.clone();
        b.callbacks.succeeded = Some(NewTask::new("k", json!([1])));
        assert!(check(&b)
            .unwrap_err()
            .contains("callbacks.succeeded.payload"));
        let mut b = ok.clone();
        b.callbacks.completed = Some(NewTask {
            run_at: Some(crate::time::min()),
            ..NewTask::new("k", Value::Null)
        });
        assert!(check(&b).unwrap_err().contains("run_in"));
        let mut b = ok.clone();
        b.name = Some("a\0b".into());
        assert!(check(&b).unwrap_err().contains("name"));
        let mut b = ok;
        b.tasks = vec![NewTask::new("k", Value::Null); MAX_TASKS_PER_REQUEST + 1];
        assert!(check(&b).unwrap_err().contains("at most"));
    }
}
