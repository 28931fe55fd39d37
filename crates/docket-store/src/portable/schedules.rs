//! Schedules, written once over [`Driver`](crate::driver::Driver).

use super::prelude::*;

#[async_trait]
impl<D: Driver> ScheduleStore for D {
    async fn schedule_put(&self, p: SchedulePutParams<'_>) -> Result<Schedule> {
        let spec = serde_json::to_value(p.spec).expect("a schedule serialises");
        self.execute(
            stmt!(schedules, put),
            args![&p.spec.name, &spec, p.next_run_at, p.now],
        )
        .await?;
        self.schedule_get(&p.spec.name)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("schedule {}", p.spec.name)))
    }

    async fn schedule_get(&self, name: &str) -> Result<Option<Schedule>> {
        let row = self.fetch_one(stmt!(schedules, get), args![name]).await?;
        row.as_ref().map(row::schedule).transpose()
    }

    async fn schedule_list(&self) -> Result<Vec<Schedule>> {
        let rows = self.fetch(stmt!(schedules, list), args![]).await?;
        rows.iter().map(row::schedule).collect()
    }

    async fn schedule_delete(&self, name: &str) -> Result<bool> {
        Ok(self.execute(stmt!(schedules, delete), args![name]).await? == 1)
    }

    async fn schedule_pause(&self, p: SchedulePauseParams<'_>) -> Result<Option<Schedule>> {
        let n = self
            .execute(
                stmt!(schedules, pause),
                args![p.name, p.paused, p.next_run_at, p.now],
            )
            .await?;
        if n == 0 {
            return Ok(None);
        }
        self.schedule_get(p.name).await
    }

    async fn schedule_due(&self, p: ScheduleDueParams) -> Result<Vec<Schedule>> {
        let rows = self
            .fetch(stmt!(schedules, due), args![p.now, p.limit])
            .await?;
        rows.iter().map(row::schedule).collect()
    }

    async fn schedule_next_due(&self) -> Result<Option<Timestamp>> {
        let row = self.fetch_one(stmt!(schedules, next_due), args![]).await?;
        Ok(row.map(|r| r.time_opt("t")).transpose()?.flatten())
    }

    async fn schedule_fire(&self, p: ScheduleFireParams) -> Result<ScheduleFired> {
        again(|| async {
            let mut tx = self.begin().await?;
            // Moving next_run_at from this occurrence is the claim (see sql/schedules.sql).
            let moved = tx
                .execute(
                    stmt!(schedules, fire),
                    args![&p.name, p.occurrence, p.next_run_at, p.now],
                )
                .await?;
            if moved == 0 {
                return Ok(ScheduleFired::NotDue);
            }
            let task = tx.insert_task(&p.task, p.now).await?;
            if let Some(t) = &task {
                tx.execute(stmt!(schedules, last_task), args![&p.name, t.id])
                    .await?;
            }
            tx.commit().await?;
            Ok(task.map_or(ScheduleFired::KeyHeld, |t| {
                ScheduleFired::Enqueued(Box::new(t))
            }))
        })
        .await
    }

    async fn schedule_defer(&self, p: ScheduleDeferParams<'_>) -> Result<bool> {
        let n = self
            .execute(
                stmt!(schedules, defer),
                args![p.name, p.occurrence, p.next_run_at, p.now],
            )
            .await?;
        Ok(n == 1)
    }
}
