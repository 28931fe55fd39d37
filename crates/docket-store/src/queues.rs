//! Queues: settings, counts, pause ([`QueueStore`]).

use crate::Result;
use async_trait::async_trait;
pub use docket_core::api::QueueOldest;
use docket_core::{QueueSettings, QueueStats, TaskState, Timestamp};
use std::collections::HashMap;

/// Queues: settings, counts, pause.
#[async_trait]
pub trait QueueStore: Send + Sync {
    /// The `run_at` of the oldest available task of each queue that has one.
    ///
    /// # Errors
    /// Database failure.
    async fn queue_oldest_available(&self) -> Result<Vec<QueueOldest>>;

    /// Settings of the named queues that have a row (others use defaults).
    ///
    /// # Errors
    /// Database failure.
    async fn queue_settings_many(&self, names: &[String])
        -> Result<HashMap<String, QueueSettings>>;

    /// Every queue that has tasks or settings, with counts by state.
    ///
    /// # Errors
    /// Database failure.
    async fn queue_list(&self) -> Result<Vec<QueueStats>>;

    /// One queue (a queue with neither tasks nor settings shows defaults and zero counts).
    ///
    /// # Errors
    /// Database failure.
    async fn queue_get(&self, name: &str) -> Result<QueueStats>;

    /// One step of the kept counts of finished tasks ([`docket_core::counts`]): under the
    /// counts' lock, decides with [`docket_core::counts::step`] whether to recount from scratch
    /// (every `recount_every`), advance `counted_to` to `now - LAG`, or do nothing, and
    /// applies it. Safe on any number of nodes at once (they take turns on the lock). Returns
    /// the step taken and how many finished tasks it counted.
    ///
    /// # Errors
    /// Database failure.
    async fn counts_step(&self, p: CountsStepParams) -> Result<Option<CountsStepped>>;

    /// The charts' history since `p.since` ([`docket_core::history`]), of queue `p.queue` or of
    /// all queues: finished tasks and sampled depth per minute, pickup latency counts per minute
    /// and bucket. Written by [`QueueStore::counts_step`], so it lags the clock by about
    /// [`docket_core::counts::LAG`].
    ///
    /// # Errors
    /// Database failure.
    async fn queue_history(&self, p: QueueHistoryParams) -> Result<docket_core::history::History>;

    /// Replaces a queue's settings.
    ///
    /// # Errors
    /// Database failure.
    async fn queue_put(&self, p: QueuePutParams<'_>) -> Result<QueueStats>;

    /// Pauses or resumes a queue, keeping its other settings.
    ///
    /// # Errors
    /// Database failure.
    async fn queue_set_paused(&self, p: QueueSetPausedParams<'_>) -> Result<QueueStats> {
        let mut settings = self.queue_get(p.name).await?.settings;
        settings.paused = p.paused;
        self.queue_put(QueuePutParams {
            name: p.name,
            settings: &settings,
            now: p.now,
        })
        .await
    }
}

/// Params of [`QueueStore::queue_put`].
#[derive(Debug, Clone)]
pub struct QueuePutParams<'a> {
    /// The queue.
    pub name: &'a str,
    /// The queue's new settings (replacing all of them).
    pub settings: &'a QueueSettings,
    /// The current time (the engine's clock).
    pub now: Timestamp,
}

/// Params of [`QueueStore::counts_step`].
#[derive(Debug, Clone, Copy)]
pub struct CountsStepParams {
    /// The current time (the engine's clock).
    pub now: Timestamp,
    /// How often to recount from scratch ([`docket_core::counts::RECOUNT_EVERY`]).
    pub recount_every: std::time::Duration,
}

/// What [`QueueStore::counts_step`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountsStepped {
    /// The step: a full recount when `from` is `None`.
    pub step: docket_core::counts::Step,
    /// Finished tasks it counted.
    pub counted: i64,
}

/// Params of [`QueueStore::queue_set_paused`].
#[derive(Debug, Clone)]
pub struct QueueSetPausedParams<'a> {
    /// The queue.
    pub name: &'a str,
    /// Paused (true) or running (false).
    pub paused: bool,
    /// The current time (the engine's clock).
    pub now: Timestamp,
}

/// A queue settings row's created_at and updated_at.
pub(crate) type QueueTimes = (Option<Timestamp>, Option<Timestamp>);

/// Every queue that has settings or tasks, by name: settings rows joined with counts by state.
pub(crate) fn merge_queues(
    settings: Vec<(String, QueueSettings, QueueTimes)>,
    mut counts: HashMap<String, std::collections::BTreeMap<TaskState, i64>>,
) -> Vec<QueueStats> {
    let mut out: Vec<QueueStats> = settings
        .into_iter()
        .map(|(name, settings, times)| QueueStats {
            counts: counts.remove(&name).unwrap_or_else(empty_counts),
            name,
            settings,
            created_at: times.0,
            updated_at: times.1,
        })
        .collect();
    out.extend(counts.into_iter().map(|(name, counts)| QueueStats {
        name,
        settings: QueueSettings::default(),
        counts,
        ..QueueStats::default()
    }));
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Zero counts for every state, so answers always list all seven.
pub(crate) fn empty_counts() -> std::collections::BTreeMap<TaskState, i64> {
    TaskState::ALL.into_iter().map(|s| (s, 0)).collect()
}

/// Params of [`QueueStore::queue_history`].
#[derive(Debug, Clone)]
pub struct QueueHistoryParams {
    /// One queue, or all.
    pub queue: Option<String>,
    /// From this minute on.
    pub since: Timestamp,
}
