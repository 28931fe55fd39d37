//! Schedules: a task template enqueued on a repeat interval or a cron expression.
//!
//! Occurrences and missed runs. A schedule keeps `next_run_at`, the occurrence it fires next.
//! When a node fires it (at or after that time) it enqueues ONE task for it and moves
//! `next_run_at` to the first occurrence after *now*: occurrences missed while every node was
//! down are not replayed — at most one catch-up run, then the schedule is back on its times.
//! The move is a compare-and-set on `next_run_at` in the same transaction as the insert, so
//! with any number of nodes each occurrence is enqueued exactly once; the task also carries
//! the unique key `schedule:NAME:OCCURRENCE` (RFC 3339).
//!
//! Repeat follows pg_task's `repeat`/`drift` (seed 004): on the grid `start + k·every` by
//! default, or `every` after the moment it fired with `drift`, or — `after_end` — `every` after
//! the previous run's task finished (node-daemons' worker sleeps after a run ends): such a
//! schedule fires nothing while its last task is unfinished.

use crate::task::NewTask;
use crate::Timestamp;
use chrono::{DateTime, TimeZone, Utc};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Shortest `every` of a schedule: 1 s (a shorter one floods the table: `"1ns"` made 5,000
/// tasks in 10 s).
pub const MIN_EVERY: Duration = Duration::from_secs(1);

/// Longest accepted schedule name (characters).
pub const MAX_SCHEDULE_NAME: usize = 200;

/// A schedule as created: JSON shape of `POST /v1/schedules`. Exactly one of `every` and
/// `cron` is given.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSpec {
    /// Unique name (letters, digits, `_ - . :`).
    #[schema(min_length = 1, max_length = 200, pattern = "^[A-Za-z0-9_.:-]+$")]
    pub name: String,
    /// The task enqueued at each occurrence (`POST /v1/tasks`'s shape; its `run_at`/`run_in`
    /// are ignored, its `unique_key` defaults to `schedule:NAME:OCCURRENCE`).
    pub task: NewTask,
    /// Repeat interval (humantime: "30s", "5m").
    #[serde(
        default,
        with = "crate::duration::serde_opt",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, example = "30s")]
    pub every: Option<Duration>,
    /// With `every`: the next run is `every` after the moment it fired instead of on the
    /// grid of `start_at` (pg_task's `drift`) [false].
    #[serde(default)]
    pub drift: bool,
    /// With `every`: the next run is `every` after the previous run's task finished
    /// (completed, discarded or cancelled), and none starts while it is unfinished
    /// (node-daemons' worker sleeps after its run ends) [false].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub after_end: bool,
    /// Cron expression: 5 fields (minute hour day-of-month month day-of-week), or 6 with
    /// seconds first; `@hourly`-style aliases; croner's `L`, `#`, `W`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// IANA time zone the cron expression is read in ("Europe/Berlin") [UTC].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
    /// First occurrence of an `every` schedule, and the origin of its grid [now].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub start_at: Option<Timestamp>,
}

impl ScheduleSpec {
    /// Checks the spec and the task template.
    ///
    /// # Errors
    /// A message naming the bad field.
    pub fn validate(&self) -> Result<(), String> {
        let ok = |c: char| c.is_ascii_alphanumeric() || "_-.:".contains(c);
        if self.name.is_empty() || self.name.len() > MAX_SCHEDULE_NAME || !self.name.chars().all(ok)
        {
            return Err(format!(
                "name must be 1..{MAX_SCHEDULE_NAME} letters, digits or _-.: characters"
            ));
        }
        match (&self.every, &self.cron) {
            (Some(_), Some(_)) => return Err("give either every or cron, not both".into()),
            (None, None) => return Err("every or cron is required".into()),
            (Some(e), None) if *e < MIN_EVERY => {
                return Err(format!(
                    "every must be at least 1s, got {}",
                    crate::duration::format(*e)
                ))
            }
            (Some(_), None) if self.timezone.is_some() => {
                return Err("timezone applies to cron only".into())
            }
            (None, Some(_)) if self.drift || self.start_at.is_some() || self.after_end => {
                return Err("drift, after_end and start_at apply to every only".into())
            }
            (Some(_), None) if self.drift && self.after_end => {
                return Err("give drift or after_end, not both".into())
            }
            _ => {}
        }
        if self.cron.is_some() {
            self.cron_parts()?;
        }
        if let Some(t) = self.start_at {
            crate::time::check("start_at", t)?;
        }
        if self.task.debounce.is_some() {
            return Err("task.debounce: a schedule's tasks do not debounce (each occurrence has its own unique_key)".into());
        }
        let now = Utc::now();
        self.task_for(now)
            .resolve(None, &crate::TaskDefaults::default(), now)
            .map(|_| ())
            .map_err(|e| format!("task: {e}"))
    }

    fn cron_parts(&self) -> Result<(croner::Cron, chrono_tz::Tz), String> {
        let expr = self.cron.as_deref().unwrap_or_default();
        let cron = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Optional)
            .build()
            .parse(expr)
            .map_err(|e| format!("cron {expr:?}: {e}"))?;
        let tz = match &self.timezone {
            None => chrono_tz::UTC,
            Some(z) => z
                .parse::<chrono_tz::Tz>()
                .map_err(|_| format!("unknown time zone {z:?}"))?,
        };
        Ok((cron, tz))
    }

    /// The first occurrence of a new schedule created at `now`.
    ///
    /// # Errors
    /// The spec is invalid, or the cron expression never matches.
    pub fn first_occurrence(&self, now: Timestamp) -> Result<Timestamp, String> {
        match self.every {
            Some(_) => Ok(self.start_at.unwrap_or(now)),
            None => self.cron_after(now, true),
        }
    }

    /// The next occurrence after the one at `fired` (which was fired at `now`): strictly after
    /// `now`, so missed occurrences are skipped.
    ///
    /// # Errors
    /// The spec is invalid, or the cron expression never matches again.
    pub fn next_after(&self, fired: Timestamp, now: Timestamp) -> Result<Timestamp, String> {
        match self.every {
            Some(every) => {
                if self.drift || self.after_end {
                    // after_end: a lower bound — the run cannot end before it starts; when it
                    // comes, `after_end_step` looks at the run.
                    return Ok(crate::time::add(now, every));
                }
                // Whole steps of the grid past `now`, in µs (saturating: `every` is at most
                // 100 years, the gap at most ~8,000 years).
                let step = u64::try_from(every.as_micros()).unwrap_or(u64::MAX).max(1);
                let behind =
                    u64::try_from(crate::time::since(now, fired).as_micros()).unwrap_or(u64::MAX);
                let k = (behind / step).saturating_add(1);
                Ok(crate::time::add(
                    fired,
                    Duration::from_micros(step.saturating_mul(k)),
                ))
            }
            None => self.cron_after(now, false),
        }
    }

    fn cron_after(&self, t: Timestamp, inclusive: bool) -> Result<Timestamp, String> {
        let (cron, tz) = self.cron_parts()?;
        let local: DateTime<chrono_tz::Tz> = tz.from_utc_datetime(&t.naive_utc());
        let next = cron
            .find_next_occurrence(&local, inclusive)
            .map_err(|e| format!("cron {:?} has no next time: {e}", cron.pattern.to_string()))?;
        Ok(next.with_timezone(&Utc))
    }

    /// The task for the occurrence at `occurrence`, fired at `now`: runs now, unique per
    /// occurrence unless the template sets its own key.
    pub fn task_for(&self, occurrence: Timestamp) -> NewTask {
        let mut t = self.task.clone();
        t.run_at = None;
        t.run_in = None;
        if t.unique_key.is_none() {
            t.unique_key = Some(format!(
                "schedule:{}:{}",
                self.name,
                occurrence.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
            ));
        }
        t
    }
}

/// Where an `after_end` schedule's last run is, as the engine read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LastRun {
    /// No task to wait for: never fired, or its task is gone (pruned, deleted).
    None,
    /// Its task has not finished.
    Unfinished,
    /// Its task finished then.
    Finished(Timestamp),
}

/// What a due `after_end` schedule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterEndStep {
    /// Fire now.
    Fire,
    /// Look again then (its run is unfinished, or ended less than `every` ago).
    WaitUntil(Timestamp),
}

/// While an `after_end` schedule's run is unfinished, it looks again this often at most.
pub const AFTER_END_POLL: Duration = Duration::from_secs(1);

impl ScheduleSpec {
    /// The step of a due `after_end` schedule at `now`: fire once its last run finished
    /// `every` ago; else wait until then, or look again within [`AFTER_END_POLL`] (or `every`,
    /// if shorter) while the run is unfinished.
    pub fn after_end_step(&self, last: LastRun, now: Timestamp) -> AfterEndStep {
        let every = self.every.unwrap_or(MIN_EVERY);
        match last {
            LastRun::None => AfterEndStep::Fire,
            LastRun::Unfinished => {
                AfterEndStep::WaitUntil(crate::time::add(now, every.min(AFTER_END_POLL)))
            }
            LastRun::Finished(f) => {
                let due = crate::time::add(f, every);
                if due <= now {
                    AfterEndStep::Fire
                } else {
                    AfterEndStep::WaitUntil(due)
                }
            }
        }
    }
}

/// A stored schedule: JSON shape of `GET /v1/schedules/{name}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct Schedule {
    /// What was created.
    #[serde(flatten)]
    #[schema(inline)]
    pub spec: ScheduleSpec,
    /// Paused schedules fire nothing; resuming starts from the next occurrence after then.
    pub paused: bool,
    /// The occurrence fired next.
    #[schema(value_type = String, format = DateTime)]
    pub next_run_at: Timestamp,
    /// When the last occurrence was fired.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub last_run_at: Option<Timestamp>,
    /// The task enqueued by the last occurrence.
    pub last_task_id: Option<i64>,
    /// Created.
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Timestamp,
    /// Last changed.
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(h: u32, m: u32, s: u32) -> Timestamp {
        Utc.with_ymd_and_hms(2026, 11, 22, h, m, s).unwrap()
    }

    fn spec(every: Option<u64>, cron: Option<&str>) -> ScheduleSpec {
        ScheduleSpec {
            name: "s".into(),
            task: NewTask::new("k", serde_json::Value::Null),
            every: every.map(Duration::from_secs),
            drift: false,
            after_end: false,
            cron: cron.map(String::from),
            timezone: None,
            start_at: None,
        }
    }

    #[test]
    fn every_stays_on_its_grid_and_skips_missed_runs() {
        let s = spec(Some(60), None);
        assert_eq!(s.first_occurrence(at(10, 0, 0)).unwrap(), at(10, 0, 0));
        // Fired a little late: the next is still on the grid.
        assert_eq!(
            s.next_after(at(10, 0, 0), at(10, 0, 3)).unwrap(),
            at(10, 1, 0)
        );
        // Fired 5.5 minutes late (the node was down): one run now, then back on the grid.
        assert_eq!(
            s.next_after(at(10, 0, 0), at(10, 5, 30)).unwrap(),
            at(10, 6, 0)
        );
        let d = ScheduleSpec { drift: true, ..s };
        assert_eq!(
            d.next_after(at(10, 0, 0), at(10, 5, 30)).unwrap(),
            at(10, 6, 30)
        );
    }

    #[test]
    fn after_end_counts_from_the_end_of_the_last_run() {
        let s = ScheduleSpec {
            after_end: true,
            ..spec(Some(60), None)
        };
        assert!(s.validate().is_ok());
        let now = at(10, 0, 0);
        assert_eq!(s.after_end_step(LastRun::None, now), AfterEndStep::Fire);
        assert_eq!(
            s.after_end_step(LastRun::Unfinished, now),
            AfterEndStep::WaitUntil(at(10, 0, 1))
        );
        assert_eq!(
            s.after_end_step(LastRun::Finished(at(9, 59, 30)), now),
            AfterEndStep::WaitUntil(at(10, 0, 30))
        );
        assert_eq!(
            s.after_end_step(LastRun::Finished(at(9, 59, 0)), now),
            AfterEndStep::Fire
        );
        assert_eq!(s.next_after(at(9, 0, 0), now).unwrap(), at(10, 1, 0));
        let both = ScheduleSpec {
            drift: true,
            ..s.clone()
        };
        assert!(both.validate().unwrap_err().contains("not both"));
        let cron = ScheduleSpec {
            after_end: true,
            ..spec(None, Some("* * * * *"))
        };
        assert!(cron.validate().unwrap_err().contains("every only"));
    }

    #[test]
    fn cron_with_optional_seconds_and_time_zone() {
        let s = spec(None, Some("*/15 * * * *"));
        assert_eq!(s.first_occurrence(at(10, 7, 0)).unwrap(), at(10, 15, 0));
        assert_eq!(
            s.next_after(at(10, 15, 0), at(10, 15, 0)).unwrap(),
            at(10, 30, 0)
        );
        assert_eq!(
            s.next_after(at(10, 15, 0), at(11, 2, 0)).unwrap(),
            at(11, 15, 0)
        );
        let secs = spec(None, Some("*/10 * * * * *"));
        assert_eq!(
            secs.next_after(at(10, 0, 0), at(10, 0, 1)).unwrap(),
            at(10, 0, 10)
        );
        // 09:00 in Berlin is 08:00 UTC in November (CET, UTC+1).
        let berlin = ScheduleSpec {
            timezone: Some("Europe/Berlin".into()),
            ..spec(None, Some("0 9 * * *"))
        };
        assert_eq!(berlin.first_occurrence(at(7, 0, 0)).unwrap(), at(8, 0, 0));
    }

    #[test]
    fn bad_specs_are_refused() {
        assert!(spec(None, None).validate().is_err());
        assert!(spec(Some(5), Some("* * * * *")).validate().is_err());
        assert!(spec(Some(0), None).validate().is_err());
        assert!(spec(None, Some("61 * * * *"))
            .validate()
            .unwrap_err()
            .contains("cron"));
        let tz = ScheduleSpec {
            timezone: Some("Mars/Olympus".into()),
            ..spec(None, Some("* * * * *"))
        };
        assert!(tz.validate().unwrap_err().contains("time zone"));
        let name = ScheduleSpec {
            name: "no spaces".into(),
            ..spec(Some(5), None)
        };
        assert!(name.validate().is_err());
        assert!(spec(Some(5), None).validate().is_ok());
    }

    #[test]
    fn each_occurrence_has_its_own_unique_key() {
        let s = spec(Some(60), None);
        let a = s.task_for(at(10, 0, 0)).unique_key.unwrap();
        let b = s.task_for(at(10, 1, 0)).unique_key.unwrap();
        assert_eq!(a, "schedule:s:2026-11-22T10:00:00.000000Z");
        assert_ne!(a, b);
    }
}
