//! Pickup breakdown: timestamps of the steps between a task's wake-up and its handler's start,
//! so `docket bench --breakdown` can say where the time goes (issue 24). Recorded only when a
//! probe is installed ([`crate::Engine::with_probe`]); otherwise each step costs one `Option`
//! check.

use std::sync::Mutex;
use std::time::Instant;

/// A step of a task's way from its enqueue to its handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Step {
    /// A wake-up of a queue was issued: by an insert on this node (`id` 0) or by a database
    /// notification (`id` 1).
    Wake,
    /// A claimer woke up and starts a claim statement (`id` 0: it had not waited).
    ClaimStart,
    /// The claim statement returned task `id`.
    Claimed,
    /// Task `id` left the worker's buffer and got a handler slot.
    Dispatched,
}

/// One timestamped step.
#[derive(Debug, Clone, Copy)]
pub struct Mark {
    /// Which step.
    pub step: Step,
    /// When (monotonic).
    pub at: Instant,
    /// The task, or the detail the step documents.
    pub id: i64,
}

/// Collected marks, in the order they were taken.
#[derive(Debug, Default)]
pub struct Probe {
    marks: Mutex<Vec<Mark>>,
}

impl Probe {
    /// Records `step` now.
    pub fn mark(&self, step: Step, id: i64) {
        let m = Mark {
            step,
            at: Instant::now(),
            id,
        };
        if let Ok(mut v) = self.marks.lock() {
            v.push(m);
        }
    }

    /// Every mark so far.
    pub fn marks(&self) -> Vec<Mark> {
        self.marks.lock().map(|v| v.clone()).unwrap_or_default()
    }
}
