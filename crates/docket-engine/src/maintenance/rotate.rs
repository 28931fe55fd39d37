//! Rotate (PgQ's table rotation, migration 0021): the ring of slots unfinished tasks live in
//! turns, and the slot filled four turns ago is emptied by TRUNCATE — the one way to free dead
//! tuples while another transaction holds an old snapshot open, which VACUUM must wait out.
//! On MySQL/MariaDB (migration 0004) the same job moves finished tasks from `docket_tasks` to
//! `docket_tasks_done`, which keeps them out of the hot table's indexes (no partial indexes).

use crate::{Engine, EngineError};
use docket_core::Timestamp;
use docket_store::Rotation;
use std::time::Duration;

/// Longest pause between tries after the ring's lock was refused again and again.
const MOST_BACKOFF: Duration = Duration::from_secs(60);
/// Tasks a turn moves out of the slot it empties. More are a backlog: the turn waits for it to
/// drain from the oldest slot (claims take the oldest first) instead of copying it.
const MOST_MOVED: i64 = 10_000;
/// How long the ring waits for a backlog before it moves it anyway (a slot whose tasks never
/// drain, e.g. low-priority ones behind a steady stream, must not stop the ring for good).
const MOST_WAIT: Duration = Duration::from_secs(60);

/// What the last turns ran into, per engine.
#[derive(Debug, Default)]
pub(crate) struct RingState {
    /// Turns refused in a row for the lock.
    blocked: u32,
    /// No try before this (after a refused lock).
    wait_until: Option<std::time::Instant>,
    /// Since when the slot to empty has held a backlog.
    full_since: Option<std::time::Instant>,
}

impl RingState {
    /// How many tasks the next turn may move out of the slot it empties at `t`; `None`: no try
    /// yet (backing off after refused locks).
    fn most_moved(&self, t: std::time::Instant) -> Option<i64> {
        if self.wait_until.is_some_and(|w| t < w) {
            return None;
        }
        Some(match self.full_since {
            Some(since) if t.saturating_duration_since(since) >= MOST_WAIT => i64::MAX,
            _ => MOST_MOVED,
        })
    }
}

/// Turns the ring when a turn is due (any node may; the store lets one through). Returns the
/// tasks moved to the fixed slot. When the lock on the slot to empty is not granted within
/// [`EngineConfig::rotate_lock_timeout`](crate::EngineConfig::rotate_lock_timeout) — a
/// transaction that read `docket_tasks` is open — the ring does not turn; the next tries back off
/// (the interval doubling up to 60 s), since each one pauses claims for the lock timeout. When
/// more than 10,000 tasks are left in the slot to empty, the ring waits up to 60 s for them to
/// drain before moving them.
///
/// # Errors
/// Store errors.
pub async fn rotate(engine: &Engine, now: Timestamp) -> Result<u64, EngineError> {
    let c = &engine.config;
    let most_moved = {
        let s = engine
            .ring
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match s.most_moved(std::time::Instant::now()) {
            Some(n) => n,
            None => return Ok(0),
        }
    };
    let r = engine
        .store
        .task_rotate(docket_store::TaskRotateParams {
            now,
            // The job runs every rotate_interval on each node; a little slack so that a turn
            // due a millisecond later is not put off by a whole interval.
            every: c.rotate_interval.mul_f64(0.9),
            min_fill_bytes: c.rotate_min_fill_bytes,
            idle_every: c.rotate_idle_interval.mul_f64(0.9),
            lock_timeout: c.rotate_lock_timeout,
            batch: engine.config.maintenance_batch,
            most_moved,
        })
        .await?;
    let mut s = engine
        .ring
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match r {
        Rotation::Turned {
            slot,
            moved,
            truncated,
        } => {
            *s = RingState::default();
            let outcome = if truncated { "truncated" } else { "turned" };
            ::metrics::counter!(crate::metrics::RING_TURNS, "outcome" => outcome).increment(1);
            ::metrics::counter!(crate::metrics::RING_MOVED).increment(moved);
            tracing::debug!(slot, moved, truncated, "task slots turned");
            Ok(moved)
        }
        Rotation::Full => {
            s.full_since.get_or_insert_with(std::time::Instant::now);
            ::metrics::counter!(crate::metrics::RING_TURNS, "outcome" => "full").increment(1);
            Ok(0)
        }
        Rotation::Blocked => {
            let n = s.blocked.saturating_add(1);
            let pause = c
                .rotate_interval
                .saturating_mul(1u32 << n.min(16))
                .min(MOST_BACKOFF);
            s.blocked = n;
            s.wait_until = Some(std::time::Instant::now() + pause);
            ::metrics::counter!(crate::metrics::RING_TURNS, "outcome" => "blocked").increment(1);
            tracing::warn!(
                refused = n,
                next_try_in_ms = pause.as_millis() as u64,
                "task slots could not turn: a transaction that read docket_tasks is open \
                 (see pg_stat_activity); dead tuples of finished tasks stay until it ends"
            );
            Ok(0)
        }
        Rotation::Archived { moved } => {
            ::metrics::counter!(crate::metrics::RING_TURNS, "outcome" => "archived").increment(1);
            ::metrics::counter!(crate::metrics::RING_MOVED).increment(moved);
            Ok(moved)
        }
        Rotation::NotDue | Rotation::Unsupported => Ok(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_backlog_waits_a_minute_then_moves_and_a_refused_lock_backs_off() {
        let t = Instant::now() + Duration::from_secs(3600);
        let fresh = RingState::default();
        assert_eq!(fresh.most_moved(t), Some(MOST_MOVED));
        let full = |ago: u64| RingState {
            full_since: Some(t - Duration::from_secs(ago)),
            ..RingState::default()
        };
        assert_eq!(full(59).most_moved(t), Some(MOST_MOVED));
        assert_eq!(full(60).most_moved(t), Some(i64::MAX));
        let blocked = RingState {
            blocked: 3,
            wait_until: Some(t + Duration::from_secs(1)),
            full_since: None,
        };
        assert_eq!(blocked.most_moved(t), None);
        assert_eq!(
            blocked.most_moved(t + Duration::from_secs(1)),
            Some(MOST_MOVED)
        );
    }
}
