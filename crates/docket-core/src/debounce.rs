//! Debounce by key (issue 43; graphile-worker's `job_key` with `replace`, Inngest's
//! `debounce`): while a task with the key waits (scheduled or available, never claimed), a new
//! enqueue with the key replaces that task's payload and other fields and moves its `run_at` to
//! now + `period`, never past the first enqueue + `max_wait`. Once the task has been claimed,
//! the next enqueue makes a new task. The rules here are the only place these times are
//! computed; the store keeps one waiting task per key with a unique index.

use crate::Timestamp;
use chrono::SubsecRound;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Longest `period` and `max_wait`: 30 days (as a task's timeout). A debounce meant to wait
/// longer is a schedule.
pub const MAX_WAIT: Duration = crate::duration::MAX_TIMEOUT;

/// `debounce` of `POST /v1/tasks`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Debounce {
    /// The key: 1..=256 characters, no control characters. One waiting task per key, across
    /// queues and kinds.
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$"
    )]
    pub key: String,
    /// Quiet time: the task runs this long after the last enqueue with its key (humantime,
    /// 1 ms..=30 days).
    #[serde(with = "crate::duration::serde_str")]
    #[schema(value_type = String, example = "5s")]
    pub period: Duration,
    /// The task runs at most this long after the enqueue that created it, however often it is
    /// replaced (humantime, 1 ms..=30 days). Default: no bound.
    #[serde(
        default,
        with = "crate::duration::serde_opt",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, example = "1m")]
    pub max_wait: Option<Duration>,
}

impl Debounce {
    /// Checks the key and both durations.
    ///
    /// # Errors
    /// A message naming the field (`debounce.key`, `debounce.period`, `debounce.max_wait`).
    pub fn validate(&self) -> Result<(), String> {
        crate::name::check_name("debounce.key", &self.key)?;
        let min = Duration::from_millis(1);
        crate::duration::check_range("debounce.period", self.period, min, MAX_WAIT)?;
        if let Some(w) = self.max_wait {
            crate::duration::check_range("debounce.max_wait", w, min, MAX_WAIT)?;
        }
        Ok(())
    }

    /// The latest `run_at` the task may get, fixed by the enqueue that creates it at `now`:
    /// `now + max_wait` (microseconds, as stored), or none.
    pub fn deadline(&self, now: Timestamp) -> Option<Timestamp> {
        self.max_wait
            .map(|w| crate::time::add(now, w).trunc_subsecs(6))
    }

    /// The `run_at` an enqueue at `now` gives the waiting task: `now + period`, but not past
    /// `deadline` (the task's, from [`Debounce::deadline`] of the enqueue that created it).
    pub fn run_at(&self, now: Timestamp, deadline: Option<Timestamp>) -> Timestamp {
        let t = crate::time::add(now, self.period).trunc_subsecs(6);
        match deadline {
            Some(d) if d < t => d,
            _ => t,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn d(key: &str, period_ms: u64, max_wait_ms: Option<u64>) -> Debounce {
        Debounce {
            key: key.into(),
            period: Duration::from_millis(period_ms),
            max_wait: max_wait_ms.map(Duration::from_millis),
        }
    }

    #[test]
    fn run_at_moves_with_each_enqueue_but_not_past_the_deadline() {
        let t0 = chrono::Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let b = d("k", 5_000, Some(12_000));
        let deadline = b.deadline(t0);
        assert_eq!(deadline, Some(crate::time::add(t0, s(12))));
        assert_eq!(b.run_at(t0, deadline), crate::time::add(t0, s(5)));
        let t4 = crate::time::add(t0, s(4));
        assert_eq!(b.run_at(t4, deadline), crate::time::add(t0, s(9)));
        let t9 = crate::time::add(t0, s(9));
        assert_eq!(b.run_at(t9, deadline), crate::time::add(t0, s(12)));
        // No max_wait: each enqueue moves it on.
        let free = d("k", 5_000, None);
        assert_eq!(free.deadline(t0), None);
        assert_eq!(free.run_at(t9, None), crate::time::add(t9, s(5)));
        // A max_wait shorter than the period: the first run_at is the deadline.
        let short = d("k", 5_000, Some(1_000));
        assert_eq!(
            short.run_at(t0, short.deadline(t0)),
            crate::time::add(t0, s(1))
        );
    }

    #[test]
    fn worst_values_are_refused_and_time_never_panics() {
        assert!(d("k", 1, Some(1)).validate().is_ok());
        for (b, field) in [
            (d("", 5, None), "debounce.key"),
            (d("a\u{0}b", 5, None), "debounce.key"),
            (d(&"k".repeat(257), 5, None), "debounce.key"),
            (d("k", 0, None), "debounce.period"),
            (d("k", 31 * 86_400_000, None), "debounce.period"),
            (d("k", 5, Some(0)), "debounce.max_wait"),
            (
                d("k", 5, Some(1000 * 365 * 86_400_000)),
                "debounce.max_wait",
            ),
        ] {
            let e = b.validate().unwrap_err();
            assert!(e.contains(field), "{e}");
        }
        let huge = d("k", u64::MAX / 2, Some(u64::MAX / 2));
        let end = crate::time::max();
        let _ = huge.run_at(end, huge.deadline(end));
    }
}
