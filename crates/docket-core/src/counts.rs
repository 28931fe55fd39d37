//! Queue counts that stay cheap however much history is kept (issue 27).
//!
//! Counting the finished tasks of a queue costs a scan of them: about a second at 10 million
//! on PostgreSQL. So the counts by queue and state are kept in two parts:
//!
//! - **Unfinished states** (scheduled, available, running, retryable) are counted exactly at
//!   every read: they live in the hot partition (PostgreSQL), the hot table (MariaDB) or behind
//!   partial indexes (SQLite), whose size is the backlog, not the history.
//! - **Finished states** (completed, discarded, cancelled) are a kept count per queue and state
//!   (`docket_queue_counts`) valid up to a time `counted_to`, plus, at each read, the finished
//!   tasks with `finished_at > counted_to` counted exactly (a range of the `finished_at`
//!   index: the last few seconds). A maintenance step ([`advance`]) moves `counted_to` to
//!   `now - LAG` every [`ADVANCE_EVERY`], adding what finished in between; pruning subtracts
//!   what it deletes ([`forgotten`]), in its own transaction, under the same lock.
//!
//! How exact: exact, except that (1) a task finished with a `finished_at` already behind
//! `counted_to` when its transaction committed (a completion whose transaction took longer
//! than [`LAG`], or a node whose clock is more than [`LAG`] behind) is not counted, and (2) a
//! finished task moved back to an unfinished state by a workflow retry still counts in its
//! finished state, until the next full recount ([`RECOUNT_EVERY`]), which counts everything
//! again and repairs both. A task retried by itself (`task_retry`, one by one or in bulk) is
//! subtracted in the retry's own transaction, under the counts' lock.

use crate::{TaskState, Timestamp};
use std::collections::BTreeMap;
use std::time::Duration;

/// How far behind the clock `counted_to` stays: finished tasks whose transactions are still
/// in flight, or whose node's clock is slightly behind, land after it and are counted (2 s).
pub const LAG: Duration = Duration::from_secs(2);

/// How often a node moves `counted_to` forward (1 s): what each read counts beyond the kept
/// counts is about `LAG + ADVANCE_EVERY` of finished tasks.
pub const ADVANCE_EVERY: Duration = Duration::from_secs(1);

/// How often the kept counts are recounted from scratch (1 h): the repair of the two
/// inexactnesses in this module's doc. A recount at 10 million finished tasks takes about a
/// second on PostgreSQL, holding only the counts' lock.
pub const RECOUNT_EVERY: Duration = Duration::from_secs(3600);

/// How long finished tasks per queue and minute are kept (25 h): the overview's charts show
/// the last hour and the last day.
pub const MINUTES_KEPT: Duration = Duration::from_secs(25 * 3600);

/// The range of `finished_at` a step adds to the per-minute counts: (`from`, `to`] where
/// `from` is the old `counted_to`, but no further back than [`MINUTES_KEPT`] (a first recount
/// of years of history fills only the minutes kept). Also the cutoff below which minutes are
/// deleted: `to - MINUTES_KEPT`.
pub fn minutes(counted_to: Timestamp, to: Timestamp) -> (Timestamp, Timestamp) {
    let floor = crate::time::sub(to, MINUTES_KEPT);
    (counted_to.max(floor), floor)
}

/// The kept counts' position before anything was counted: 1970, so the first advance counts
/// every finished task there is.
pub fn origin() -> Timestamp {
    Timestamp::UNIX_EPOCH
}

/// Where one advance at `now` moves `counted_to` (from `from`): `now - LAG`, never backwards
/// (a node whose clock is behind must not uncount). `None`: nothing to do.
pub fn advance(from: Timestamp, now: Timestamp) -> Option<Timestamp> {
    let to = crate::time::sub(now, LAG);
    (to > from).then_some(to)
}

/// One step of the kept counts, decided from what the lock read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// Count finished tasks with `finished_at` in (`from`, `to`]; `from` is `None` for a full
    /// recount (everything up to `to`, replacing the kept counts).
    pub from: Option<Timestamp>,
    /// The new `counted_to`.
    pub to: Timestamp,
}

/// The step at `now`, given the kept `counted_to` and when the counts were last recounted from
/// scratch (`None`: never): a full recount when the last is older than `recount_every` (the
/// first step of a database is one), else an [`advance`]; `None` when the clock has not moved
/// past `counted_to + LAG`.
pub fn step(
    counted_to: Timestamp,
    recounted_at: Option<Timestamp>,
    now: Timestamp,
    recount_every: Duration,
) -> Option<Step> {
    let due = recounted_at.is_none_or(|r| crate::time::add(r, recount_every) <= now);
    if due {
        // Never backwards: a recount by a node whose clock is behind still covers what the
        // reads no longer count beyond `counted_to`.
        let to = crate::time::sub(now, LAG).max(counted_to);
        return Some(Step { from: None, to });
    }
    advance(counted_to, now).map(|to| Step {
        from: Some(counted_to),
        to,
    })
}

/// What deleting finished tasks takes from the kept counts: those of `rows` (queue, state,
/// `finished_at`) already counted, i.e. finished at or before `counted_to`; the others were
/// never added and the reads stop seeing them by themselves. Unfinished states and rows
/// without `finished_at` are ignored.
pub fn forgotten<'a>(
    rows: impl IntoIterator<Item = (&'a str, TaskState, Option<Timestamp>)>,
    counted_to: Timestamp,
) -> BTreeMap<(String, TaskState), i64> {
    let mut out = BTreeMap::new();
    for (queue, state, finished_at) in rows {
        if state.is_finished() && finished_at.is_some_and(|t| t <= counted_to) {
            *out.entry((queue.to_string(), state)).or_insert(0) += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t(s: i64) -> Timestamp {
        chrono::Utc.timestamp_opt(s, 0).unwrap()
    }

    #[test]
    fn advance_moves_forward_only() {
        assert_eq!(advance(origin(), t(100)), Some(t(98)));
        assert_eq!(advance(t(98), t(100)), None);
        // A node whose clock is behind the last advance does nothing.
        assert_eq!(advance(t(98), t(99)), None);
        // The worst clock does not panic.
        assert_eq!(advance(origin(), Timestamp::MIN_UTC), None);
    }

    #[test]
    fn steps_recount_when_due_and_advance_otherwise() {
        let hour = Duration::from_secs(3600);
        // A new database: a full recount.
        assert_eq!(
            step(origin(), None, t(100), hour),
            Some(Step {
                from: None,
                to: t(98)
            })
        );
        assert_eq!(
            step(t(98), Some(t(100)), t(105), hour),
            Some(Step {
                from: Some(t(98)),
                to: t(103)
            })
        );
        assert_eq!(step(t(103), Some(t(100)), t(104), hour), None);
        // An hour after the last recount, the next one; never behind counted_to.
        assert_eq!(
            step(t(4000), Some(t(100)), t(3700), hour),
            Some(Step {
                from: None,
                to: t(4000)
            })
        );
        assert_eq!(step(t(98), Some(Timestamp::MAX_UTC), t(100), hour), None);
    }

    #[test]
    fn minutes_cover_what_the_step_adds_within_a_day() {
        let day = 25 * 3600;
        assert_eq!(
            minutes(t(2 * day + 100), t(2 * day + 200)),
            (t(2 * day + 100), t(day + 200))
        );
        // Never before 1970 (time::sub's floor).
        assert_eq!(minutes(t(100), t(200)), (t(100), origin()));
        assert_eq!(
            minutes(origin(), t(10 * day)),
            (t(9 * day), t(9 * day)),
            "a first recount fills the minutes kept only"
        );
    }

    #[test]
    fn only_counted_rows_are_forgotten() {
        let rows = [
            ("a", TaskState::Completed, Some(t(10))),
            ("a", TaskState::Completed, Some(t(20))),
            ("a", TaskState::Discarded, Some(t(20))),
            // After counted_to: never added.
            ("a", TaskState::Completed, Some(t(21))),
            ("b", TaskState::Cancelled, Some(t(5))),
            ("b", TaskState::Available, Some(t(5))),
            ("b", TaskState::Completed, None),
        ];
        let f = forgotten(rows, t(20));
        assert_eq!(
            f.into_iter().collect::<Vec<_>>(),
            vec![
                (("a".into(), TaskState::Completed), 2),
                (("a".into(), TaskState::Discarded), 1),
                (("b".into(), TaskState::Cancelled), 1),
            ]
        );
    }
}
