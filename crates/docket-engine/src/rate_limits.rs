//! Rate limits (issue 26 item 3): the named limits tasks count against. What a limit admits is
//! `docket_core::rate_limit`'s rule; claims apply it in the store, in the claim's transaction,
//! so it holds cluster-wide on every backend. Here: the limits' lifecycle (audited), the check
//! that a task names an existing limit, pruning of unused keys and the metrics.

use crate::{metrics, Engine, EngineError};
use docket_core::rate_limit::{self, RateLimit, RateLimitSpec};
use docket_core::task::ResolvedTask;
use std::time::Duration;

/// Keys unused this long are forgotten (their totals stay with their limit).
pub const KEY_RETENTION: Duration = Duration::from_secs(86_400);

impl Engine {
    /// Creates or replaces limit `name` for `actor` (audited as `rate_limit.put`). Its keys
    /// start afresh, and claimers look again at once (a raised limit may admit tasks now).
    ///
    /// # Errors
    /// [`EngineError::Invalid`] for a bad name or spec; store errors.
    pub async fn rate_limit_put(
        &self,
        actor: &str,
        name: &str,
        spec: &RateLimitSpec,
    ) -> Result<RateLimit, EngineError> {
        rate_limit::check_name(name).map_err(EngineError::Invalid)?;
        spec.check().map_err(EngineError::Invalid)?;
        let l = self
            .store
            .rate_limit_put(name, spec, self.clock.now())
            .await?;
        self.waker.wake_all();
        self.audit(
            actor,
            "rate_limit.put",
            &format!("rate_limit:{name}"),
            serde_json::to_value(spec).ok(),
        )
        .await;
        Ok(l)
    }

    /// Limit `name` with its totals.
    ///
    /// # Errors
    /// [`EngineError::NotFound`]; store errors.
    pub async fn rate_limit_get(&self, name: &str) -> Result<RateLimit, EngineError> {
        self.store
            .rate_limit_get(name, self.clock.now())
            .await?
            .ok_or_else(|| EngineError::NotFound(format!("rate limit {name}")))
    }

    /// Every limit with its totals, by name.
    ///
    /// # Errors
    /// Store errors.
    pub async fn rate_limit_list(&self) -> Result<Vec<RateLimit>, EngineError> {
        Ok(self.store.rate_limit_list(self.clock.now()).await?)
    }

    /// Deletes limit `name` for `actor` (audited as `rate_limit.delete`); its tasks run
    /// unlimited from then on.
    ///
    /// # Errors
    /// [`EngineError::NotFound`]; store errors.
    pub async fn rate_limit_delete(&self, actor: &str, name: &str) -> Result<(), EngineError> {
        if !self.store.rate_limit_delete(name).await? {
            return Err(EngineError::NotFound(format!("rate limit {name}")));
        }
        self.waker.wake_all();
        self.audit(
            actor,
            "rate_limit.delete",
            &format!("rate_limit:{name}"),
            None,
        )
        .await;
        Ok(())
    }

    /// Refuses tasks whose `rate_limit` names no limit: a typo would otherwise run unlimited.
    /// (A limit deleted later, or a key written with plain SQL, runs unlimited: the claim does
    /// not refuse work it cannot place.)
    ///
    /// # Errors
    /// [`EngineError::InvalidTask`] naming the first such task; store errors.
    pub(crate) async fn check_rate_limits(
        &self,
        tasks: &[ResolvedTask],
    ) -> Result<(), EngineError> {
        let mut names: Vec<String> = tasks
            .iter()
            .filter_map(|t| t.rate_limit.as_deref())
            .map(|k| rate_limit::policy_of(k).to_string())
            .collect();
        if names.is_empty() {
            return Ok(());
        }
        names.sort();
        names.dedup();
        let known = self.store.rate_limit_names(&names).await?;
        for (index, t) in tasks.iter().enumerate() {
            if let Some(k) = &t.rate_limit {
                let name = rate_limit::policy_of(k);
                if !known.iter().any(|n| n == name) {
                    return Err(EngineError::InvalidTask {
                        index,
                        message: format!(
                            "rate_limit {k:?}: there is no rate limit {name:?} (create it with PUT /v1/rate-limits/{name})"
                        ),
                    });
                }
            }
        }
        Ok(())
    }

    /// Sets the rate limit metrics from a fresh read (`/metrics` scrapes call it): cluster-wide
    /// totals, the same on every node.
    ///
    /// # Errors
    /// Store errors.
    pub async fn record_rate_limits(&self) -> Result<(), EngineError> {
        let all = self.rate_limit_list().await?;
        metrics::record_rate_limits(&all);
        Ok(())
    }
}

/// Forgets keys unused for [`KEY_RETENTION`] (part of the maintenance's aux pruning).
///
/// # Errors
/// Store errors.
pub async fn prune_keys(engine: &Engine, now: docket_core::Timestamp) -> Result<u64, EngineError> {
    let before = docket_core::time::sub(now, KEY_RETENTION);
    Ok(engine.store.rate_limit_prune(before).await?)
}
