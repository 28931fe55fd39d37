//! PostgreSQL: queues: settings, counts, pause.

use super::*;

#[async_trait]
impl QueueStore for PgStore {
    async fn queue_settings_many(
        &self,
        names: &[String],
    ) -> Result<HashMap<String, QueueSettings>> {
        let rows = sqlx::query("SELECT * FROM docket_queues WHERE name = ANY($1)")
            .bind(names)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get::<String, _>("name")?, queue_settings(r)?)))
            .collect()
    }

    async fn queue_list(&self) -> Result<Vec<QueueStats>> {
        let counts = self.counts(None).await?;
        let rows = sqlx::query("SELECT * FROM docket_queues")
            .fetch_all(&self.pool)
            .await?;
        let settings = rows
            .iter()
            .map(|r| {
                Ok((
                    r.try_get::<String, _>("name")?,
                    queue_settings(r)?,
                    queue_times(r)?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(merge_queues(settings, counts))
    }

    async fn queue_get(&self, name: &str) -> Result<QueueStats> {
        let row = sqlx::query("SELECT * FROM docket_queues WHERE name = $1")
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
            .map(|b| serde_json::to_value(b).expect("backoff serialises"));
        sqlx::query(sql!(queues, put))
            .bind(name)
            .bind(s.paused)
            .bind(s.concurrency_limit)
            .bind(s.max_attempts)
            .bind(backoff)
            .bind(s.timeout.map(ms))
            .bind(s.retention_completed.map(ms))
            .bind(s.retention_failed.map(ms))
            .bind(now)
            .bind(s.mask_payload)
            .bind(s.schedule_limit)
            .bind(s.schedule_interval.map(ms))
            .execute(&self.pool)
            .await?;
        if !s.paused {
            // Resuming may make tasks claimable: wake the claimers.
            let mut tx = self.pool.begin().await?;
            self.notify(&mut tx, &[name.to_string()]).await?;
            tx.commit().await?;
        }
        self.queue_get(name).await
    }

    async fn queue_oldest_available(&self) -> Result<Vec<QueueOldest>> {
        let rows: Vec<(String, Timestamp)> = sqlx::query_as(
            "SELECT queue, min(run_at) FROM docket_tasks WHERE state = 'available' GROUP BY queue",
        )
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(queue, run_at)| QueueOldest { queue, run_at })
            .collect())
    }
}
