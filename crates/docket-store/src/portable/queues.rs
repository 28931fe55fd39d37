//! Queues: settings, stats, kept counts, history, written once over [`Driver`](crate::driver::Driver).

use super::counts::{counts, counts_lock};
use super::prelude::*;

#[async_trait]
impl<D: Driver> QueueStore for D {
    async fn queue_oldest_available(&self) -> Result<Vec<QueueOldest>> {
        let rows = self.fetch(stmt!(queues, oldest_available), args![]).await?;
        rows.iter()
            .map(|r| {
                Ok(QueueOldest {
                    queue: r.text("queue")?,
                    run_at: r.time("run_at")?,
                })
            })
            .collect()
    }

    async fn queue_settings_many(
        &self,
        names: &[String],
    ) -> Result<HashMap<String, QueueSettings>> {
        let rows = self
            .fetch(stmt!(queues, settings_many), &[Arg::Texts(names)])
            .await?;
        rows.iter()
            .map(|r| Ok((r.text("name")?, crate::row::queue_settings(r)?)))
            .collect()
    }

    async fn queue_list(&self) -> Result<Vec<QueueStats>> {
        let counts = counts(self, None).await?;
        let rows = self.fetch(stmt!(queues, list), args![]).await?;
        let settings = rows
            .iter()
            .map(|r| {
                Ok((
                    r.text("name")?,
                    row::queue_settings(r)?,
                    row::queue_times(r)?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(merge_queues(settings, counts))
    }

    async fn counts_step(&self, p: CountsStepParams) -> Result<Option<CountsStepped>> {
        let mut tx = self.begin().await?;
        let counted_to = counts_lock(&mut tx).await?;
        let recounted_at = match tx
            .fetch_one(stmt!(queues, counts_recounted), args![])
            .await?
        {
            Some(r) => r.time_opt("recounted_at")?,
            None => None,
        };
        let Some(step) =
            docket_core::counts::step(counted_to, recounted_at, p.now, p.recount_every)
        else {
            return Ok(None);
        };
        let rows = tx
            .fetch(stmt!(queues, counts_finished), args![step.from, step.to])
            .await?;
        if step.from.is_none() {
            tx.execute(stmt!(queues, counts_clear), args![]).await?;
        }
        let mut counted = 0;
        for r in &rows {
            let n = r.int("n")?;
            counted += n;
            let (queue, state) = (r.text("queue")?, r.text("state")?);
            tx.execute(
                stmt!(queues, counts_add),
                args![queue.as_str(), state.as_str(), n],
            )
            .await?;
        }
        // The per-minute counts of the same range (each finished task lands once) with their
        // pickup latency by bucket (docket_core::history), kept a day.
        let (from, floor) = docket_core::counts::minutes(counted_to, step.to);
        let mut minutes: HashMap<(String, Timestamp), [i64; 3]> = HashMap::new();
        for r in tx
            .fetch(stmt!(queues, counts_minutes), args![from, step.to])
            .await?
        {
            let (queue, minute) = (r.text("queue")?, r.time("minute")?);
            let n = [
                r.int("completed")?,
                r.int("discarded")?,
                r.int("cancelled")?,
            ];
            if let Some(bucket) = r.int_opt("bucket")? {
                tx.execute(
                    stmt!(queues, latency_add),
                    args![queue.as_str(), minute, bucket, n.iter().sum::<i64>()],
                )
                .await?;
            }
            let m = minutes.entry((queue, minute)).or_default();
            for (a, b) in m.iter_mut().zip(n) {
                *a += b;
            }
        }
        for ((queue, minute), [completed, discarded, cancelled]) in &minutes {
            tx.execute(
                stmt!(queues, minutes_add),
                args![queue.as_str(), *minute, *completed, *discarded, *cancelled],
            )
            .await?;
        }
        // The depth once a minute: the first step past a minute's start samples it.
        if let Some(m) = docket_core::history::depth_minute(counted_to, step.to) {
            tx.execute(stmt!(queues, depth_sample), args![m]).await?;
        }
        tx.execute(stmt!(queues, minutes_prune), args![floor])
            .await?;
        tx.execute(stmt!(queues, latency_prune), args![floor])
            .await?;
        let recounted = step.from.is_none().then_some(p.now);
        tx.execute(stmt!(queues, counts_moved), args![step.to, recounted])
            .await?;
        tx.commit().await?;
        Ok(Some(CountsStepped { step, counted }))
    }

    async fn queue_history(&self, p: QueueHistoryParams) -> Result<docket_core::history::History> {
        use docket_core::history::{LatencyCount, Minute, BUCKETS};
        let q = p.queue.as_deref();
        let mut h = docket_core::history::History::default();
        for r in self
            .fetch(stmt!(queues, history_minutes), args![q, p.since])
            .await?
        {
            h.minutes.push(Minute {
                minute: r.time("minute")?,
                completed: r.int("completed")?,
                discarded: r.int("discarded")?,
                cancelled: r.int("cancelled")?,
                available: r.int_opt("available")?,
                running: r.int_opt("running")?,
            });
        }
        for r in self
            .fetch(stmt!(queues, history_latency), args![q, p.since])
            .await?
        {
            let bucket = r.int("bucket")?;
            h.latency.push(LatencyCount {
                minute: r.time("minute")?,
                bucket: usize::try_from(bucket).unwrap_or(BUCKETS).min(BUCKETS - 1),
                n: r.int("n")?,
            });
        }
        Ok(h)
    }

    async fn queue_get(&self, name: &str) -> Result<QueueStats> {
        let row = self.fetch_one(stmt!(queues, get), args![name]).await?;
        let (settings, (created_at, updated_at)) = match &row {
            Some(r) => (row::queue_settings(r)?, row::queue_times(r)?),
            None => Default::default(),
        };
        let counts = counts(self, Some(name))
            .await?
            .remove(name)
            .unwrap_or_else(empty_counts);
        Ok(QueueStats {
            name: name.to_string(),
            settings,
            counts,
            created_at,
            updated_at,
        })
    }

    async fn queue_put(&self, p: QueuePutParams<'_>) -> Result<QueueStats> {
        let s = p.settings;
        let ms = |d: Option<std::time::Duration>| d.map(docket_core::duration::to_ms);
        let backoff = s
            .backoff
            .map(|b| serde_json::to_value(b).expect("backoff serialises"));
        let weights = s
            .partition_weights
            .as_ref()
            .map(|w| serde_json::to_value(w).expect("weights serialise"));
        let mut tx = self.begin().await?;
        tx.execute(
            stmt!(queues, put),
            args![
                p.name,
                s.paused,
                s.concurrency_limit,
                s.max_attempts,
                backoff.as_ref(),
                ms(s.timeout),
                ms(s.retention_completed),
                ms(s.retention_failed),
                p.now,
                s.mask_payload,
                s.schedule_limit,
                ms(s.schedule_interval),
                s.rate_limit.as_deref(),
                s.fair,
                weights.as_ref(),
                s.partition_limit,
                s.dead_letter.as_deref(),
            ],
        )
        .await?;
        if !s.paused {
            // Resuming may make tasks claimable: wake the claimers.
            tx.wake(&[p.name.to_string()]).await?;
        }
        tx.commit().await?;
        self.queue_get(p.name).await
    }
}
