//! Rate limits (issue 26 item 3): named limits that tasks name in `rate_limit`, enforced
//! cluster-wide when tasks are claimed. The kinds are Sidekiq Enterprise's limiters, and the
//! partitioned key is Oban Pro's `rate_limit: [partition: …]` / Sidekiq's dynamic names
//! (`"stripe-#{user}"`):
//!
//! - `window`: at most `limit` admissions in each fixed window of `period`, windows aligned to
//!   multiples of `period` since the Unix epoch (Sidekiq's window limiter). One counter per key
//!   and no log of admissions; the price is that a burst may straddle a window boundary (up to
//!   2 × `limit` within one `period` that spans two windows).
//! - `bucket`: a token bucket of `limit` tokens refilled evenly, `limit` per `period` (Sidekiq's
//!   bucket and leaky limiters, Oban's rate limit), kept as GCRA: one timestamp per key, the
//!   theoretical arrival time, so no refill loop runs and a full bucket allows a burst of `limit`.
//! - `concurrent`: at most `limit` of the key's tasks running at once (Sidekiq's concurrent
//!   limiter, River Pro's concurrency limits); `period` is not used.
//!
//! A task's `rate_limit` is a key: the limit's name, or `name:partition` for one budget per
//! partition under the named limit (`"stripe:customer-42"`). The store keeps one [`KeyState`]
//! per key; the rules here say how many of a key's tasks a claim may take now ([`RateLimit::room`]),
//! what the state becomes after it took some ([`RateLimit::take`]), and until when the key's
//! tasks need not be looked at ([`RateLimit::blocked_until`]). Tasks over the limit stay
//! `available` and spend no attempt.

use crate::Timestamp;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Largest `limit`.
pub const MAX_LIMIT: i64 = 1_000_000;
/// Shortest `period` of a window or bucket limit.
pub const MIN_PERIOD: Duration = Duration::from_millis(1);
/// Longest `period` (one year).
pub const MAX_PERIOD: Duration = Duration::from_secs(366 * 86_400);
/// Longest limit name (characters).
pub const MAX_NAME: usize = 100;
/// Longest task `rate_limit` key (characters), name and partition together.
pub const MAX_KEY: usize = 256;

/// How a limit counts (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// `limit` per fixed window of `period`.
    Window,
    /// A token bucket: bursts of up to `limit`, `limit` per `period` on average (GCRA).
    Bucket,
    /// At most `limit` running at once.
    Concurrent,
}

impl Kind {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Window => "window",
            Kind::Bucket => "bucket",
            Kind::Concurrent => "concurrent",
        }
    }

    /// The kind named `s`.
    ///
    /// # Errors
    /// An unknown name.
    pub fn parse(s: &str) -> Result<Kind, String> {
        match s {
            "window" => Ok(Kind::Window),
            "bucket" => Ok(Kind::Bucket),
            "concurrent" => Ok(Kind::Concurrent),
            _ => Err(format!(
                "kind must be window, bucket or concurrent, got {s:?}"
            )),
        }
    }
}

/// The body of `PUT /v1/rate-limits/{name}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimitSpec {
    /// How it counts.
    pub kind: Kind,
    /// Admissions per period (window, bucket) or tasks running at once (concurrent),
    /// 1..=1,000,000.
    #[schema(minimum = 1, maximum = 1000000)]
    pub limit: i64,
    /// The window or refill period, 1 ms..=366 days, as humantime (`"1s"`, `"1m"`); required
    /// for window and bucket, refused for concurrent.
    #[serde(
        default,
        with = "crate::duration::serde_opt",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, example = "1s")]
    pub period: Option<Duration>,
}

/// A named limit as stored, with what it did (`GET /v1/rate-limits`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RateLimit {
    /// Its name: what tasks put in `rate_limit`, before an optional `:partition`.
    pub name: String,
    /// How it counts.
    pub kind: Kind,
    /// Admissions per period, or running at once.
    pub limit: i64,
    /// Window or refill period (absent for concurrent).
    #[serde(
        default,
        with = "crate::duration::serde_opt",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, example = "1s")]
    pub period: Option<Duration>,
    /// When it was created.
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Timestamp,
    /// When it was last changed.
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: Timestamp,
    /// Keys seen (the name itself and each partition), cluster-wide.
    #[serde(default)]
    pub keys: i64,
    /// Tasks admitted by claims, cluster-wide, since the limit was created.
    #[serde(default)]
    pub admitted: i64,
    /// Claims that met one of its keys at the limit (they passed over some of the key's tasks,
    /// or took the last admission of its window, bucket or concurrency): each held the key's
    /// other tasks back. Once per claim and key; how many tasks waited is not counted (claims
    /// skip a blocked key's tasks without reading them).
    #[serde(default)]
    pub delayed: i64,
    /// Keys at the limit now (claims skip their tasks until `blocked_until`).
    #[serde(default)]
    pub blocked: i64,
}

/// The answer of `GET /v1/rate-limits`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RateLimitList {
    /// Every limit, by name.
    pub rate_limits: Vec<RateLimit>,
}

/// What the store keeps per key: `at` is the start of the current window (window) or the
/// theoretical arrival time (bucket); `used` the admissions in that window (window).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KeyState {
    /// Window start, or GCRA's theoretical arrival time; None before the first admission.
    pub at: Option<Timestamp>,
    /// Admissions in the window at `at` (window only).
    pub used: i64,
}

/// Checks a limit's name: 1..=100 characters, letters, digits and `_ - .` (no `:`, which
/// separates a partition).
///
/// # Errors
/// A message naming what is wrong.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.chars().count() > MAX_NAME {
        return Err(format!(
            "a rate limit's name must have 1 to {MAX_NAME} characters"
        ));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    {
        return Err(format!(
            "a rate limit's name may hold letters, digits, '_', '-' and '.', got {name:?}"
        ));
    }
    Ok(())
}

/// Checks a task's `rate_limit` key (`name` or `name:partition`, at most 256 characters, no
/// control characters) and returns the limit's name.
///
/// # Errors
/// A message naming what is wrong.
pub fn check_key(key: &str) -> Result<&str, String> {
    if key.chars().count() > MAX_KEY {
        return Err(format!("rate_limit must have at most {MAX_KEY} characters"));
    }
    if key.chars().any(char::is_control) {
        return Err("rate_limit must not contain control characters".into());
    }
    let name = policy_of(key);
    check_name(name).map_err(|e| format!("rate_limit {key:?}: {e}"))?;
    if key.len() > name.len() + 1 || key.len() == name.len() {
        Ok(name)
    } else {
        Err(format!(
            "rate_limit {key:?}: the partition after ':' is empty"
        ))
    }
}

/// The limit's name in key `key`: what comes before the first `:`.
pub fn policy_of(key: &str) -> &str {
    key.split_once(':').map_or(key, |(n, _)| n)
}

impl RateLimitSpec {
    /// Checks the ranges.
    ///
    /// # Errors
    /// A message naming the bad field.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=MAX_LIMIT).contains(&self.limit) {
            return Err(format!(
                "limit must be between 1 and {MAX_LIMIT}, got {}",
                self.limit
            ));
        }
        match (self.kind, self.period) {
            (Kind::Concurrent, Some(_)) => {
                Err("a concurrent limit takes no period (it counts running tasks)".into())
            }
            (Kind::Concurrent, None) => Ok(()),
            (_, None) => Err(format!("a {} limit needs a period", self.kind.as_str())),
            (_, Some(p)) if p < MIN_PERIOD || p > MAX_PERIOD => Err(format!(
                "period must be between 1ms and 366days, got {}",
                humantime::format_duration(p)
            )),
            _ => Ok(()),
        }
    }
}

fn us(t: Timestamp) -> i64 {
    t.timestamp_micros()
}

fn at_us(v: i64) -> Timestamp {
    chrono::DateTime::from_timestamp_micros(v.clamp(us(crate::time::min()), us(crate::time::max())))
        .unwrap_or_else(crate::time::max)
}

impl RateLimit {
    fn period_us(&self) -> i64 {
        self.period
            .map_or(1, |p| i64::try_from(p.as_micros()).unwrap_or(i64::MAX))
            .max(1)
    }

    /// GCRA's emission interval: one token every `period / limit` (µs, at least 1; rounded
    /// down, so the rate is at most a hair above `limit` per `period`).
    fn interval_us(&self) -> i64 {
        (self.period_us() / self.limit.max(1)).max(1)
    }

    /// The start of the window that holds `now`.
    fn window_start(&self, now: Timestamp) -> i64 {
        let n = us(now);
        n - n.rem_euclid(self.period_us())
    }

    /// The window a claim at `now` counts in, and what it admitted so far: `None` when the key
    /// already counts in a later window. Claims take `now` before they wait for the key's lock,
    /// so one can arrive after another that started a later window; it admits nothing then,
    /// rather than reopen its own (older) window, which the later one already left.
    fn window(&self, s: &KeyState, now: Timestamp) -> Option<(i64, i64)> {
        let start = self.window_start(now);
        match s.at.map(us) {
            Some(at) if at > start => None,
            Some(at) if at == start => Some((start, s.used)),
            _ => Some((start, 0)),
        }
    }

    /// How many of the key's tasks a claim at `now` may take; `running` is how many of them
    /// run now (used by concurrent limits only). Never negative.
    pub fn room(&self, s: &KeyState, now: Timestamp, running: i64) -> i64 {
        let room = match self.kind {
            Kind::Concurrent => self.limit - running,
            Kind::Window => match self.window(s, now) {
                Some((_, used)) => self.limit - used,
                None => 0,
            },
            Kind::Bucket => {
                let t = self.interval_us();
                let tat = s.at.map_or(i64::MIN, us).max(us(now));
                // Tokens left: the burst allowance (limit × T) not yet used up by `tat`.
                let spare = us(now)
                    .saturating_add(self.limit.saturating_mul(t))
                    .saturating_sub(tat);
                spare / t
            }
        };
        room.clamp(0, self.limit)
    }

    /// The key's state after a claim at `now` took `n` of its tasks (n ≤ [`Self::room`]).
    pub fn take(&self, s: &KeyState, now: Timestamp, n: i64) -> KeyState {
        match self.kind {
            Kind::Concurrent => *s,
            Kind::Window => match self.window(s, now) {
                Some((start, used)) => KeyState {
                    at: Some(at_us(start)),
                    used: used.saturating_add(n),
                },
                None => *s,
            },
            Kind::Bucket => {
                let tat = s.at.map_or(i64::MIN, us).max(us(now));
                KeyState {
                    at: Some(at_us(
                        tat.saturating_add(n.saturating_mul(self.interval_us())),
                    )),
                    used: 0,
                }
            }
        }
    }

    /// Until when claims may skip the key's tasks: the first moment the key admits one again,
    /// when it admits none at `now`. None for concurrent limits (a finishing task frees room,
    /// not the clock) and for keys with room.
    pub fn blocked_until(&self, s: &KeyState, now: Timestamp) -> Option<Timestamp> {
        if self.kind == Kind::Concurrent {
            return None;
        }
        if self.kind == Kind::Window {
            // The key's own window (a later one than `now`'s, after a late claim).
            let (start, used) = self.window(s, now).unwrap_or((s.at.map_or(0, us), s.used));
            return (used >= self.limit).then(|| at_us(start.saturating_add(self.period_us())));
        }
        if self.room(s, now, 0) > 0 {
            return None;
        }
        // A bucket: one token back at tat − (limit − 1) × T.
        Some(at_us(s.at.map_or(us(now), us).saturating_sub(
            (self.limit - 1).saturating_mul(self.interval_us()),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn t0() -> Timestamp {
        chrono::Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
    }
    fn ms(t: i64) -> Timestamp {
        crate::time::add_ms(t0(), t)
    }
    fn limit(kind: Kind, limit: i64, period_ms: u64) -> RateLimit {
        RateLimit {
            name: "x".into(),
            kind,
            limit,
            period: (kind != Kind::Concurrent).then(|| Duration::from_millis(period_ms)),
            created_at: t0(),
            updated_at: t0(),
            keys: 0,
            admitted: 0,
            delayed: 0,
            blocked: 0,
        }
    }

    /// Admits greedily every `step_ms` for `total_ms` and returns the admission times.
    fn drive(l: &RateLimit, step_ms: i64, total_ms: i64) -> Vec<i64> {
        let mut s = KeyState::default();
        let mut out = vec![];
        let mut t = 0;
        while t < total_ms {
            let room = l.room(&s, ms(t), 0);
            s = l.take(&s, ms(t), room);
            out.extend(std::iter::repeat_n(t, room as usize));
            t += step_ms;
        }
        out
    }

    #[test]
    fn window_admits_limit_per_window() {
        let l = limit(Kind::Window, 50, 1000);
        let got = drive(&l, 7, 10_000);
        assert_eq!(got.len(), 500);
        for w in 0..10 {
            let n = got.iter().filter(|t| **t / 1000 == w).count();
            assert_eq!(n, 50, "window {w}");
        }
        let mut s = KeyState::default();
        s = l.take(&s, ms(10), 50);
        assert_eq!(l.room(&s, ms(999), 0), 0);
        assert_eq!(l.blocked_until(&s, ms(999)), Some(ms(1000)));
        assert_eq!(l.room(&s, ms(1000), 0), 50);
    }

    #[test]
    fn a_late_claim_does_not_reopen_its_window() {
        let l = limit(Kind::Window, 50, 1000);
        // A claim at 1.001 s opened the second window; one that read the clock at 0.999 s
        // gets the lock after it.
        let s = l.take(&KeyState::default(), ms(1001), 50);
        assert_eq!(l.room(&s, ms(999), 0), 0);
        assert_eq!(l.take(&s, ms(999), 0), s);
        assert_eq!(l.blocked_until(&s, ms(999)), Some(ms(2000)));
        let s = l.take(&KeyState::default(), ms(1001), 10);
        assert_eq!(l.room(&s, ms(999), 0), 0);
        assert_eq!(l.blocked_until(&s, ms(999)), None);
        assert_eq!(l.room(&s, ms(1500), 0), 40);
    }

    #[test]
    fn bucket_allows_a_burst_then_the_rate() {
        let l = limit(Kind::Bucket, 50, 1000);
        let got = drive(&l, 1, 10_000);
        // A burst of 50 at once, then one every 20 ms: 50 + 9,999 / 20.
        assert_eq!(got.iter().filter(|t| **t == 0).count(), 50);
        assert_eq!(got.len(), 50 + 9_999 / 20);
        let mut s = l.take(&KeyState::default(), ms(0), 50);
        assert_eq!(l.room(&s, ms(0), 0), 0);
        assert_eq!(l.blocked_until(&s, ms(0)), Some(ms(20)));
        assert_eq!(l.room(&s, ms(19), 0), 0);
        assert_eq!(l.room(&s, ms(20), 0), 1);
        s = l.take(&s, ms(20), 1);
        assert_eq!(l.room(&s, ms(20), 0), 0);
        // Idle for long: the bucket is full again, never more.
        assert_eq!(l.room(&s, ms(1_000_000), 0), 50);
    }

    #[test]
    fn concurrent_counts_running() {
        let l = limit(Kind::Concurrent, 3, 0);
        let s = KeyState::default();
        assert_eq!(l.room(&s, t0(), 0), 3);
        assert_eq!(l.room(&s, t0(), 2), 1);
        assert_eq!(l.room(&s, t0(), 7), 0);
        assert_eq!(l.blocked_until(&s, t0()), None);
    }

    #[test]
    fn extremes_do_not_panic() {
        for kind in [Kind::Window, Kind::Bucket] {
            for (lim, p) in [
                (1, MAX_PERIOD),
                (MAX_LIMIT, MIN_PERIOD),
                (MAX_LIMIT, MAX_PERIOD),
            ] {
                let mut l = limit(kind, lim, 1);
                l.period = Some(p);
                for now in [crate::time::min(), t0(), crate::time::max()] {
                    let s = KeyState {
                        at: Some(crate::time::max()),
                        used: i64::MAX,
                    };
                    let r = l.room(&s, now, 0);
                    assert!((0..=lim).contains(&r));
                    let s = l.take(&s, now, lim);
                    let _ = l.blocked_until(&s, now);
                    let s = l.take(&KeyState::default(), now, lim);
                    let _ = l.blocked_until(&s, now);
                }
            }
        }
    }

    #[test]
    fn names_and_keys() {
        assert!(check_name("stripe").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name("a:b").is_err());
        assert!(check_name(&"a".repeat(101)).is_err());
        assert_eq!(check_key("stripe").unwrap(), "stripe");
        assert_eq!(check_key("stripe:cust:42").unwrap(), "stripe");
        assert!(check_key("stripe:").is_err());
        assert!(check_key(":x").is_err());
        assert!(check_key("s\0x").is_err());
        assert!(check_key(&"a".repeat(300)).is_err());
        let spec = |kind, limit, period: Option<u64>| RateLimitSpec {
            kind,
            limit,
            period: period.map(Duration::from_millis),
        };
        assert!(spec(Kind::Window, 50, Some(1000)).check().is_ok());
        assert!(spec(Kind::Window, 0, Some(1000)).check().is_err());
        assert!(spec(Kind::Bucket, 5, None).check().is_err());
        assert!(spec(Kind::Bucket, 5, Some(0)).check().is_err());
        assert!(spec(Kind::Concurrent, 5, Some(1)).check().is_err());
        assert!(spec(Kind::Concurrent, 5, None).check().is_ok());
        assert!(spec(Kind::Window, 5, Some(u64::MAX)).check().is_err());
    }
}
