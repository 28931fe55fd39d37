//! The injectable clock: every rule that depends on "now" takes its time from a [`Clock`], so
//! schedule, backoff, lease and retention logic is tested by moving a [`ManualClock`], not by sleeping.

use crate::Timestamp;
use std::sync::{Arc, Mutex};

/// A source of the current time (UTC).
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        chrono::Utc::now()
    }
}

/// A clock that only moves when told to; clones share one time.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<Mutex<Timestamp>>);

impl ManualClock {
    /// A clock standing at `t`.
    pub fn new(t: Timestamp) -> Self {
        ManualClock(Arc::new(Mutex::new(t)))
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: std::time::Duration) {
        let mut t = self.0.lock().expect("clock lock");
        *t = crate::time::add(*t, d);
    }

    /// Sets the clock to `t`.
    pub fn set(&self, t: Timestamp) {
        *self.0.lock().expect("clock lock") = t;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.0.lock().expect("clock lock")
    }
}
