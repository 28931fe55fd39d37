//! MySQL: schedules (every / cron) and firing their occurrences.

use super::*;

impl MySqlStore {
    async fn schedule_in(tx: &mut Transaction<'_, MySql>, name: &str) -> Result<Option<Schedule>> {
        let row = sqlx::query(sql!(schedules, get))
            .bind(name)
            .fetch_optional(&mut **tx)
            .await?;
        row.as_ref().map(decode_schedule).transpose()
    }
}

#[async_trait]
impl ScheduleStore for MySqlStore {
    async fn schedule_put(&self, p: SchedulePutParams<'_>) -> Result<Schedule> {
        let SchedulePutParams {
            spec,
            next_run_at,
            now,
        } = p;
        let mut tx = self.begin().await?;
        sqlx::query(sql!(schedules, put))
            .bind(&spec.name)
            .bind(serde_json::to_string(spec).map_err(|e| StoreError::Invalid(e.to_string()))?)
            .bind(dt(next_run_at))
            .bind(dt(now))
            .bind(dt(now))
            .execute(&mut *tx)
            .await?;
        let s = Self::schedule_in(&mut tx, &spec.name)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("schedule {}", spec.name)))?;
        tx.commit().await?;
        Ok(s)
    }

    async fn schedule_get(&self, name: &str) -> Result<Option<Schedule>> {
        let row = sqlx::query(sql!(schedules, get))
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(decode_schedule).transpose()
    }

    async fn schedule_list(&self) -> Result<Vec<Schedule>> {
        let rows = sqlx::query(sql!(schedules, list))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(decode_schedule).collect()
    }

    async fn schedule_delete(&self, name: &str) -> Result<bool> {
        let r = sqlx::query("DELETE FROM docket_schedules WHERE name = ?")
            .bind(name)
            .execute(&self.pool)
            .await?;
        Ok(r.rows_affected() == 1)
    }

    async fn schedule_pause(&self, p: SchedulePauseParams<'_>) -> Result<Option<Schedule>> {
        let SchedulePauseParams {
            name,
            paused,
            next_run_at,
            now,
        } = p;
        let mut tx = self.begin().await?;
        let r = sqlx::query(sql!(schedules, pause))
            .bind(paused)
            .bind(dt(next_run_at))
            .bind(dt(now))
            .bind(name)
            .execute(&mut *tx)
            .await?;
        let s = if r.rows_affected() == 0 {
            None
        } else {
            Self::schedule_in(&mut tx, name).await?
        };
        tx.commit().await?;
        Ok(s)
    }

    async fn schedule_due(&self, p: ScheduleDueParams) -> Result<Vec<Schedule>> {
        let ScheduleDueParams { now, limit } = p;
        let rows = sqlx::query(sql!(schedules, due))
            .bind(dt(now))
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(decode_schedule).collect()
    }

    async fn schedule_next_due(&self) -> Result<Option<Timestamp>> {
        let v: Option<Timestamp> = sqlx::query_scalar(
            "SELECT min(next_run_at) FROM docket_schedules WHERE paused = FALSE",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(v)
    }

    async fn schedule_fire(&self, p: ScheduleFireParams) -> Result<ScheduleFired> {
        let mut tx = self.begin().await?;
        // Moving next_run_at from this occurrence is the claim: of two nodes firing the same
        // occurrence, the second's update waits for the first's row lock, then matches nothing.
        let moved = sqlx::query(sql!(schedules, fire))
            .bind(dt(p.next_run_at))
            .bind(dt(p.now))
            .bind(dt(p.now))
            .bind(&p.name)
            .bind(dt(p.occurrence))
            .execute(&mut *tx)
            .await?;
        if moved.rows_affected() == 0 {
            return Ok(ScheduleFired::NotDue);
        }
        let task = match Self::insert_row(&mut tx, &p.task, p.now).await? {
            Some(id) => Self::get_in(&mut tx, id, false).await?.map(|(mut t, _)| {
                t.inserted = Some(true);
                t
            }),
            None => None,
        };
        if let Some(t) = &task {
            sqlx::query("UPDATE docket_schedules SET last_task_id = ? WHERE name = ?")
                .bind(t.id)
                .bind(&p.name)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        if let Some(t) = &task {
            self.wake_queues([&t.queue]);
        }
        Ok(task.map_or(ScheduleFired::KeyHeld, |t| {
            ScheduleFired::Enqueued(Box::new(t))
        }))
    }

    async fn schedule_defer(&self, p: ScheduleDeferParams<'_>) -> Result<bool> {
        let r = sqlx::query(sql!(schedules, defer))
            .bind(dt(p.next_run_at))
            .bind(dt(p.now))
            .bind(p.name)
            .bind(dt(p.occurrence))
            .execute(&self.pool)
            .await?;
        Ok(r.rows_affected() == 1)
    }
}
