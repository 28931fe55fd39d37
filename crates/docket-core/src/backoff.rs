//! Backoff between attempts: capped exponential with jitter (asyncflow's max_retry_interval: 1s,
//! 2s, 4s, 8s, then the cap) or linear (node-daemons' `delayRatio`: attempts × ratio). An
//! exponential backoff with coefficient 1 is a constant delay.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How the delay grows with the attempt number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum BackoffKind {
    /// `initial × coefficient^(attempt−1)`.
    #[default]
    Exponential,
    /// `attempt × initial` (node-daemons' `delayRatio`; `initial` may be given as `step`).
    Linear,
}

impl BackoffKind {
    /// `exponential` or `linear`.
    pub fn as_str(self) -> &'static str {
        match self {
            BackoffKind::Exponential => "exponential",
            BackoffKind::Linear => "linear",
        }
    }
}

impl std::str::FromStr for BackoffKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "exponential" => Ok(BackoffKind::Exponential),
            "linear" => Ok(BackoffKind::Linear),
            other => Err(format!(
                "unknown backoff kind {other:?}: exponential or linear"
            )),
        }
    }
}

/// When a failed attempt runs again: exponential `min(max, initial × coefficient^(attempt−1))`
/// or linear `min(max, attempt × initial)`, then `× (1 ± jitter)`.
///
/// JSON shape: `{"initial": "1s", "coefficient": 2.0, "max": "1h", "jitter": 0.1}`, or
/// `{"kind": "linear", "step": "30s", "max": "10m"}` (`step` is `initial`'s other name).
/// Defaults: exponential, initial 1 s, coefficient 2.0, max 1 h, jitter 0.1 (±10 %).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Backoff {
    /// `exponential` (default) or `linear`.
    pub kind: BackoffKind,
    /// Delay after the first failed attempt; linear: the step added per attempt (also read
    /// as `step`).
    #[serde(with = "crate::duration::serde_str", alias = "step")]
    #[schema(value_type = String, example = "30s")]
    pub initial: Duration,
    /// Factor applied per further attempt (≥ 1.0 for either kind; only exponential uses it).
    #[schema(minimum = 1.0)]
    pub coefficient: f64,
    /// Upper bound of the delay before jitter.
    #[serde(with = "crate::duration::serde_str")]
    #[schema(value_type = String, example = "30s")]
    pub max: Duration,
    /// Relative jitter in [0, 1]: the delay is multiplied by a uniform factor in [1−j, 1+j].
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub jitter: f64,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            kind: BackoffKind::Exponential,
            initial: Duration::from_secs(1),
            coefficient: 2.0,
            max: Duration::from_secs(3600),
            jitter: 0.1,
        }
    }
}

impl Backoff {
    /// Checks the ranges.
    ///
    /// # Errors
    /// A message naming the bad field.
    pub fn validate(&self) -> Result<(), String> {
        // Checked for every kind (a linear backoff does not use it), as the document says.
        if !(self.coefficient.is_finite() && self.coefficient >= 1.0) {
            return Err(format!(
                "backoff.coefficient must be a number >= 1.0, got {}",
                self.coefficient
            ));
        }
        if !(0.0..=1.0).contains(&self.jitter) {
            return Err(format!(
                "backoff.jitter must be within 0.0..=1.0, got {}",
                self.jitter
            ));
        }
        if self.max < self.initial {
            return Err("backoff.max must not be smaller than backoff.initial".into());
        }
        Ok(())
    }

    /// The delay before the next attempt after `attempt` (1-based) failed, without jitter.
    pub fn base_delay(&self, attempt: i32) -> Duration {
        let ms = match self.kind {
            BackoffKind::Exponential => {
                let exp = (attempt.max(1) - 1).min(1000);
                self.initial.as_millis() as f64 * self.coefficient.powi(exp)
            }
            BackoffKind::Linear => self.initial.as_millis() as f64 * f64::from(attempt.max(1)),
        };
        let capped = ms.min(self.max.as_millis() as f64);
        Duration::from_millis(capped.max(0.0) as u64)
    }

    /// The delay with jitter applied; `unit` is a uniform sample in [0, 1).
    pub fn delay_with(&self, attempt: i32, unit: f64) -> Duration {
        let base = self.base_delay(attempt).as_millis() as f64;
        let factor = 1.0 + self.jitter * (2.0 * unit - 1.0);
        Duration::from_millis((base * factor).max(0.0) as u64)
    }

    /// The delay with random jitter.
    pub fn delay(&self, attempt: i32) -> Duration {
        self.delay_with(attempt, rand::random::<f64>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_exponential_like_asyncflow() {
        // asyncflow: max interval 10: 1s, 2s, 4s, 8s, 10s.
        let b = Backoff {
            initial: Duration::from_secs(1),
            coefficient: 2.0,
            max: Duration::from_secs(10),
            jitter: 0.0,
            ..Backoff::default()
        };
        let got: Vec<u64> = (1..=6).map(|a| b.base_delay(a).as_secs()).collect();
        assert_eq!(got, vec![1, 2, 4, 8, 10, 10]);
        assert_eq!(b.delay(3), Duration::from_secs(4));
    }

    #[test]
    fn linear_like_node_daemons_delay_ratio() {
        // node-daemons: delay = attempts × delayRatio; here capped at max.
        let b: Backoff = serde_json::from_str(
            r#"{"kind": "linear", "step": "30s", "max": "100s", "jitter": 0}"#,
        )
        .unwrap();
        assert_eq!(
            (b.kind, b.initial),
            (BackoffKind::Linear, Duration::from_secs(30))
        );
        let got: Vec<u64> = (1..=5).map(|a| b.base_delay(a).as_secs()).collect();
        assert_eq!(got, vec![30, 60, 90, 100, 100]);
        assert_eq!(
            b.base_delay(i32::MAX),
            Duration::from_secs(100),
            "no overflow"
        );
        // Written back with its canonical names.
        let v = serde_json::to_value(b).unwrap();
        assert_eq!(
            (v["kind"].as_str(), v["initial"].as_str()),
            (Some("linear"), Some("30s"))
        );
        // A coefficient below 1 is refused for every kind, unused or not: the OpenAPI document
        // states `minimum: 1` for it (issue 37 item 3), and what it states the server enforces.
        assert!(Backoff {
            coefficient: 0.0,
            ..b
        }
        .validate()
        .is_err());
        assert!(serde_json::from_str::<Backoff>(r#"{"kind": "quadratic"}"#).is_err());
    }

    #[test]
    fn jitter_stays_in_bounds() {
        let b = Backoff {
            jitter: 0.5,
            ..Backoff::default()
        };
        assert_eq!(b.delay_with(1, 0.0), Duration::from_millis(500));
        assert_eq!(b.delay_with(1, 1.0), Duration::from_millis(1500));
        for _ in 0..100 {
            let d = b.delay(2).as_millis();
            assert!((1000..=3000).contains(&d), "{d}");
        }
    }

    #[test]
    fn huge_attempts_do_not_overflow() {
        let b = Backoff::default();
        assert_eq!(b.base_delay(i32::MAX), Duration::from_secs(3600));
    }

    #[test]
    fn validate_rejects_bad_values() {
        let bad = Backoff {
            coefficient: 0.5,
            ..Backoff::default()
        };
        assert!(bad.validate().is_err());
        let bad = Backoff {
            jitter: 2.0,
            ..Backoff::default()
        };
        assert!(bad.validate().is_err());
        assert!(Backoff::default().validate().is_ok());
    }
}
