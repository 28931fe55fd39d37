//! PostgreSQL: tasks: insert, read, list, and the operator changes of one task.

use super::*;

#[async_trait]
impl TaskStore for PgStore {
    async fn task_insert_many(&self, p: TaskInsertManyParams) -> Result<Vec<Task>> {
        let n = p.tasks.len();
        if n == 0 {
            return Ok(vec![]);
        }
        let mut tasks = p.tasks;
        // Payloads are moved out for binding and back afterwards: no deep copies.
        let payloads: Vec<Value> = tasks
            .iter_mut()
            .map(|t| std::mem::take(&mut t.payload))
            .collect();
        let mut conn = self.pool.acquire().await?;
        let rows = Self::insert_rows(&mut conn, &self.schema, &tasks, &payloads, p.now).await?;
        for (t, payload) in tasks.iter_mut().zip(payloads) {
            t.payload = payload;
        }
        // Identity values are taken in insertion (ordinality) order.
        let mut rows = rows;
        rows.sort_by_key(|r| r.0);
        if rows.len() == n {
            return Ok(tasks
                .into_iter()
                .zip(rows)
                .map(|(t, (id, _))| t.into_task(id, p.now))
                .collect());
        }
        // Some unique keys matched: the inserted rows are, in order, the inputs without a key
        // plus the first input of each new key; the rest answer with the existing task.
        let inserted_keys: std::collections::HashSet<String> =
            rows.iter().filter_map(|r| r.1.clone()).collect();
        let mut ids = rows.into_iter().map(|r| r.0);
        let mut first_of_key: HashMap<String, Task> = HashMap::new();
        let mut out = Vec::with_capacity(n);
        for t in tasks {
            match t.unique_key.clone() {
                None => {
                    let id = ids.next().ok_or_else(|| {
                        StoreError::Invalid("insert returned fewer rows than expected".into())
                    })?;
                    out.push(t.into_task(id, p.now));
                }
                Some(k) if inserted_keys.contains(&k) && !first_of_key.contains_key(&k) => {
                    let id = ids.next().ok_or_else(|| {
                        StoreError::Invalid("insert returned fewer rows than expected".into())
                    })?;
                    let task = t.into_task(id, p.now);
                    first_of_key.insert(k, task.clone());
                    out.push(task);
                }
                Some(k) => {
                    let mut existing = match first_of_key.get(&k) {
                        Some(t) => t.clone(),
                        None => {
                            let sql = sql!(tasks, unfinished_by_unique_key);
                            let row = sqlx::query(sql)
                                .bind(&k)
                                .fetch_optional(&self.pool)
                                .await?
                                .ok_or_else(|| {
                                    StoreError::Conflict(format!(
                                        "unique_key {k:?} changed while inserting; try again"
                                    ))
                                })?;
                            decode(&row)?
                        }
                    };
                    existing.inserted = Some(false);
                    out.push(existing);
                }
            }
        }
        Ok(out)
    }

    async fn task_get(&self, id: i64) -> Result<Option<Task>> {
        let sql = sql!(tasks, get);
        let row = sqlx::query(sql).bind(id).fetch_optional(&self.pool).await?;
        row.as_ref().map(decode).transpose()
    }

    async fn task_list(&self, p: TaskListParams) -> Result<Vec<Task>> {
        let rows = list_query(&list_sql(&p), &p).fetch_all(&self.pool).await?;
        rows.iter().map(decode).collect()
    }

    async fn task_count(&self, p: TaskListParams) -> Result<i64> {
        let sql = format!("SELECT count(*) FROM ({}) x", list_sql(&p));
        let row = list_query(&sql, &p).fetch_one(&self.pool).await?;
        Ok(row.try_get::<i64, _>(0)?)
    }

    async fn task_delete(&self, ids: &[i64]) -> Result<u64> {
        again(|| crate::portable::task_delete(self, ids)).await
    }

    async fn task_cancel(&self, p: TaskCancelParams) -> Result<Task> {
        let p = &p;
        again(|| async move {
            let p = p.clone();
            let TaskCancelParams { id, now } = p;
            let sql = sql!(tasks, cancel);
            if let Some(r) = sqlx::query(sql)
                .bind(id)
                .bind(now)
                .fetch_optional(&self.pool)
                .await?
            {
                return decode(&r);
            }
            match self.task_get(id).await? {
                None => Err(StoreError::NotFound(format!("task {id}"))),
                Some(t) if t.state == TaskState::Cancelled => Ok(t),
                Some(t) => Err(StoreError::InvalidState(format!(
                    "task {id} is {} and cannot be cancelled",
                    t.state
                ))),
            }
        })
        .await
    }

    async fn task_retry(&self, p: TaskRetryParams) -> Result<Task> {
        let p = &p;
        again(|| async move {
            let p = p.clone();
            let TaskRetryParams { id, now } = p;
            let mut t = PgTx::of(self.pool.begin().await?, &self.schema);
            crate::portable::counts_before_retry(&mut t, id).await?;
            let mut tx = t.into_inner();
            let sql = sql!(tasks, retry);
            let row = sqlx::query(sql)
                .bind(id)
                .bind(now)
                .fetch_optional(&mut *tx)
                .await?;
            let Some(row) = row else {
                drop(tx);
                return match self.task_get(id).await? {
                    None => Err(StoreError::NotFound(format!("task {id}"))),
                    Some(t) => Err(StoreError::InvalidState(format!(
                        "task {id} is {}; only discarded or cancelled tasks can be retried",
                        t.state
                    ))),
                };
            };
            let t = decode(&row)?;
            self.notify(&mut tx, std::slice::from_ref(&t.queue)).await?;
            tx.commit().await?;
            Ok(t)
        })
        .await
    }

    async fn task_next_due(&self) -> Result<Option<Timestamp>> {
        Ok(sqlx::query_scalar(
            "SELECT min(run_at) FROM docket_tasks WHERE state IN ('scheduled','retryable')",
        )
        .fetch_one(&self.pool)
        .await?)
    }

    async fn task_find_by_unique_key(&self, key: &str) -> Result<Option<Task>> {
        let sql = sql!(tasks, by_unique_key);
        let row = sqlx::query(sql)
            .bind(key)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(decode).transpose()
    }

    async fn task_run_now(&self, p: TaskRunNowParams) -> Result<Task> {
        let p = &p;
        again(|| async move {
            let p = p.clone();
            let TaskRunNowParams { id, now } = p;
            let mut tx = self.pool.begin().await?;
            let row = sqlx::query(sql!(tasks, run_now))
                .bind(id)
                .bind(now)
                .fetch_optional(&mut *tx)
                .await?;
            if let Some(r) = &row {
                let queue: String = r.try_get("queue")?;
                self.notify(&mut tx, &[queue]).await?;
            }
            tx.commit().await?;
            match row {
                Some(r) => Ok(decode(&r)?),
                None => match self.task_get(id).await? {
                    None => Err(StoreError::NotFound(format!("task {id}"))),
                    Some(t) => Err(StoreError::InvalidState(format!(
                        "task {id} is {}; only scheduled or retryable tasks can run now",
                        t.state.as_str()
                    ))),
                },
            }
        })
        .await
    }

    async fn task_update(&self, p: TaskUpdateParams) -> Result<Task> {
        let p = &p;
        again(|| async move {
            let p = p.clone();
            let mut tx = self.pool.begin().await?;
            let sql = sql!(tasks, lock);
            let Some(row) = sqlx::query(sql).bind(p.id).fetch_optional(&mut *tx).await? else {
                return Err(StoreError::NotFound(format!("task {}", p.id)));
            };
            let n = (p.rule)(&decode(&row)?, token_of(&row)?.as_deref())?;
            let sql = sql!(tasks, update);
            let row = sqlx::query(sql)
                .bind(p.id)
                .bind(&n.queue)
                .bind(n.priority)
                .bind(n.run_at)
                .bind(n.state.as_str())
                .bind(&n.payload)
                .bind(&n.node)
                .bind(n.max_attempts)
                .bind(&n.stage)
                .bind(&n.progress)
                .bind(n.attempt)
                .bind(n.backoff.kind.as_str())
                .bind(docket_core::duration::to_ms(n.backoff.initial))
                .bind(n.backoff.coefficient)
                .bind(docket_core::duration::to_ms(n.backoff.max))
                .bind(n.backoff.jitter)
                .bind(n.updated_at)
                .fetch_one(&mut *tx)
                .await?;
            if n.state == TaskState::Available {
                self.notify(&mut tx, std::slice::from_ref(&n.queue)).await?;
            }
            tx.commit().await?;
            decode(&row)
        })
        .await
    }

    async fn task_throughput(&self, since: Timestamp) -> Result<Vec<Throughput>> {
        // A step between the two reads may count a second's tasks twice in one minute of the
        // chart; the counts (portable.rs) guard against that, the chart does not need to.
        let counted_to = crate::portable::counted_to(self).await?;
        let rows: Vec<(Timestamp, i64, i64)> = sqlx::query_as(sql!(tasks, throughput))
            .bind(since)
            .bind(counted_to)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .into_iter()
            .map(|(minute, completed, failed)| Throughput {
                minute,
                completed,
                failed,
            })
            .collect())
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
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    sqlx::query(sql)
        .bind(&p.queue)
        .bind(
            (!p.states.is_empty()).then(|| p.states.iter().map(|s| s.as_str()).collect::<Vec<_>>()),
        )
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
