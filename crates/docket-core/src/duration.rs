//! Durations as humantime strings ("250ms", "30s", "5m", "1h 30m") in JSON, config and flags.

use serde::{Deserialize, Deserializer, Serializer};
use std::time::Duration;

/// The longest duration docket reads anywhere: 100 years (36,500 days). Every time docket
/// computes from a duration stays far inside what chrono, PostgreSQL and SQLite can represent,
/// so no field can be fed a value that overflows later (`"1000000y"` is refused here).
pub const MAX: Duration = Duration::from_secs(36_500 * 24 * 3600);

/// Longest attempt timeout, lease or process step timeout: 30 days.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(30 * 24 * 3600);

/// Shortest attempt timeout or lease: 1 ms (a shorter one would be stored as zero).
pub const MIN_TIMEOUT: Duration = Duration::from_millis(1);

/// Parses a humantime duration such as `"250ms"` or `"5m"`, at most [`MAX`].
///
/// # Errors
/// A message naming the bad text, for 400 `invalid_duration` answers and CLI errors.
pub fn parse(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s.trim()).map_err(|e| {
        format!("invalid duration {s:?}: {e} (use e.g. \"250ms\", \"30s\", \"5m\")")
    })?;
    if d > MAX {
        return Err(format!(
            "invalid duration {s:?}: longer than the longest accepted, 36500 days (100 years)"
        ));
    }
    Ok(d)
}

/// Checks that `field`'s duration lies within `min..=max`.
///
/// # Errors
/// A message naming the field, the value and the range.
pub fn check_range(field: &str, d: Duration, min: Duration, max: Duration) -> Result<(), String> {
    if d < min || d > max {
        return Err(format!(
            "{field} must be within {}..={}, got {}",
            format(min),
            format(max),
            format(d)
        ));
    }
    Ok(())
}

/// Checks an attempt timeout or lease: within [`MIN_TIMEOUT`]`..=`[`MAX_TIMEOUT`].
///
/// # Errors
/// A message naming the field and the range.
pub fn check_timeout(field: &str, d: Duration) -> Result<(), String> {
    check_range(field, d, MIN_TIMEOUT, MAX_TIMEOUT)
}

/// Milliseconds of `d`, saturating at `i64::MAX` (for columns kept in ms).
pub fn to_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Formats a duration the way [`parse`] reads it ("1m 30s", "250ms").
pub fn format(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// Formats milliseconds the way [`parse`] reads it.
pub fn format_ms(ms: i64) -> String {
    format(Duration::from_millis(ms.max(0) as u64))
}

/// Serde helpers for `Duration` fields written as humantime strings.
pub mod serde_str {
    use super::*;

    /// Writes a humantime string.
    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format(*d))
    }

    /// Reads a humantime string.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s = String::deserialize(d)?;
        parse(&s).map_err(serde::de::Error::custom)
    }
}

/// Serde helpers for `Option<Duration>` fields written as humantime strings (or null).
pub mod serde_opt {
    use super::*;

    /// Writes a humantime string or null.
    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_str(&format(*d)),
            None => s.serialize_none(),
        }
    }

    /// Reads a humantime string or null.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let s: Option<String> = Option::deserialize(d)?;
        s.map(|s| parse(&s).map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_formats() {
        assert_eq!(parse("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(format(Duration::from_secs(90)), "1m 30s");
        assert!(parse("soon").unwrap_err().contains("invalid duration"));
        assert!(parse("-5s").is_err());
    }

    #[test]
    fn refuses_durations_past_the_bound() {
        assert!(parse("1000000y").unwrap_err().contains("longest accepted"));
        assert!(parse("300000000y").is_err());
        assert_eq!(parse("36500days").unwrap(), MAX);
        assert!(check_timeout("timeout", Duration::from_nanos(1))
            .unwrap_err()
            .contains("timeout must be within 1ms..=30days"));
        assert!(check_timeout("timeout", Duration::from_secs(31 * 86400)).is_err());
        assert!(check_timeout("timeout", Duration::from_secs(30)).is_ok());
        assert_eq!(to_ms(Duration::MAX), i64::MAX);
    }
}
