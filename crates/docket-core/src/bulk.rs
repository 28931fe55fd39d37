//! Bulk actions over a filter (issue 27): cancel, retry, run now or delete every task a filter
//! matches — "all 48,210 matching", not a page (River UI acts on a page of 200; Oban Web one
//! by one).
//!
//! A bulk action is itself a task (queue [`QUEUE`], kind [`KIND`]): its payload is the
//! [`BulkRequest`], its progress the [`BulkProgress`], so it is claimed under a lease, rescued
//! when its node dies, and worked by one node at a time on a cluster. It walks the matching ids
//! in ascending order in batches of [`BATCH`], only up to the highest id there was when it was
//! asked ([`BulkRequest::max_id`]: tasks enqueued after the confirmation are not touched), and
//! records its cursor after each batch, so a rescued bulk action goes on where it stopped.
//! Each task's change is the single-task action's own rule under the task's lock (a task that
//! moved on meanwhile is skipped, counted in [`BulkProgress::skipped`]).

use crate::api::TaskListParams;
use crate::TaskState;
use serde::{Deserialize, Serialize};

/// The queue bulk actions run in.
pub const QUEUE: &str = "docket:bulk";
/// The kind of a bulk action's task.
pub const KIND: &str = "bulk";
/// Tasks changed per batch (one list, one change per task, one progress write).
pub const BATCH: i64 = 500;
/// Most tasks a filter the kept counts cannot answer is counted to before confirmation
/// (100,000): past it the confirmation says "more than". A count by queue and state comes from
/// the kept counts and is exact at any size.
pub const COUNT_CAP: i64 = 100_000;

/// What a bulk action does to each matching task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "kebab-case")]
pub enum BulkAction {
    /// Cancel unfinished tasks (a running one is asked to stop, as `POST /v1/tasks/{id}/cancel`).
    Cancel,
    /// Run discarded and cancelled tasks again (as `POST /v1/tasks/{id}/retry`).
    Retry,
    /// Make scheduled and retryable tasks available now.
    RunNow,
    /// Delete finished tasks (a live process's tasks stay: its history needs them).
    Delete,
}

impl BulkAction {
    /// Every action.
    pub const ALL: [BulkAction; 4] = [
        BulkAction::Cancel,
        BulkAction::Retry,
        BulkAction::RunNow,
        BulkAction::Delete,
    ];

    /// From its name (`cancel`, `retry`, `run-now`, `delete`).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == s)
    }

    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            BulkAction::Cancel => "cancel",
            BulkAction::Retry => "retry",
            BulkAction::RunNow => "run-now",
            BulkAction::Delete => "delete",
        }
    }

    /// The states a task must be in for this action to change it — the single-task actions'
    /// rules (the store's `task_retry` takes discarded and cancelled tasks).
    pub fn states(self) -> &'static [TaskState] {
        use TaskState::*;
        match self {
            BulkAction::Cancel => &[Scheduled, Available, Running, Retryable],
            BulkAction::Retry => &[Discarded, Cancelled],
            BulkAction::RunNow => &[Scheduled, Retryable],
            BulkAction::Delete => &[Completed, Discarded, Cancelled],
        }
    }
}

/// Which tasks a bulk action acts on: the task list's filters an index serves. Text, trace id
/// and worker searches read a bounded window of ids ([`crate::api::TEXT_SEARCH_IDS`]) and are
/// for finding tasks, not for acting on all of them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkFilter {
    /// Only this queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Only these states (empty: every state the action applies to).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub states: Vec<TaskState>,
    /// Only this kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Only this user's tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_id: Option<String>,
    /// Only tasks with this unique key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unique_key: Option<String>,
    /// Only tasks with this concurrency key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_key: Option<String>,
    /// Only tasks with this tag (issue 43).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}

/// Why a bulk request is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BulkError {
    /// A filter field is empty or too long (the message names it).
    Invalid(String),
    /// None of the filter's states is one the action changes.
    NoStates(String),
}

impl std::fmt::Display for BulkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BulkError::Invalid(m) | BulkError::NoStates(m) => f.write_str(m),
        }
    }
}

/// Longest filter value accepted (bytes), as the task fields' own limits.
const MAX_VALUE: usize = 1024;

impl BulkFilter {
    /// Checks the filter for `action` and returns the states it acts on: the filter's states
    /// that the action changes (all of them when the filter names none).
    ///
    /// # Errors
    /// [`BulkError::Invalid`] for an empty or over-long value or a NUL byte;
    /// [`BulkError::NoStates`] when no state of the filter is one the action changes (retrying
    /// running tasks).
    pub fn states_for(&self, action: BulkAction) -> Result<Vec<TaskState>, BulkError> {
        for (name, v) in [
            ("queue", &self.queue),
            ("kind", &self.kind),
            ("user_id", &self.user_id),
            ("unique_key", &self.unique_key),
            ("concurrency_key", &self.concurrency_key),
            ("tag", &self.tag),
        ] {
            if let Some(v) = v {
                if v.is_empty() || v.len() > MAX_VALUE || v.contains('\0') {
                    return Err(BulkError::Invalid(format!(
                        "filter.{name} must be 1..={MAX_VALUE} bytes without NUL"
                    )));
                }
            }
        }
        let can = action.states();
        if self.states.is_empty() {
            return Ok(can.to_vec());
        }
        let v: Vec<TaskState> = can
            .iter()
            .copied()
            .filter(|s| self.states.contains(s))
            .collect();
        if v.is_empty() {
            return Err(BulkError::NoStates(format!(
                "{} applies to tasks that are {}; the filter names none of them",
                action.as_str(),
                can.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Ok(v)
    }

    /// True when the kept counts answer how many tasks match (queue and states only).
    pub fn counted_by_state(&self) -> bool {
        self.kind.is_none()
            && self.user_id.is_none()
            && self.unique_key.is_none()
            && self.concurrency_key.is_none()
            && self.tag.is_none()
    }

    /// The list query of one batch: ids past `after`, up to `max_id`, in `states`, ascending.
    pub fn page(&self, states: &[TaskState], after: i64, max_id: i64) -> TaskListParams {
        TaskListParams {
            queue: self.queue.clone(),
            states: states.to_vec(),
            kind: self.kind.clone(),
            user_id: self.user_id.clone(),
            unique_key: self.unique_key.clone(),
            concurrency_key: self.concurrency_key.clone(),
            tag: self.tag.clone(),
            after: Some(after),
            max_id: Some(max_id),
            descending: false,
            limit: BATCH,
            ..Default::default()
        }
    }
}

/// A bulk action's task payload (`POST /v1/tasks/bulk`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct BulkRequest {
    /// What to do.
    pub action: BulkAction,
    /// To which tasks.
    pub filter: BulkFilter,
    /// The highest task id when it was asked: later tasks are not touched.
    pub max_id: i64,
    /// How many matched when it was asked (at most [`COUNT_CAP`] unless counted by state).
    pub total: i64,
    /// True when `total` stopped at [`COUNT_CAP`].
    #[serde(default)]
    pub more: bool,
    /// Who asked (the audit log's actor).
    pub actor: String,
}

/// A bulk action's progress, kept as its task's `progress` after every batch.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct BulkProgress {
    /// The last id looked at (the cursor a rescued bulk action starts after).
    pub after: i64,
    /// Tasks changed.
    pub done: i64,
    /// Tasks that matched but had moved on (finished, retried, deleted) when their turn came.
    pub skipped: i64,
}

impl BulkProgress {
    /// Advances past one batch of `ids` (ascending, as listed): the cursor moves to the last;
    /// returns false when the batch was the last one (shorter than [`BATCH`]).
    pub fn advance(&mut self, ids: &[i64], done: i64) -> bool {
        if let Some(last) = ids.last() {
            self.after = self.after.max(*last);
        }
        self.done = self.done.saturating_add(done);
        self.skipped = self
            .skipped
            .saturating_add((ids.len() as i64).saturating_sub(done).max(0));
        ids.len() as i64 >= BATCH
    }
}

/// A bulk action as `POST /v1/tasks/bulk` and `GET /v1/tasks/bulk/{id}` answer it: read
/// from its task ([`BulkJob::of`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct BulkJob {
    /// The bulk action's task id (its run log is at `GET /v1/tasks/{id}`).
    pub id: i64,
    /// What it does.
    pub action: BulkAction,
    /// To which tasks.
    pub filter: BulkFilter,
    /// Its task's state: `available` or `running` while it works, `completed` when done,
    /// `retryable` after a failed batch (it goes on from its cursor), `cancelled`, `discarded`.
    pub state: TaskState,
    /// How many matched when it was asked.
    pub total: i64,
    /// True when more than `total` matched ([`COUNT_CAP`]).
    pub more: bool,
    /// Tasks changed so far.
    pub done: i64,
    /// Matching tasks that had moved on when their turn came.
    pub skipped: i64,
    /// When it was asked.
    #[schema(value_type = String, format = DateTime)]
    pub created_at: crate::Timestamp,
    /// When it finished.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub finished_at: Option<crate::Timestamp>,
    /// The last failure, if any.
    pub error: Option<String>,
}

impl BulkJob {
    /// The bulk action that task `t` is; `None` when it is not one (another queue or kind,
    /// or a payload that is not a [`BulkRequest`]).
    pub fn of(t: &crate::Task) -> Option<BulkJob> {
        if t.queue != QUEUE || t.kind != KIND {
            return None;
        }
        let req: BulkRequest = serde_json::from_value(t.payload.clone()).ok()?;
        // Finished: the result holds the final numbers; else the last progress written.
        let progress: BulkProgress = t
            .result
            .clone()
            .or_else(|| t.progress.clone())
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default();
        Some(BulkJob {
            id: t.id,
            action: req.action,
            filter: req.filter,
            state: t.state,
            total: req.total,
            more: req.more,
            done: progress.done,
            skipped: progress.skipped,
            created_at: t.created_at,
            finished_at: t.finished_at,
            error: t.errors.last().map(|e| e.message.clone()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_round_trip_and_name_their_states() {
        for a in BulkAction::ALL {
            assert_eq!(BulkAction::parse(a.as_str()), Some(a));
            let json = serde_json::to_value(a).unwrap();
            assert_eq!(json, a.as_str());
        }
        assert_eq!(BulkAction::parse("nuke"), None);
        assert!(BulkAction::Delete.states().iter().all(|s| s.is_finished()));
        assert!(BulkAction::Cancel.states().iter().all(|s| !s.is_finished()));
    }

    #[test]
    fn filters_narrow_to_the_actions_states() {
        let f = BulkFilter {
            states: vec![TaskState::Discarded, TaskState::Running],
            ..Default::default()
        };
        assert_eq!(
            f.states_for(BulkAction::Retry).unwrap(),
            vec![TaskState::Discarded]
        );
        let running = BulkFilter {
            states: vec![TaskState::Running],
            ..Default::default()
        };
        assert!(matches!(
            running.states_for(BulkAction::Retry),
            Err(BulkError::NoStates(_))
        ));
        assert_eq!(
            BulkFilter::default()
                .states_for(BulkAction::RunNow)
                .unwrap(),
            vec![TaskState::Scheduled, TaskState::Retryable]
        );
        for bad in ["", "a\0b", &"x".repeat(2000)] {
            let f = BulkFilter {
                queue: Some(bad.to_string()),
                ..Default::default()
            };
            assert!(matches!(
                f.states_for(BulkAction::Cancel),
                Err(BulkError::Invalid(_))
            ));
        }
        assert!(f.counted_by_state());
        let k = BulkFilter {
            kind: Some("k".into()),
            ..Default::default()
        };
        assert!(!k.counted_by_state());
        let p = k.page(&[TaskState::Discarded], 7, 99);
        assert_eq!(
            (p.after, p.max_id, p.limit, p.descending),
            (Some(7), Some(99), BATCH, false)
        );
    }

    #[test]
    fn progress_moves_the_cursor_and_stops_on_a_short_batch() {
        let mut p = BulkProgress::default();
        let full: Vec<i64> = (1..=BATCH).collect();
        assert!(p.advance(&full, BATCH - 2));
        assert_eq!((p.after, p.done, p.skipped), (BATCH, BATCH - 2, 2));
        assert!(!p.advance(&[BATCH + 5], 1));
        assert_eq!((p.after, p.done, p.skipped), (BATCH + 5, BATCH - 1, 2));
        assert!(!p.advance(&[], 0));
        assert_eq!(p.after, BATCH + 5);
    }
}
