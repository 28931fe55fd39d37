//! Time arithmetic that never panics. `DateTime + Duration` panics on overflow and
//! `chrono::Duration::from_std` fails past ±292 billion years; one task with a huge `run_in` or
//! backoff must not take a request handler or the maintenance loop down with it, so every time
//! docket computes goes through [`add`] / [`sub`], which saturate at [`MAX`] / [`MIN`].
//! (clippy.toml disallows the panicking constructors elsewhere.)

use crate::Timestamp;
use chrono::{DateTime, TimeZone, Utc};
use std::time::Duration;

/// The latest time docket computes: 9999-12-31T23:59:59.999999Z (RFC 3339's four-digit years;
/// PostgreSQL and SQLite both store it).
pub fn max() -> Timestamp {
    #[allow(clippy::disallowed_methods)]
    Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59)
        .single()
        .and_then(|t| t.checked_add_signed(chrono::TimeDelta::microseconds(999_999)))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// The earliest time docket computes: 1970-01-01T00:00:00Z.
pub fn min() -> Timestamp {
    DateTime::<Utc>::UNIX_EPOCH
}

/// A `chrono` delta for `d`, saturating at chrono's range (never panics).
pub fn delta(d: Duration) -> chrono::TimeDelta {
    #[allow(clippy::disallowed_methods)]
    chrono::TimeDelta::from_std(d).unwrap_or(chrono::TimeDelta::MAX)
}

/// `t + d`, at most [`max`].
pub fn add(t: Timestamp, d: Duration) -> Timestamp {
    t.checked_add_signed(delta(d))
        .unwrap_or_else(max)
        .min(max())
}

/// `t − d`, at least [`min`].
pub fn sub(t: Timestamp, d: Duration) -> Timestamp {
    t.checked_sub_signed(delta(d))
        .unwrap_or_else(min)
        .max(min())
}

/// `t + ms` milliseconds (negative moves back), within [`min`]..=[`max`].
pub fn add_ms(t: Timestamp, ms: i64) -> Timestamp {
    if ms >= 0 {
        add(t, Duration::from_millis(ms.unsigned_abs()))
    } else {
        sub(t, Duration::from_millis(ms.unsigned_abs()))
    }
}

/// `a − b` as a std duration, zero when `b` is after `a`.
pub fn since(a: Timestamp, b: Timestamp) -> Duration {
    a.signed_duration_since(b)
        .to_std()
        .unwrap_or(Duration::ZERO)
}

/// Checks that a time given by a client lies within [`min`]..=[`max`].
///
/// # Errors
/// A message naming the field.
pub fn check(field: &str, t: Timestamp) -> Result<(), String> {
    if t < min() || t > max() {
        return Err(format!(
            "{field} must be between 1970-01-01T00:00:00Z and 9999-12-31T23:59:59Z, got {t}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturates_instead_of_panicking() {
        let now = Utc::now();
        assert_eq!(add(now, Duration::MAX), max());
        assert_eq!(add(max(), Duration::from_secs(1)), max());
        assert_eq!(sub(now, Duration::MAX), min());
        assert_eq!(add_ms(now, i64::MAX), max());
        assert_eq!(add_ms(now, i64::MIN), min());
        assert_eq!(
            add(now, Duration::from_secs(5)) - now,
            chrono::TimeDelta::try_seconds(5).unwrap()
        );
        assert_eq!(since(now, max()), Duration::ZERO);
        assert!(check("run_at", max()).is_ok());
        assert!(check("run_at", DateTime::<Utc>::MAX_UTC).is_err());
    }
}
