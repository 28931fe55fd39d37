//! SQLite: tasks: insert, read, list, and the operator changes of one task.

use super::*;

#[async_trait]
impl TaskStore for SqliteStore {
    async fn task_insert_many(&self, p: TaskInsertManyParams) -> Result<Vec<Task>> {
        if p.tasks.is_empty() {
            return Ok(vec![]);
        }
        let mut tx = self.begin().await?;
        let existing = sql!(tasks, unfinished_by_unique_key);
        let mut out = Vec::with_capacity(p.tasks.len());
        for t in p.tasks {
            let id = Self::insert_row(&mut tx, &t, p.now).await?;
            let task = match id {
                Some(id) => t.into_task(id, from_us(us(p.now))),
                None => {
                    let r = sqlx::query(existing)
                        .bind(&t.unique_key)
                        .fetch_optional(&mut *tx)
                        .await?
                        .ok_or_else(|| StoreError::Conflict("insert refused".into()))?;
                    let mut t = decode(&r)?;
                    t.inserted = Some(false);
                    t
                }
            };
            out.push(task);
        }
        tx.commit().await?;
        // As PostgreSQL's insert trigger does: listeners learn of new available work.
        self.wake_queues(
            out.iter()
                .filter(|t| t.inserted != Some(false) && t.state == TaskState::Available)
                .map(|t| &t.queue),
        );
        Ok(out)
    }

    async fn task_get(&self, id: i64) -> Result<Option<Task>> {
        let sql = sql!(tasks, get);
        let row = sqlx::query(sql)
            .bind(id)
            .fetch_optional(&self.reader)
            .await?;
        row.as_ref().map(decode).transpose()
    }

    async fn task_list(&self, p: TaskListParams) -> Result<Vec<Task>> {
        let rows = list_query(&list_sql(&p), &p)
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(decode).collect()
    }

    async fn task_count(&self, p: TaskListParams) -> Result<i64> {
        let sql = format!("SELECT count(*) FROM ({}) x", list_sql(&p));
        let row = list_query(&sql, &p).fetch_one(&self.reader).await?;
        Ok(row.try_get::<i64, _>(0)?)
    }

    async fn task_delete(&self, ids: &[i64]) -> Result<u64> {
        crate::portable::task_delete(self, ids).await
    }

    async fn task_cancel(&self, p: TaskCancelParams) -> Result<Task> {
        let TaskCancelParams { id, now } = p;
        let sql = sql!(tasks, cancel);
        let mut tx = self.begin().await?;
        let row = sqlx::query(sql)
            .bind(id)
            .bind(us(now))
            .fetch_optional(&mut *tx)
            .await?;
        let found = match &row {
            Some(r) => Some(decode(r)?),
            None => Self::get_in(&mut tx, id).await?.map(|x| x.0),
        };
        tx.commit().await?;
        match (row, found) {
            (Some(_), Some(t)) => Ok(t),
            (_, None) => Err(StoreError::NotFound(format!("task {id}"))),
            (None, Some(t)) if t.state == TaskState::Cancelled => Ok(t),
            (None, Some(t)) => Err(StoreError::InvalidState(format!(
                "task {id} is {} and cannot be cancelled",
                t.state
            ))),
        }
    }

    async fn task_retry(&self, p: TaskRetryParams) -> Result<Task> {
        let TaskRetryParams { id, now } = p;
        let sql = sql!(tasks, retry);
        let mut t = self.tx_of(self.begin().await?);
        crate::portable::counts_before_retry(&mut t, id).await?;
        let mut tx = t.into_inner();
        let row = sqlx::query(sql)
            .bind(id)
            .bind(us(now))
            .fetch_optional(&mut *tx)
            .await?;
        if let Some(r) = row {
            tx.commit().await?;
            return decode(&r);
        }
        let found = Self::get_in(&mut tx, id).await?;
        tx.commit().await?;
        match found {
            None => Err(StoreError::NotFound(format!("task {id}"))),
            Some((t, _)) => Err(StoreError::InvalidState(format!(
                "task {id} is {}; only discarded or cancelled tasks can be retried",
                t.state
            ))),
        }
    }

    async fn task_next_due(&self) -> Result<Option<Timestamp>> {
        let v: Option<i64> = sqlx::query_scalar(
            "SELECT min(run_at) FROM docket_tasks WHERE state IN ('scheduled','retryable')",
        )
        .fetch_one(&self.reader)
        .await?;
        Ok(v.map(from_us))
    }

    async fn task_find_by_unique_key(&self, key: &str) -> Result<Option<Task>> {
        let sql = sql!(tasks, by_unique_key);
        let row = sqlx::query(sql)
            .bind(key)
            .fetch_optional(&self.reader)
            .await?;
        row.as_ref().map(decode).transpose()
    }

    async fn task_run_now(&self, p: TaskRunNowParams) -> Result<Task> {
        let TaskRunNowParams { id, now } = p;
        let mut tx = self.begin().await?;
        let row = sqlx::query(sql!(tasks, run_now))
            .bind(id)
            .bind(us(now))
            .fetch_optional(&mut *tx)
            .await?;
        tx.commit().await?;
        match row {
            Some(r) => {
                let t = decode(&r)?;
                self.wake_queues([&t.queue]);
                Ok(t)
            }
            None => match self.task_get(id).await? {
                None => Err(StoreError::NotFound(format!("task {id}"))),
                Some(t) => Err(StoreError::InvalidState(format!(
                    "task {id} is {}; only scheduled or retryable tasks can run now",
                    t.state.as_str()
                ))),
            },
        }
    }

    async fn task_update(&self, p: TaskUpdateParams) -> Result<Task> {
        let mut tx = self.begin().await?;
        let Some((t, nonce)) = Self::get_in(&mut tx, p.id).await? else {
            return Err(StoreError::NotFound(format!("task {}", p.id)));
        };
        let n = (p.rule)(&t, lease::token_string(nonce, t.id).as_deref())?;
        let sql = sql!(tasks, update);
        let row = sqlx::query(sql)
            .bind(p.id)
            .bind(&n.queue)
            .bind(n.priority)
            .bind(us(n.run_at))
            .bind(n.state.as_str())
            .bind(n.payload.to_string())
            .bind(&n.node)
            .bind(n.max_attempts)
            .bind(&n.stage)
            .bind(n.progress.as_ref().map(Value::to_string))
            .bind(n.attempt)
            .bind(n.backoff.kind.as_str())
            .bind(docket_core::duration::to_ms(n.backoff.initial))
            .bind(n.backoff.coefficient)
            .bind(docket_core::duration::to_ms(n.backoff.max))
            .bind(n.backoff.jitter)
            .bind(us(n.updated_at))
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        let t = decode(&row)?;
        if t.state == TaskState::Available {
            self.wake_queues([&t.queue]);
        }
        Ok(t)
    }

    async fn task_throughput(&self, since: Timestamp) -> Result<Vec<Throughput>> {
        // See the PostgreSQL store: counted_to bound. One lower bound, the later of the two:
        // with both, SQLite ranged over the index by `since` (an hour of finished tasks, 430 ms
        // at 1M) and filtered by counted_to.
        let counted_to = crate::portable::counted_to(self).await?;
        let minute = us(since).div_euclid(60_000_000) * 60_000_000;
        let rows: Vec<(i64, i64, i64)> = sqlx::query_as(sql!(tasks, throughput))
            .bind(us(since))
            .bind(us(counted_to).max(minute - 1))
            .fetch_all(&self.reader)
            .await?;
        rows.into_iter()
            .map(|(m, completed, failed)| {
                Ok(Throughput {
                    minute: decode::micros("throughput", "minute", m)?,
                    completed,
                    failed,
                })
            })
            .collect()
    }
}

/// The list statement for `p`'s order.
fn list_sql(p: &TaskListParams) -> String {
    let (cmp, order) = if p.descending {
        ("<", "DESC")
    } else {
        (">", "ASC")
    };
    crate::sql::fill(sql!(tasks, list), &[("cmp", cmp), ("order", order)])
}

/// `sql` (the list statement, or one wrapping it) with `p`'s filters bound.
fn list_query<'q>(
    sql: &'q str,
    p: &'q TaskListParams,
) -> sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments<'q>> {
    sqlx::query(sql)
        .bind(&p.queue)
        .bind((!p.states.is_empty()).then(|| {
            serde_json::json!(p.states.iter().map(|s| s.as_str()).collect::<Vec<_>>()).to_string()
        }))
        .bind(&p.kind)
        .bind(p.after)
        .bind(p.limit)
        .bind(&p.concurrency_key)
        .bind(&p.text)
        .bind(&p.user_id)
        .bind(&p.trace_id)
        .bind(&p.unique_key)
        .bind(&p.worker)
        .bind(p.min_id)
        .bind(p.max_id)
}
