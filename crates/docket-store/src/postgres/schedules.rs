//! PostgreSQL: schedules (every / cron) and firing their occurrences.

use super::*;

#[async_trait]
impl ScheduleStore for PgStore {
    async fn schedule_put(&self, p: SchedulePutParams<'_>) -> Result<Schedule> {
        let SchedulePutParams {
            spec,
            next_run_at,
            now,
        } = p;
        let row = sqlx::query(sql!(schedules, put))
            .bind(&spec.name)
            .bind(sqlx::types::Json(spec))
            .bind(next_run_at)
            .bind(now)
            .fetch_one(&self.pool)
            .await?;
        decode_schedule(&row)
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
        let r = sqlx::query("DELETE FROM docket_schedules WHERE name = $1")
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
        let row = sqlx::query(sql!(schedules, pause))
            .bind(name)
            .bind(paused)
            .bind(next_run_at)
            .bind(now)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(decode_schedule).transpose()
    }

    async fn schedule_due(&self, p: ScheduleDueParams) -> Result<Vec<Schedule>> {
        let ScheduleDueParams { now, limit } = p;
        let rows = sqlx::query(sql!(schedules, due))
            .bind(now)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(decode_schedule).collect()
    }

    async fn schedule_next_due(&self) -> Result<Option<Timestamp>> {
        Ok(
            sqlx::query_scalar("SELECT min(next_run_at) FROM docket_schedules WHERE NOT paused")
                .fetch_one(&self.pool)
                .await?,
        )
    }

    async fn schedule_fire(&self, p: ScheduleFireParams) -> Result<ScheduleFired> {
        let mut tx = self.pool.begin().await?;
        let moved = sqlx::query(sql!(schedules, fire))
            .bind(&p.name)
            .bind(p.occurrence)
            .bind(p.next_run_at)
            .bind(p.now)
            .execute(&mut *tx)
            .await?;
        if moved.rows_affected() == 0 {
            return Ok(ScheduleFired::NotDue);
        }
        let task = match self.insert_one(&mut tx, p.task, p.now).await {
            Ok(t) => Some(t),
            Err(StoreError::Conflict(_)) => None,
            Err(e) => return Err(e),
        };
        if let Some(t) = &task {
            sqlx::query("UPDATE docket_schedules SET last_task_id = $2 WHERE name = $1")
                .bind(&p.name)
                .bind(t.id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(task.map_or(ScheduleFired::KeyHeld, |t| {
            ScheduleFired::Enqueued(Box::new(t))
        }))
    }

    async fn schedule_defer(&self, p: ScheduleDeferParams<'_>) -> Result<bool> {
        let r = sqlx::query(sql!(schedules, defer))
            .bind(p.name)
            .bind(p.occurrence)
            .bind(p.next_run_at)
            .bind(p.now)
            .execute(&self.pool)
            .await?;
        Ok(r.rows_affected() == 1)
    }
}
