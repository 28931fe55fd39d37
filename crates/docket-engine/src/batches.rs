//! Batches (issue 26 item 2): create, add, seal, read, and settle — enqueue the due callbacks
//! once (rules: [`docket_core::batch`]; the store settles under the batch's row lock). The same
//! pass releases the waiting tasks of workflows ([`crate::workflows`]).
//!
//! When a batch settles: this node looks at its unsettled batches as soon as it finished a task
//! (a completion, a failure, a cancel: [`Engine::batches_poke`]) and every
//! [`SWEEP_INTERVAL`] in any case (members finished by another node, by expiry, or by plain
//! SQL). So a callback is enqueued within milliseconds of the last member finishing on a node
//! that knows of unsettled batches, and within one sweep interval otherwise.

use crate::{metrics, Engine, EngineError};
use docket_core::batch::{Batch, NewBatch};
use docket_core::{NewTask, Task};
use docket_store::{BatchAddParams, BatchCreateParams, BatchListParams, BatchSettleParams};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often every node looks at the unsettled batches whatever happened (see the module).
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(1);
/// Unsettled batches read per page of a sweep.
const SWEEP_PAGE: i64 = 200;

impl Engine {
    /// Creates a batch and its members in one transaction (nothing is written when a spec is
    /// bad) and wakes the members' queues.
    ///
    /// # Errors
    /// [`EngineError::Invalid`] for a bad batch ([`docket_core::batch::check`]),
    /// [`EngineError::InvalidTask`] / [`EngineError::Refused`] for a bad member (its index) or
    /// callback (index `tasks.len()` + its place in `completed, succeeded, discarded,
    /// cancelled`), store errors.
    pub async fn batch_create(&self, b: NewBatch) -> Result<(Batch, Vec<Task>), EngineError> {
        docket_core::batch::check(&b).map_err(EngineError::Invalid)?;
        let now = self.clock.now();
        self.check_callbacks(&b, now).await?;
        let tasks = self.resolve_all(b.tasks, now).await?;
        let open = b.open;
        let (batch, out) = self
            .store
            .batch_create(BatchCreateParams {
                name: b.name,
                open,
                callbacks: b.callbacks,
                tasks,
                refs: vec![],
                deps: vec![],
                now,
            })
            .await?;
        self.inserted(&out);
        self.batches_known();
        Ok((batch, out))
    }

    /// The callbacks resolve now as they will at settling (their times are relative).
    pub(crate) async fn check_callbacks(
        &self,
        b: &NewBatch,
        now: docket_core::Timestamp,
    ) -> Result<(), EngineError> {
        let specs: Vec<NewTask> = docket_core::batch::CALLBACKS
            .iter()
            .filter_map(|c| b.callbacks.get(c).cloned())
            .collect();
        self.resolve_all(specs, now).await.map_err(|e| match e {
            EngineError::InvalidTask { index, message } => EngineError::InvalidTask {
                index: b.tasks.len() + index,
                message: format!("callback: {message}"),
            },
            other => other,
        })?;
        Ok(())
    }

    /// Adds members to a batch that has not settled, and seals it when `seal`.
    ///
    /// # Errors
    /// [`EngineError::NotFound`]; [`EngineError::Conflict`] once the batch settled; a bad task
    /// as [`Engine::batch_create`]; store errors. Nothing is written then.
    pub async fn batch_add(
        &self,
        id: i64,
        tasks: Vec<NewTask>,
        seal: bool,
    ) -> Result<(Batch, Vec<Task>), EngineError> {
        docket_core::batch::check_members(&tasks).map_err(EngineError::Invalid)?;
        let now = self.clock.now();
        let tasks = self.resolve_all(tasks, now).await?;
        let (batch, out) = self
            .store
            .batch_add(BatchAddParams {
                id,
                tasks,
                seal,
                refs: vec![],
                deps: vec![],
                now,
            })
            .await?;
        self.inserted(&out);
        self.batches_known();
        if seal {
            // Every member may have finished already: settle now, not at the next sweep.
            self.batches_poke();
        }
        Ok((batch, out))
    }

    /// One batch, its members counted by state.
    ///
    /// # Errors
    /// Store errors.
    pub async fn batch_get(&self, id: i64) -> Result<Option<Batch>, EngineError> {
        Ok(self.store.batch_get(id).await?)
    }

    /// Batches, newest first, with ids below `before`.
    ///
    /// # Errors
    /// Store errors.
    pub async fn batch_list(
        &self,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<Batch>, EngineError> {
        Ok(self
            .store
            .batch_list(BatchListParams { before, limit })
            .await?)
    }

    /// Settles batch `id` if it is due: enqueues its due callbacks once, cluster-wide. `None`
    /// when not due or settled already (by this call's rival on another node, say).
    ///
    /// # Errors
    /// Store errors.
    pub async fn batch_settle(&self, id: i64) -> Result<Option<Batch>, EngineError> {
        let defaults = self.config.defaults;
        let now = self.clock.now();
        let rule: docket_store::BatchSettleRule = Arc::new(move |b, failed, settings| {
            docket_core::batch::callbacks_to_enqueue(b, failed)
                .into_iter()
                .map(|(name, t)| {
                    let q = settings.get(t.queue_name()).cloned();
                    t.resolve(q.as_ref(), &defaults, now)
                        .map(|r| (name.to_string(), r))
                        .map_err(|m| {
                            docket_store::StoreError::Invalid(format!("callback {name}: {m}"))
                        })
                })
                .collect()
        });
        let settled = self
            .store
            .batch_settle(BatchSettleParams { id, rule, now })
            .await?;
        if let Some(b) = &settled {
            ::metrics::counter!(metrics::BATCHES_SETTLED).increment(1);
            for name in b.fired.keys() {
                ::metrics::counter!(metrics::BATCH_CALLBACKS, "callback" => name.clone())
                    .increment(1);
            }
            // The callbacks are tasks like any: wake their queues.
            let mut queues: Vec<&str> = docket_core::batch::CALLBACKS
                .iter()
                .filter(|c| b.fired.contains_key(**c))
                .filter_map(|c| b.callbacks.get(c))
                .map(NewTask::queue_name)
                .collect();
            queues.sort_unstable();
            queues.dedup();
            for q in queues {
                self.waker.wake(q);
            }
            self.waker.wake_scheduler();
            tracing::info!(batch = b.id, callbacks = ?b.fired, "batch settled");
        }
        Ok(settled)
    }

    /// A member may have finished: look at the unsettled batches now (when there are any).
    pub(crate) fn batches_poke(&self) {
        if self.batches.pending.load(Ordering::Relaxed) {
            self.batches.poke.notify_one();
        }
    }

    /// Tasks `ids` finished here (completed, failed, cancelled): what waits on them in a
    /// workflow is looked at in the next pass (when there are unsettled batches), then a poke.
    pub(crate) fn tasks_finished(&self, ids: impl IntoIterator<Item = i64>) {
        if !self.batches.pending.load(Ordering::Relaxed) {
            return;
        }
        if let Ok(mut f) = self.batches.finished.lock() {
            f.extend(ids);
        }
        self.batches.poke.notify_one();
    }

    pub(crate) fn batches_known(&self) {
        self.batches.pending.store(true, Ordering::Relaxed);
    }
}

/// What the settling loop of one engine knows: whether unsettled batches exist (so that a node
/// with none does not look at every completion) and its wake-up.
#[derive(Debug, Default)]
pub(crate) struct BatchWatch {
    pending: std::sync::atomic::AtomicBool,
    poke: tokio::sync::Notify,
    /// Tasks finished on this node since the last pass (see [`Engine::tasks_finished`]).
    finished: std::sync::Mutex<Vec<i64>>,
}

/// Settles every due batch (pages through the sealed, unsettled ones); returns how many
/// settled. First the workflow tasks waiting on tasks this node just finished are decided;
/// with `full`, every waiting task of each unsettled batch is (what finished elsewhere). A batch
/// whose settling fails is logged and counted and tried again next time; the others go on.
///
/// # Errors
/// Store errors reading the list.
pub async fn settle_due(engine: &Engine, full: bool) -> Result<u64, EngineError> {
    let finished = engine
        .batches
        .finished
        .lock()
        .map(|mut f| std::mem::take(&mut *f))
        .unwrap_or_default();
    for chunk in finished.chunks(1000) {
        crate::maintenance::guarded("workflows", engine.workflow_after(chunk)).await;
    }
    let mut after = 0;
    let mut settled = 0;
    let mut seen = false;
    loop {
        let ids = engine.store.batch_unsettled(after, SWEEP_PAGE).await?;
        seen |= !ids.is_empty();
        for id in &ids {
            // A workflow's waiting tasks first: a release means the batch is not done.
            if full {
                crate::maintenance::guarded("workflows", engine.workflow_step(*id)).await;
            }
            if let Some(Some(_)) =
                crate::maintenance::guarded("batches", engine.batch_settle(*id)).await
            {
                settled += 1;
            }
        }
        match ids.last() {
            Some(last) if ids.len() as i64 == SWEEP_PAGE => after = *last,
            _ => break,
        }
    }
    engine.batches.pending.store(seen, Ordering::Relaxed);
    Ok(settled)
}

/// The settling loop of one node, until `cancel` (at once, in the middle of a pass if need be):
/// on a poke (what this node finished), and a full pass every [`SWEEP_INTERVAL`].
pub(crate) async fn run(engine: Engine, cancel: CancellationToken) {
    let mut full = true;
    let mut next_full = tokio::time::Instant::now();
    loop {
        if full {
            next_full = tokio::time::Instant::now() + SWEEP_INTERVAL;
        }
        // A shutdown stops a pass in the middle (its transaction rolls back): with the
        // database gone, a pass would wait for the pool's timeout and hold the node up.
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = crate::maintenance::guarded("batches", settle_due(&engine, full)) => {}
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = engine.batches.poke.notified() => full = false,
            _ = tokio::time::sleep_until(next_full) => full = true,
        }
    }
}
