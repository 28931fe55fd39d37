//! SQLite: schedules (every / cron) and firing their occurrences.

use super::*;

#[async_trait]
impl ScheduleStore for SqliteStore {
    async fn schedule_put(&self, p: SchedulePutParams<'_>) -> Result<Schedule> {
        let SchedulePutParams {
            spec,
            next_run_at,
            now,
        } = p;
        let mut tx = self.begin().await?;
        let row = sqlx::query(sql!(schedules, put))
            .bind(&spec.name)
            .bind(serde_json::to_string(spec).map_err(|e| StoreError::Invalid(e.to_string()))?)
            .bind(us(next_run_at))
            .bind(us(now))
            .fetch_one(&mut *tx)
            .await?;
        let s = decode_schedule(&row)?;
        tx.commit().await?;
        Ok(s)
    }

    async fn schedule_get(&self, name: &str) -> Result<Option<Schedule>> {
        let row = sqlx::query(sql!(schedules, get))
            .bind(name)
            .fetch_optional(&self.reader)
            .await?;
        row.as_ref().map(decode_schedule).transpose()
    }

    async fn schedule_list(&self) -> Result<Vec<Schedule>> {
        let rows = sqlx::query(sql!(schedules, list))
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(decode_schedule).collect()
    }

    async fn schedule_delete(&self, name: &str) -> Result<bool> {
        let mut tx = self.begin().await?;
        let r = sqlx::query("DELETE FROM docket_schedules WHERE name = ?1")
            .bind(name)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
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
        let row = sqlx::query(sql!(schedules, pause))
            .bind(name)
            .bind(paused)
            .bind(next_run_at.map(us))
            .bind(us(now))
            .fetch_optional(&mut *tx)
            .await?;
        let s = row.as_ref().map(decode_schedule).transpose()?;
        tx.commit().await?;
        Ok(s)
    }

    async fn schedule_due(&self, p: ScheduleDueParams) -> Result<Vec<Schedule>> {
        let ScheduleDueParams { now, limit } = p;
        let rows = sqlx::query(sql!(schedules, due))
            .bind(us(now))
            .bind(limit)
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(decode_schedule).collect()
    }

    async fn schedule_next_due(&self) -> Result<Option<Timestamp>> {
        let v: Option<i64> =
            sqlx::query_scalar("SELECT min(next_run_at) FROM docket_schedules WHERE paused = 0")
                .fetch_one(&self.reader)
                .await?;
        Ok(v.map(from_us))
    }

    async fn schedule_fire(&self, p: ScheduleFireParams) -> Result<ScheduleFired> {
        let mut tx = self.begin().await?;
        let moved = sqlx::query(sql!(schedules, fire))
            .bind(&p.name)
            .bind(us(p.occurrence))
            .bind(us(p.next_run_at))
            .bind(us(p.now))
            .execute(&mut *tx)
            .await?;
        if moved.rows_affected() == 0 {
            return Ok(ScheduleFired::NotDue);
        }
        let task = Self::insert_row(&mut tx, &p.task, p.now)
            .await?
            .map(|id| p.task.clone().into_task(id, from_us(us(p.now))));
        if let Some(t) = &task {
            sqlx::query("UPDATE docket_schedules SET last_task_id = ?2 WHERE name = ?1")
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
            .bind(us(p.occurrence))
            .bind(us(p.next_run_at))
            .bind(us(p.now))
            .execute(&self.writer)
            .await?;
        Ok(r.rows_affected() == 1)
    }
}
