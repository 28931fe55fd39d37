//! Rate limits ([`RateLimitStore`], issue 26 item 3): the named limits, and the admission a
//! claim makes inside its transaction, written once for every backend over the driver. What a
//! limit admits is `docket_core::rate_limit`'s rule; this file locks the keys' rows, feeds the
//! rule what they hold and writes back what it computed.

use crate::driver::{args, stmt, DriverTx};
use crate::leases::ClaimCandidate;
use crate::row::Cols;
use crate::{Result, StoreError};
use async_trait::async_trait;
use docket_core::rate_limit::{KeyState, Kind, RateLimit, RateLimitSpec};
use docket_core::Timestamp;
use std::collections::HashMap;

/// Named rate limits.
#[async_trait]
pub trait RateLimitStore: Send + Sync {
    /// Creates or replaces limit `name`. A change starts its keys afresh (their windows and
    /// buckets; the totals stay), so the new numbers apply at once.
    ///
    /// # Errors
    /// Database failure.
    async fn rate_limit_put(
        &self,
        name: &str,
        spec: &RateLimitSpec,
        now: Timestamp,
    ) -> Result<RateLimit>;

    /// Limit `name` with its totals (keys, admitted, delayed, keys blocked at `now`).
    ///
    /// # Errors
    /// Database failure.
    async fn rate_limit_get(&self, name: &str, now: Timestamp) -> Result<Option<RateLimit>>;

    /// Every limit with its totals, by name.
    ///
    /// # Errors
    /// Database failure.
    async fn rate_limit_list(&self, now: Timestamp) -> Result<Vec<RateLimit>>;

    /// Which of `names` are limits (a cheap read, for checking tasks before they are written).
    ///
    /// # Errors
    /// Database failure.
    async fn rate_limit_names(&self, names: &[String]) -> Result<Vec<String>>;

    /// Deletes limit `name` and its keys; tasks naming it run unlimited from then on. False
    /// when there was none.
    ///
    /// # Errors
    /// Database failure.
    async fn rate_limit_delete(&self, name: &str) -> Result<bool>;

    /// Forgets keys unused since `before` (not blocked after it), adding their totals to their
    /// limit's. Returns how many went.
    ///
    /// # Errors
    /// Database failure.
    async fn rate_limit_prune(&self, before: Timestamp) -> Result<u64>;
}

/// A limit (without totals) from a row of `docket_rate_limits`.
pub(crate) fn rate_limit(r: &impl Cols) -> Result<RateLimit> {
    let name = r.text("name")?;
    let kind = Kind::parse(&r.text("kind")?)
        .map_err(|e| StoreError::Corrupt(format!("rate limit {name}: {e}")))?;
    Ok(RateLimit {
        kind,
        limit: r.int("lim")?,
        period: r
            .int_opt("period_ms")?
            .map(|ms| std::time::Duration::from_millis(ms.max(0).unsigned_abs())),
        created_at: r.time("created_at")?,
        updated_at: r.time("updated_at")?,
        keys: 0,
        admitted: 0,
        delayed: 0,
        blocked: 0,
        name,
    })
}

/// A limit with its totals, from a row of the `list` statement.
fn rate_limit_totals(r: &impl Cols) -> Result<RateLimit> {
    Ok(RateLimit {
        keys: r.int("n_keys")?,
        admitted: r.int("n_admitted")?,
        delayed: r.int("n_delayed")?,
        blocked: r.int("n_blocked")?,
        ..rate_limit(r)?
    })
}

#[async_trait]
impl<D: crate::driver::Driver> RateLimitStore for D {
    async fn rate_limit_put(
        &self,
        name: &str,
        spec: &RateLimitSpec,
        now: Timestamp,
    ) -> Result<RateLimit> {
        let period = spec.period.map(docket_core::duration::to_ms);
        let mut tx = self.begin().await?;
        tx.execute(
            stmt!(rate_limits, put),
            args![name, spec.kind.as_str(), spec.limit, period, now],
        )
        .await?;
        tx.execute(stmt!(rate_limits, reset_keys), args![name])
            .await?;
        tx.commit().await?;
        self.rate_limit_get(name, now)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("rate limit {name}")))
    }

    async fn rate_limit_get(&self, name: &str, now: Timestamp) -> Result<Option<RateLimit>> {
        let rows = self
            .fetch(stmt!(rate_limits, list), args![Some(name), now])
            .await?;
        rows.first().map(rate_limit_totals).transpose()
    }

    async fn rate_limit_list(&self, now: Timestamp) -> Result<Vec<RateLimit>> {
        let rows = self
            .fetch(stmt!(rate_limits, list), args![None::<&str>, now])
            .await?;
        rows.iter().map(rate_limit_totals).collect()
    }

    async fn rate_limit_names(&self, names: &[String]) -> Result<Vec<String>> {
        if names.is_empty() {
            return Ok(vec![]);
        }
        let list = serde_json::json!(names);
        let rows = self.fetch(stmt!(rate_limits, names), args![&list]).await?;
        rows.iter().map(|r| r.text("name")).collect()
    }

    async fn rate_limit_delete(&self, name: &str) -> Result<bool> {
        let mut tx = self.begin().await?;
        let n = tx.execute(stmt!(rate_limits, delete), args![name]).await?;
        tx.execute(stmt!(rate_limits, delete_keys), args![name])
            .await?;
        tx.commit().await?;
        Ok(n > 0)
    }

    async fn rate_limit_prune(&self, before: Timestamp) -> Result<u64> {
        let mut tx = self.begin().await?;
        // Lock the rows first, so a claim cannot count into a row between the fold and the
        // delete.
        let old = tx
            .fetch(stmt!(rate_limits, prune_lock), args![before])
            .await?;
        if old.is_empty() {
            tx.commit().await?;
            return Ok(0);
        }
        tx.execute(stmt!(rate_limits, prune_fold), args![before])
            .await?;
        let n = tx
            .execute(stmt!(rate_limits, prune_delete), args![before])
            .await?;
        tx.commit().await?;
        Ok(n)
    }
}

/// One key among a claim's candidates, locked: its limit, state, and running tasks (counted
/// for concurrent limits only; 0 for the others, whose rule does not read it).
#[derive(Debug)]
pub(crate) struct LockedKey {
    key: String,
    limit: RateLimit,
    state: KeyState,
    running: i64,
}

/// The keys of a claim's candidates that name an existing limit, locked for the claim's
/// transaction in key order (so two claims never wait on each other in opposite orders).
/// Keys of limits that do not exist are not here: their tasks run unlimited.
pub(crate) async fn rate_lock<T: DriverTx>(
    tx: &mut T,
    cands: &[ClaimCandidate],
    now: Timestamp,
) -> Result<Vec<LockedKey>> {
    let mut keys: Vec<&str> = cands.iter().filter_map(|c| c.rate.as_deref()).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        let mut row = tx
            .fetch_one(stmt!(rate_limits, key_lock), args![key])
            .await?;
        if row.is_none() {
            // Inserted here, or by a rival claim that held it until its commit (the insert
            // then does nothing): either way, lock it now. Still none: the limit does not
            // exist.
            let name = docket_core::rate_limit::policy_of(key);
            tx.execute(stmt!(rate_limits, key_ensure), args![key, name, now])
                .await?;
            row = tx
                .fetch_one(stmt!(rate_limits, key_lock), args![key])
                .await?;
        }
        let Some(r) = row else { continue };
        let limit = rate_limit(&r)?;
        // Counted now that the lock is held, in a statement of its own: on PostgreSQL a count
        // in the locking statement read the snapshot taken before it waited for the lock, and
        // missed what the claim it waited for had started (a concurrent limit of 3 had 9
        // running under two nodes' claimers: docket-engine's concurrent_limit_on_two_nodes).
        let running = if limit.kind == Kind::Concurrent {
            let n = tx
                .fetch_one(stmt!(rate_limits, key_running), args![key])
                .await?;
            n.map(|n| n.int("running")).transpose()?.unwrap_or(0)
        } else {
            0
        };
        out.push(LockedKey {
            key: key.to_string(),
            limit,
            state: KeyState {
                at: r.time_opt("at")?,
                used: r.int("used")?,
            },
            running,
        });
    }
    Ok(out)
}

/// How many tasks of each locked key a claim at `now` may take (the rule's room).
pub(crate) fn rate_room(keys: &[LockedKey], now: Timestamp) -> HashMap<String, i64> {
    keys.iter()
        .map(|k| (k.key.clone(), k.limit.room(&k.state, now, k.running)))
        .collect()
}

/// Writes each locked key's state after the claim took `picked` of `cands`: the rule's new
/// window or bucket, when it next admits (when it admits no more now), and the totals.
pub(crate) async fn rate_record<T: DriverTx>(
    tx: &mut T,
    keys: &[LockedKey],
    cands: &[ClaimCandidate],
    picked: &[&ClaimCandidate],
    now: Timestamp,
) -> Result<()> {
    if keys.is_empty() {
        return Ok(());
    }
    let mut wanted: HashMap<&str, i64> = HashMap::new();
    for c in cands {
        if let Some(k) = &c.rate {
            *wanted.entry(k).or_default() += 1;
        }
    }
    let mut took: HashMap<&str, i64> = HashMap::new();
    for c in picked {
        if let Some(k) = &c.rate {
            *took.entry(k).or_default() += 1;
        }
    }
    let room = rate_room(keys, now);
    for k in keys {
        let n = took.get(k.key.as_str()).copied().unwrap_or(0);
        // A claim that met the key at its limit: it passed over some of the key's tasks, or
        // took the last room there was (the key's other tasks now wait). Counted once per
        // claim: claims skip a blocked key's tasks without reading them, so how many wait is
        // not known here.
        let left = room.get(&k.key).copied().unwrap_or(0);
        let passed_over = wanted.get(k.key.as_str()).copied().unwrap_or(0) > left;
        let delayed = i64::from(passed_over || left - n <= 0);
        let s = k.limit.take(&k.state, now, n);
        let blocked = k.limit.blocked_until(&s, now);
        tx.execute(
            stmt!(rate_limits, key_update),
            args![k.key.as_str(), s.at, s.used, blocked, n, delayed, now],
        )
        .await?;
    }
    Ok(())
}
