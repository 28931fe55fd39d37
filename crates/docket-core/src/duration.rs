//! Durations as humantime strings ("250ms", "30s", "5m", "1h 30m") in JSON, config and flags.

use serde::{Deserialize, Deserializer, Serializer};
use std::time::Duration;

/// Parses a humantime duration such as `"250ms"` or `"5m"`.
///
/// # Errors
/// A message naming the bad text, for 400 `invalid_duration` answers and CLI errors.
pub fn parse(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim())
        .map_err(|e| format!("invalid duration {s:?}: {e} (use e.g. \"250ms\", \"30s\", \"5m\")"))
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
}
