//! MySQL: queues: settings, counts, pause.

use super::*;

#[async_trait]
impl QueueStore for MySqlStore {
    async fn queue_settings_many(
        &self,
        names: &[String],
    ) -> Result<HashMap<String, QueueSettings>> {
        if names.is_empty() {
            return Ok(HashMap::new());
        }
        let sql = format!(
            "SELECT * FROM docket_queues WHERE name IN ({})",
            marks(names.len())
        );
        let mut q = sqlx::query(&sql);
        for n in names {
            q = q.bind(n);
        }
        let rows = q.fetch_all(&self.pool).await?;
        rows.iter()
            .map(|r| Ok((text(r, "name")?, queue_settings(r)?)))
            .collect()
    }

    async fn queue_list(&self) -> Result<Vec<QueueStats>> {
        let counts = self.counts(None).await?;
        let rows = sqlx::query("SELECT * FROM docket_queues")
            .fetch_all(&self.pool)
            .await?;
        let settings = rows
            .iter()
            .map(|r| Ok((text(r, "name")?, queue_settings(r)?, queue_times(r)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(merge_queues(settings, counts))
    }

    async fn queue_get(&self, name: &str) -> Result<QueueStats> {
        let row = sqlx::query("SELECT * FROM docket_queues WHERE name = ?")
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        let settings = row
            .as_ref()
            .map(queue_settings)
            .transpose()?
            .unwrap_or_default();
        let (created_at, updated_at) = row
            .as_ref()
            .map(queue_times)
            .transpose()?
            .unwrap_or_default();
        let counts = self
            .counts(Some(name))
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
        let QueuePutParams {
            name,
            settings: s,
            now,
        } = p;
        let backoff = s
            .backoff
            .map(|b| serde_json::to_string(&b).expect("backoff serialises"));
        let mut tx = self.begin().await?;
        sqlx::query(sql!(queues, put))
            .bind(name)
            .bind(s.paused)
            .bind(s.concurrency_limit)
            .bind(s.max_attempts)
            .bind(backoff)
            .bind(s.timeout.map(ms))
            .bind(s.retention_completed.map(ms))
            .bind(s.retention_failed.map(ms))
            .bind(dt(now))
            .bind(s.mask_payload)
            .bind(s.schedule_limit)
            .bind(s.schedule_interval.map(ms))
            .bind(dt(now))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        // Unpaused, or a limit raised: claimers look again.
        self.wake_queues([&name.to_string()]);
        self.queue_get(name).await
    }

    async fn queue_oldest_available(&self) -> Result<Vec<QueueOldest>> {
        let rows = sqlx::query(
            "SELECT queue, min(run_at) AS run_at FROM docket_tasks WHERE state = 'available' GROUP BY queue",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(QueueOldest {
                    run_at: r.time("run_at")?,
                    queue: text(r, "queue")?,
                })
            })
            .collect()
    }
}
