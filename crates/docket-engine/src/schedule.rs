//! Firing schedules (see [`docket_core::schedule`] for the occurrence policy): every node's
//! maintenance loop fires the schedules that are due; the store's compare-and-set on
//! `next_run_at` makes each occurrence fire once whatever the number of nodes.

use crate::{Engine, EngineError};
use docket_core::schedule::{AfterEndStep, LastRun};
use docket_core::{Schedule, ScheduleSpec, Timestamp};
use docket_store::ScheduleFireParams;
use docket_store::ScheduleFired;

/// Schedules fired per look.
const BATCH: i64 = 100;

impl Engine {
    /// Creates or replaces a schedule; its first occurrence is computed now.
    ///
    /// # Errors
    /// [`EngineError::InvalidSchedule`] naming the bad field; store errors.
    pub async fn schedule_put(&self, mut spec: ScheduleSpec) -> Result<Schedule, EngineError> {
        self.kinds
            .check(&mut spec.task)
            .map_err(|refusal| EngineError::Refused {
                index: None,
                refusal,
            })?;
        spec.validate().map_err(EngineError::InvalidSchedule)?;
        let now = self.clock.now();
        let first = spec
            .first_occurrence(now)
            .map_err(EngineError::InvalidSchedule)?;
        let s = self
            .store
            .schedule_put(docket_store::SchedulePutParams {
                spec: &spec,
                next_run_at: first,
                now,
            })
            .await?;
        self.waker.wake_scheduler();
        Ok(s)
    }

    /// Pauses (`true`) or resumes a schedule. A resumed schedule continues from its next
    /// occurrence after now: the occurrences it missed while paused are not fired.
    ///
    /// # Errors
    /// Store errors; `Ok(None)` when there is no such schedule.
    pub async fn schedule_pause(
        &self,
        name: &str,
        paused: bool,
    ) -> Result<Option<Schedule>, EngineError> {
        let now = self.clock.now();
        let next = if paused {
            None
        } else {
            match self.store.schedule_get(name).await? {
                None => return Ok(None),
                Some(s) if s.next_run_at >= now => None,
                Some(s) => Some(
                    s.spec
                        .next_after(s.next_run_at, now)
                        .map_err(EngineError::InvalidSchedule)?,
                ),
            }
        };
        let s = self
            .store
            .schedule_pause(docket_store::SchedulePauseParams {
                name,
                paused,
                next_run_at: next,
                now,
            })
            .await?;
        self.waker.wake_scheduler();
        Ok(s)
    }
}

/// Fires every due schedule once at `now`; returns how many tasks were enqueued.
///
/// # Errors
/// Store errors.
pub async fn fire_due(engine: &Engine, now: Timestamp) -> Result<u64, EngineError> {
    let mut fired = 0;
    for s in engine
        .store
        .schedule_due(docket_store::ScheduleDueParams { now, limit: BATCH })
        .await?
    {
        let name = s.spec.name.clone();
        if s.spec.after_end {
            let last = match s.last_task_id {
                None => LastRun::None,
                Some(id) => match engine.store.task_get(id).await? {
                    None => LastRun::None,
                    Some(t) if t.state.is_finished() => {
                        LastRun::Finished(t.finished_at.unwrap_or(now))
                    }
                    Some(_) => LastRun::Unfinished,
                },
            };
            if let AfterEndStep::WaitUntil(at) = s.spec.after_end_step(last, now) {
                engine
                    .store
                    .schedule_defer(docket_store::ScheduleDeferParams {
                        name: &name,
                        occurrence: s.next_run_at,
                        next_run_at: at,
                        now,
                    })
                    .await?;
                continue;
            }
        }
        let next = match s.spec.next_after(s.next_run_at, now) {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(schedule = %name, error = %e, "schedule has no next occurrence; pausing it");
                engine
                    .store
                    .schedule_pause(docket_store::SchedulePauseParams {
                        name: &name,
                        paused: true,
                        next_run_at: None,
                        now,
                    })
                    .await?;
                continue;
            }
        };
        let new = s.spec.task_for(s.next_run_at);
        let settings = engine
            .store
            .queue_settings_many(&[new.queue_name().to_string()])
            .await?;
        let task = match new.resolve(settings.values().next(), &engine.config.defaults, now) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(schedule = %name, error = %e, "schedule's task is invalid; pausing it");
                engine
                    .store
                    .schedule_pause(docket_store::SchedulePauseParams {
                        name: &name,
                        paused: true,
                        next_run_at: None,
                        now,
                    })
                    .await?;
                continue;
            }
        };
        let out = engine
            .store
            .schedule_fire(ScheduleFireParams {
                name: name.clone(),
                occurrence: s.next_run_at,
                next_run_at: next,
                task,
                now,
            })
            .await?;
        match out {
            ScheduleFired::Enqueued(t) => {
                fired += 1;
                ::metrics::counter!(crate::metrics::SCHEDULE_RUNS, "schedule" => name.clone())
                    .increment(1);
                crate::metrics::record_enqueued(std::slice::from_ref(&t));
                if t.state == docket_core::TaskState::Available {
                    engine.waker.wake(&t.queue);
                }
                tracing::debug!(schedule = %name, task = t.id, occurrence = %s.next_run_at, "schedule fired");
            }
            ScheduleFired::KeyHeld => {
                tracing::info!(schedule = %name, "schedule fired while its unique key is held; no task")
            }
            ScheduleFired::NotDue => {} // another node fired it
        }
    }
    Ok(fired)
}
