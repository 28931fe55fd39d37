//! MySQL: tasks: insert, read, list, and the operator changes of one task.

use super::*;

#[async_trait]
impl TaskStore for MySqlStore {
    async fn task_insert_many(&self, p: TaskInsertManyParams) -> Result<Vec<Task>> {
        if p.tasks.is_empty() {
            return Ok(vec![]);
        }
        let mut tx = self.begin().await?;
        let existing = sql!(tasks, unfinished_by_unique_key);
        let now = p.now;
        let mut ids: Vec<Option<i64>> = Vec::with_capacity(p.tasks.len());
        let mut held: HashMap<usize, Task> = HashMap::new();
        // Runs of tasks without a unique key go in multi-row statements (at most 1,000 rows
        // or ~4 MB of payload each); a task with a key goes alone, as it may be refused.
        let mut run: Vec<&ResolvedTask> = vec![];
        let mut run_bytes = 0;
        for (i, t) in p.tasks.iter().enumerate() {
            let batchable = t.unique_key.is_none() && self.consecutive_ids.is_some();
            if batchable {
                run_bytes += t.payload.to_string().len();
                run.push(t);
                if run.len() < 1000 && run_bytes < 4 << 20 && i + 1 < p.tasks.len() {
                    continue;
                }
            }
            if !run.is_empty() {
                let inc = self.consecutive_ids.unwrap_or(1);
                let got = Self::insert_batch(&mut tx, &run, now, inc).await?;
                ids.extend(got.into_iter().map(Some));
                run.clear();
                run_bytes = 0;
            }
            if batchable {
                continue;
            }
            match Self::insert_row(&mut tx, t, now).await? {
                Some(id) => ids.push(Some(id)),
                None => {
                    let r = sqlx::query(existing)
                        .bind(&t.unique_key)
                        .fetch_optional(&mut *tx)
                        .await?
                        .ok_or_else(|| StoreError::Conflict("insert refused".into()))?;
                    let mut t = decode(&r)?;
                    t.inserted = Some(false);
                    held.insert(i, t);
                    ids.push(None);
                }
            }
        }
        tx.commit().await?;
        // What was stored is what was given: times are already whole microseconds.
        let out: Vec<Task> = p
            .tasks
            .into_iter()
            .zip(ids)
            .enumerate()
            .map(|(i, (t, id))| match id {
                Some(id) => Ok(t.into_task(id, now)),
                None => held
                    .remove(&i)
                    .ok_or_else(|| StoreError::Conflict("insert refused".into())),
            })
            .collect::<Result<_>>()?;
        self.wake_queues(
            out.iter()
                .filter(|t| t.inserted != Some(false) && t.state == TaskState::Available)
                .map(|t| &t.queue),
        );
        Ok(out)
    }

    async fn task_get(&self, id: i64) -> Result<Option<Task>> {
        // Both tables in one statement (one read view): a task moving between them is seen once.
        let sql = sql!(tasks, get);
        let row = sqlx::query(sql)
            .bind(id)
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(decode).transpose()
    }

    async fn task_list(&self, p: TaskListParams) -> Result<Vec<Task>> {
        let rows = list_query(&list_sql(&p), &p).fetch_all(&self.pool).await?;
        rows.iter().map(decode).collect()
    }

    async fn task_count(&self, p: TaskListParams) -> Result<i64> {
        // Both tables' pages are cut at the limit each; the union's count, at most twice it,
        // is cut again.
        let sql = format!("SELECT count(*) FROM ({}) x", list_sql(&p));
        let row = list_query(&sql, &p).fetch_one(&self.pool).await?;
        Ok(row.try_get::<i64, _>(0)?.min(p.limit.max(0)))
    }

    async fn task_delete(&self, ids: &[i64]) -> Result<u64> {
        crate::portable::task_delete(self, ids).await
    }

    async fn task_cancel(&self, p: TaskCancelParams) -> Result<Task> {
        let TaskCancelParams { id, now } = p;
        let mut tx = self.begin().await?;
        let Some((t, _)) = Self::get_in(&mut tx, id, true).await? else {
            return Err(StoreError::NotFound(format!("task {id}")));
        };
        match t.state {
            TaskState::Cancelled => {
                tx.commit().await?;
                return Ok(t);
            }
            TaskState::Running => {
                // The worker learns of it at its next heartbeat or completion.
                sqlx::query(sql!(tasks, request_cancel))
                    .bind(dt(now))
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
            s if s.is_finished() => {
                tx.commit().await?;
                return Err(StoreError::InvalidState(format!(
                    "task {id} is {} and cannot be cancelled",
                    t.state
                )));
            }
            _ => {
                sqlx::query(
                    "UPDATE docket_tasks SET finished_at = ?, state = 'cancelled' WHERE id = ?",
                )
                .bind(dt(now))
                .bind(id)
                .execute(&mut *tx)
                .await?;
            }
        }
        let t = Self::get_in(&mut tx, id, false)
            .await?
            .map(|x| x.0)
            .ok_or_else(|| StoreError::NotFound(format!("task {id}")))?;
        tx.commit().await?;
        Ok(t)
    }

    async fn task_retry(&self, p: TaskRetryParams) -> Result<Task> {
        let TaskRetryParams { id, now } = p;
        let mut tx = self.begin().await?;
        Self::unarchive(&mut tx, &[id]).await?;
        let mut t = self.tx_of(tx);
        crate::portable::counts_before_retry(&mut t, id).await?;
        let mut tx = t.into_inner();
        let r = sqlx::query(sql!(tasks, retry))
            .bind(dt(now))
            .bind(id)
            .execute(&mut *tx)
            .await;
        let r = match r {
            Err(sqlx::Error::Database(d)) if d.is_unique_violation() => {
                return Err(StoreError::Conflict(format!(
                    "task {id}: its unique_key is held by an unfinished task"
                )))
            }
            r => r?,
        };
        let found = Self::get_in(&mut tx, id, false).await?;
        tx.commit().await?;
        match (r.rows_affected(), found) {
            (_, None) => Err(StoreError::NotFound(format!("task {id}"))),
            (1, Some((t, _))) => {
                self.wake_queues([&t.queue]);
                Ok(t)
            }
            (_, Some((t, _))) => Err(StoreError::InvalidState(format!(
                "task {id} is {}; only discarded or cancelled tasks can be retried",
                t.state
            ))),
        }
    }

    async fn task_next_due(&self) -> Result<Option<Timestamp>> {
        let v: Option<Timestamp> = sqlx::query_scalar(
            "SELECT min(run_at) FROM docket_tasks WHERE state IN ('scheduled','retryable')",
        )
        .fetch_one(&self.pool)
        .await?;
        Ok(v)
    }

    async fn task_find_by_unique_key(&self, key: &str) -> Result<Option<Task>> {
        let sql = sql!(tasks, by_unique_key);
        let row = sqlx::query(sql)
            .bind(key)
            .bind(key)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(decode).transpose()
    }

    async fn task_run_now(&self, p: TaskRunNowParams) -> Result<Task> {
        let TaskRunNowParams { id, now } = p;
        let mut tx = self.begin().await?;
        let r = sqlx::query(sql!(tasks, run_now))
            .bind(dt(now))
            .bind(id)
            .execute(&mut *tx)
            .await?;
        let found = Self::get_in(&mut tx, id, false).await?;
        tx.commit().await?;
        match (r.rows_affected(), found) {
            (_, None) => Err(StoreError::NotFound(format!("task {id}"))),
            (1, Some((t, _))) => {
                self.wake_queues([&t.queue]);
                Ok(t)
            }
            (_, Some((t, _))) => Err(StoreError::InvalidState(format!(
                "task {id} is {}; only scheduled or retryable tasks can run now",
                t.state.as_str()
            ))),
        }
    }

    async fn task_update(&self, p: TaskUpdateParams) -> Result<Task> {
        let mut tx = self.begin().await?;
        let Some((t, nonce)) = Self::get_in(&mut tx, p.id, true).await? else {
            return Err(StoreError::NotFound(format!("task {}", p.id)));
        };
        let n = (p.rule)(&t, lease::token_string(nonce, t.id).as_deref())?;
        sqlx::query(sql!(tasks, update))
            .bind(&n.queue)
            .bind(n.priority)
            .bind(dt(n.run_at))
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
            .bind(dt(n.updated_at))
            .bind(p.id)
            .execute(&mut *tx)
            .await?;
        let (t, _) = Self::get_in(&mut tx, p.id, false)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("task {}", p.id)))?;
        tx.commit().await?;
        if t.state == TaskState::Available {
            self.wake_queues([&t.queue]);
        }
        Ok(t)
    }

    async fn task_throughput(&self, since: Timestamp) -> Result<Vec<Throughput>> {
        // Through the driver: it binds the numbered placeholders in their order.
        let rows = crate::driver::Driver::fetch(
            self,
            crate::driver::stmt!(tasks, throughput),
            crate::driver::args![since, crate::portable::counted_to(self).await?],
        )
        .await?;
        rows.iter()
            .map(|r| {
                Ok(Throughput {
                    minute: r.time("m")?,
                    completed: r.try_get("completed")?,
                    failed: r.try_get("failed")?,
                })
            })
            .collect()
    }
}

/// The list statement for `p`'s order and states.
fn list_sql(p: &TaskListParams) -> String {
    let (cmp, order) = if p.descending {
        ("<", "DESC")
    } else {
        (">", "ASC")
    };
    let states = if p.states.is_empty() {
        String::new()
    } else {
        format!("AND state IN ({}) ", marks(p.states.len()))
    };
    fill(
        sql!(tasks, list),
        &[("states", &states), ("cmp", cmp), ("order", order)],
    )
}

/// `sql` (the list statement, or one wrapping it) with `p`'s filters bound (twice: once per
/// table, then the page's limit).
fn list_query<'q>(
    sql: &'q str,
    p: &'q TaskListParams,
) -> sqlx::query::Query<'q, sqlx::MySql, sqlx::mysql::MySqlArguments> {
    let mut q = sqlx::query(sql);
    for _ in 0..2 {
        q = q.bind(&p.queue).bind(&p.queue);
        for s in &p.states {
            q = q.bind(s.as_str());
        }
        q = q
            .bind(&p.kind)
            .bind(&p.kind)
            .bind(p.after)
            .bind(p.after)
            .bind(&p.concurrency_key)
            .bind(&p.concurrency_key)
            .bind(&p.text)
            .bind(&p.text)
            .bind(&p.user_id)
            .bind(&p.user_id)
            .bind(&p.trace_id)
            .bind(&p.trace_id)
            .bind(&p.unique_key)
            .bind(&p.unique_key)
            .bind(&p.worker)
            .bind(&p.worker)
            .bind(p.min_id)
            .bind(p.min_id)
            .bind(p.max_id)
            .bind(p.max_id)
            .bind(p.limit);
    }
    q.bind(p.limit)
}
