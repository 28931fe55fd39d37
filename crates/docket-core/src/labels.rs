//! Worker labels and task affinity (issue 43 item 4; Hatchet's worker labels and affinity).
//!
//! A claim may carry `labels` (`{"region": "eu", "gpu": "a100"}`): what the claiming worker
//! has. A task may say what it needs:
//! - `requires`: only a claim whose labels include every one of these pairs takes it, ever;
//! - `prefer` (`{"labels": {...}, "for": "30s"}`): for `for` after the task becomes due
//!   (`run_at`, which a retry moves), only a claim with these labels takes it; after that any
//!   claim may.
//!
//! A claim without labels takes only tasks that require nothing (and prefer nothing, or whose
//! preference ran out), so a queue without affinity claims as before. [`may_claim`] is the
//! rule; each backend's claim statements state it in SQL, held to it by the store's
//! conformance suite.

use crate::Timestamp;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// Labels: name → value, both strings.
pub type Labels = BTreeMap<String, String>;

/// Most labels a claim carries or a task requires or prefers.
pub const MAX_LABELS: usize = 20;
/// Longest label name (characters).
pub const MAX_LABEL_NAME_LEN: usize = 64;
/// Longest label value (characters).
pub const MAX_LABEL_VALUE_LEN: usize = 128;
/// Longest `prefer.for`: 30 days (as a task's timeout).
pub const MAX_PREFER_FOR: Duration = crate::duration::MAX_TIMEOUT;

/// Checks labels: at most [`MAX_LABELS`]; names 1..=[`MAX_LABEL_NAME_LEN`] and values
/// 1..=[`MAX_LABEL_VALUE_LEN`] characters, without control characters.
///
/// # Errors
/// A message naming the field (`labels`, `requires.gpu`).
pub fn check_labels(field: &str, labels: &Labels) -> Result<(), String> {
    if labels.len() > MAX_LABELS {
        return Err(format!(
            "{field}: at most {MAX_LABELS} labels, got {}",
            labels.len()
        ));
    }
    for (k, v) in labels {
        crate::name::check_name(&format!("{field}: a label name"), k)?;
        if k.chars().count() > MAX_LABEL_NAME_LEN {
            return Err(format!(
                "{field}: label name {k:?} is longer than {MAX_LABEL_NAME_LEN} characters"
            ));
        }
        crate::name::check_name(&format!("{field}.{k}"), v)?;
        if v.chars().count() > MAX_LABEL_VALUE_LEN {
            return Err(format!(
                "{field}.{k} is longer than {MAX_LABEL_VALUE_LEN} characters"
            ));
        }
    }
    Ok(())
}

/// `prefer` of a task: these labels, for this long after the task is due.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Prefer {
    /// The labels a claim needs while the preference holds (1..=20; names 1..=64, values
    /// 1..=128 characters).
    #[schema(schema_with = labels_schema)]
    pub labels: Labels,
    /// How long after the task is due (`run_at`; a retry moves it) only such a claim takes it
    /// (humantime, 0..=30 days); then any claim may.
    #[serde(rename = "for", with = "crate::duration::serde_str")]
    #[schema(value_type = String, example = "30s")]
    pub for_: Duration,
}

impl Prefer {
    /// Checks the labels (at least one) and `for`.
    ///
    /// # Errors
    /// A message naming the field (`prefer.labels`, `prefer.for`).
    pub fn validate(&self) -> Result<(), String> {
        if self.labels.is_empty() {
            return Err("prefer.labels: at least one label".into());
        }
        check_labels("prefer.labels", &self.labels)?;
        crate::duration::check_range("prefer.for", self.for_, Duration::ZERO, MAX_PREFER_FOR)
    }

    /// When the preference ends for a task due at `run_at`: a claim at or after it may take
    /// the task whatever its labels.
    #[must_use]
    pub fn until(&self, run_at: Timestamp) -> Timestamp {
        crate::time::add(run_at, self.for_)
    }
}

/// A task's affinity as stored (one JSON column, NULL when the task has none): what it
/// requires, what it prefers and for how long (ms).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Affinity {
    /// [`Prefer::labels`]'s counterpart that never ends; absent when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requires: Option<Labels>,
    /// [`Prefer::labels`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefer: Option<Labels>,
    /// [`Prefer::for_`] in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefer_ms: Option<i64>,
}

impl Affinity {
    /// The stored form of a task's `requires` and `prefer`; `None` when it has neither (an
    /// empty `requires` is none).
    #[must_use]
    pub fn of(requires: Option<&Labels>, prefer: Option<&Prefer>) -> Option<Affinity> {
        let requires = requires.filter(|r| !r.is_empty()).cloned();
        if requires.is_none() && prefer.is_none() {
            return None;
        }
        Some(Affinity {
            requires,
            prefer: prefer.map(|p| p.labels.clone()),
            prefer_ms: prefer.map(|p| crate::duration::to_ms(p.for_)),
        })
    }

    /// `prefer` as the API shows it.
    #[must_use]
    pub fn prefer(&self) -> Option<Prefer> {
        self.prefer.as_ref().map(|labels| Prefer {
            labels: labels.clone(),
            for_: Duration::from_millis(u64::try_from(self.prefer_ms.unwrap_or(0)).unwrap_or(0)),
        })
    }
}

/// Labels as people read them: `gpu=a100, region=eu` (empty for none); the dashboard's and
/// the CLI's form.
#[must_use]
pub fn display(labels: &Labels) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether `labels` holds every pair of `wanted`.
#[must_use]
pub fn has(labels: &Labels, wanted: &Labels) -> bool {
    wanted.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// Whether a claim with `labels` at `now` may take a task due at `run_at` with `affinity`:
/// it has every required label, and the preferred ones unless the preference ended
/// ([`Prefer::until`]).
#[must_use]
pub fn may_claim(
    affinity: Option<&Affinity>,
    run_at: Timestamp,
    labels: &Labels,
    now: Timestamp,
) -> bool {
    let Some(a) = affinity else { return true };
    if a.requires.as_ref().is_some_and(|r| !has(labels, r)) {
        return false;
    }
    match &a.prefer {
        None => true,
        Some(p) => {
            let until = crate::time::add_ms(run_at, a.prefer_ms.unwrap_or(0));
            now >= until || has(labels, p)
        }
    }
}

/// The schema of a labels object: string values, [`check_labels`]'s bounds.
pub(crate) fn labels_schema() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    let pattern = r"^[^\u0000-\u001F\u007F-\u009F]+$";
    let value = ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(MAX_LABEL_VALUE_LEN))
        .pattern(Some(pattern));
    let name = ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(MAX_LABEL_NAME_LEN))
        .pattern(Some(pattern));
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .additional_properties(Some(value))
        .property_names(Some(name))
        .max_properties(Some(MAX_LABELS))
        .description(Some(format!(
            "Labels: up to {MAX_LABELS} pairs, names 1..={MAX_LABEL_NAME_LEN} and values \
             1..={MAX_LABEL_VALUE_LEN} characters, no control characters \
             (`{{\"region\": \"eu\", \"gpu\": \"a100\"}}`)."
        )))
        .build()
}

/// [`labels_schema`], or null.
pub(crate) fn labels_schema_opt() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{SchemaType, Type};
    let mut o = labels_schema();
    o.schema_type = SchemaType::from_iter([Type::Object, Type::Null]);
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    }

    #[test]
    fn requires_every_pair_for_ever() {
        let t0 = Timestamp::UNIX_EPOCH;
        let a = Affinity::of(Some(&l(&[("gpu", "a100"), ("region", "eu")])), None);
        let far = crate::time::add(t0, Duration::from_secs(86_400 * 365));
        assert!(!may_claim(a.as_ref(), t0, &l(&[]), far));
        assert!(!may_claim(a.as_ref(), t0, &l(&[("gpu", "a100")]), far));
        assert!(!may_claim(
            a.as_ref(),
            t0,
            &l(&[("gpu", "h100"), ("region", "eu")]),
            far
        ));
        assert!(may_claim(
            a.as_ref(),
            t0,
            &l(&[("gpu", "a100"), ("region", "eu"), ("x", "y")]),
            t0
        ));
        assert!(may_claim(None, t0, &l(&[]), t0));
        assert_eq!(Affinity::of(Some(&l(&[])), None), None);
    }

    #[test]
    fn prefer_ends_after_for() {
        let t0 = Timestamp::UNIX_EPOCH;
        let p = Prefer {
            labels: l(&[("region", "eu")]),
            for_: Duration::from_secs(30),
        };
        let a = Affinity::of(None, Some(&p));
        let end = p.until(t0);
        let before = crate::time::add_ms(end, -1);
        assert!(!may_claim(a.as_ref(), t0, &l(&[("region", "us")]), before));
        assert!(may_claim(a.as_ref(), t0, &l(&[("region", "eu")]), before));
        assert!(may_claim(a.as_ref(), t0, &l(&[]), end));
        assert_eq!(a.unwrap().prefer(), Some(p));
    }

    #[test]
    fn worst_values_are_refused() {
        let long = "x".repeat(MAX_LABEL_VALUE_LEN + 1);
        assert!(check_labels("labels", &l(&[("a", &long)])).is_err());
        assert!(check_labels("labels", &l(&[("", "v")])).is_err());
        assert!(check_labels("labels", &l(&[("a", "")])).is_err());
        assert!(check_labels("labels", &l(&[("a", "v\0")])).is_err());
        let name = "n".repeat(MAX_LABEL_NAME_LEN + 1);
        assert!(check_labels("labels", &l(&[(&name, "v")])).is_err());
        let many: Labels = (0..=MAX_LABELS)
            .map(|i| (format!("k{i}"), "v".into()))
            .collect();
        assert!(check_labels("labels", &many).is_err());
        let p = |for_| Prefer {
            labels: l(&[("a", "b")]),
            for_,
        };
        assert!(p(Duration::from_secs(86_400 * 365 * 1000))
            .validate()
            .is_err());
        assert!(p(Duration::ZERO).validate().is_ok());
        assert!(Prefer {
            labels: l(&[]),
            for_: Duration::ZERO
        }
        .validate()
        .is_err());
        // Time arithmetic saturates: a task due at the end of time never panics.
        let end = crate::time::max();
        let a = Affinity::of(None, Some(&p(MAX_PREFER_FOR)));
        assert!(may_claim(a.as_ref(), end, &l(&[("a", "b")]), end));
        assert!(!may_claim(a.as_ref(), end, &l(&[]), crate::time::min()));
    }
}
