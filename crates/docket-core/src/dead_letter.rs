//! Dead-letter queues (issue 43; pg-boss's `deadLetter`, River #360): a queue setting
//! `dead_letter: "<queue>"` makes every task of the queue discarded after its last attempt (a
//! fail rule's or the rescuer's discard, not a cancel and not an expiry) also enqueue a task into
//! that queue, in the same transaction as the discard. The rules of what it carries are here;
//! the store applies them where every failure is written.

pub use crate::task::DeadLetterOf;
use crate::{NewTask, Task, Timestamp};

/// Whether discarding `t` makes a dead letter in `dead_letter` (its queue's setting): not when
/// `t` is itself a dead letter (a chain of dead-letter queues could loop), nor into its own
/// queue.
pub fn wanted(t: &Task, dead_letter: Option<&str>) -> bool {
    dead_letter.is_some_and(|q| q != t.queue) && t.dead_letter_of.is_none()
}

/// The dead letter of `t` (as its discard left it: its errors include the last attempt's) in
/// queue `dead_letter`: the same kind and payload, so the same handler can take it there, its
/// priority, user, partition and trace id (the trace goes on); attempts, backoff and timeout
/// are the dead-letter queue's (else docket's built-in defaults), and it can run at once.
pub fn spec(t: &Task, dead_letter: &str) -> NewTask {
    NewTask {
        queue: Some(dead_letter.to_string()),
        priority: Some(t.priority),
        user_id: t.user_id.clone(),
        partition_key: t.partition_key.clone(),
        trace_id: t.trace_id.clone(),
        tags: t.tags.clone(),
        ..NewTask::new(&t.kind, t.payload.clone())
    }
}

/// The link a dead letter of `t` carries, `t` discarded at `at` (kept to the microsecond, as
/// every stored time).
pub fn of(t: &Task, at: Timestamp) -> DeadLetterOf {
    use chrono::SubsecRound;
    DeadLetterOf {
        task_id: t.id,
        queue: t.queue.clone(),
        kind: t.kind.clone(),
        attempts: t.attempt,
        errors: t.errors.clone(),
        discarded_at: at.trunc_subsecs(6),
    }
}
