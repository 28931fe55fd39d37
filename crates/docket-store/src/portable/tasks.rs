//! Tasks: reads and the operator changes of one task, written once over
//! [`Driver`](crate::driver::Driver); the insert and the list go through [`TaskDriver`].

use super::counts::{counted_to, counts_before_retry, counts_forget, counts_lock, pruned_rows};
use super::prelude::*;

#[async_trait]
impl<D: Driver + TaskDriver> TaskStore for D {
    async fn task_insert_many(&self, p: TaskInsertManyParams) -> Result<Vec<Task>> {
        TaskDriver::task_insert_many(self, p).await
    }

    async fn task_debounce(&self, p: TaskDebounceParams) -> Result<Task> {
        let Some(d) = p.task.debounce.clone() else {
            return Err(StoreError::Invalid(
                "task_debounce: a task without debounce".into(),
            ));
        };
        // A rival that inserted the key first makes this node's mark a unique violation once
        // it commits (PostgreSQL waits for it; MariaDB may answer a deadlock instead): then go
        // again, and the rival's task is found and replaced. Bounded: each round either finds
        // the waiting task or inserts one.
        let mut rounds = 0;
        loop {
            rounds += 1;
            match again(|| debounce_once(self, &p, &d)).await {
                Err(StoreError::Conflict(_)) if rounds < 10 => continue,
                r => return r,
            }
        }
    }

    async fn task_get(&self, id: i64) -> Result<Option<Task>> {
        // MySQL: both tables in one statement (one read view), so a task moving between them
        // is seen once.
        let row = self.fetch_one(stmt!(tasks, get), args![id]).await?;
        row.as_ref().map(row::task).transpose()
    }

    async fn task_list(&self, p: TaskListParams) -> Result<Vec<Task>> {
        let rows = list_rows(self, &p, false).await?;
        rows.iter().map(row::task).collect()
    }

    async fn task_count(&self, p: TaskListParams) -> Result<i64> {
        let rows = list_rows(self, &p, true).await?;
        let n = rows.first().map(|r| r.int("n")).transpose()?.unwrap_or(0);
        // MySQL: both tables' pages are cut at the limit each; the union's count, at most
        // twice it, is cut again (elsewhere the page's count is within it already).
        Ok(n.min(p.limit.max(0)))
    }

    async fn task_delete(&self, ids: &[i64]) -> Result<u64> {
        again(|| task_delete(self, ids)).await
    }

    async fn task_cancel(&self, p: TaskCancelParams) -> Result<Task> {
        let TaskCancelParams { id, now } = p;
        again(|| async move {
            let mut tx = self.begin().await?;
            // A running task stays running with cancel_requested_at set: its worker learns of
            // it at its next heartbeat or completion.
            if let Some(r) = tx
                .change_task(stmt!(tasks, cancel), args![id, now], id)
                .await?
            {
                let t = row::task(&r)?;
                tx.commit().await?;
                return Ok(t);
            }
            let found = read_in(&mut tx, id).await?;
            tx.commit().await?;
            match found {
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
        let TaskRetryParams { id, now } = p;
        again(|| async move {
            let mut tx = self.begin().await?;
            // MariaDB keeps finished tasks in docket_tasks_done (mysql 0004): back where the
            // statements look (a no-op elsewhere).
            tx.unarchive(&[id]).await?;
            counts_before_retry(&mut tx, id).await?;
            let changed = match tx
                .change_task(stmt!(tasks, retry), args![id, now], id)
                .await
            {
                Err(StoreError::Conflict(_)) => {
                    return Err(StoreError::Conflict(format!(
                        "task {id}: its unique_key is held by an unfinished task"
                    )))
                }
                r => r?,
            };
            let Some(r) = changed else {
                let found = read_in(&mut tx, id).await?;
                tx.commit().await?;
                return match found {
                    None => Err(StoreError::NotFound(format!("task {id}"))),
                    Some(t) => Err(StoreError::InvalidState(format!(
                        "task {id} is {}; only discarded or cancelled tasks can be retried",
                        t.state
                    ))),
                };
            };
            let t = row::task(&r)?;
            tx.wake(std::slice::from_ref(&t.queue)).await?;
            tx.commit().await?;
            Ok(t)
        })
        .await
    }

    async fn task_next_due(&self) -> Result<Option<Timestamp>> {
        match self.fetch_one(stmt!(tasks, next_due), args![]).await? {
            Some(r) => r.time_opt("run_at"),
            None => Ok(None),
        }
    }

    async fn task_find_by_unique_key(&self, key: &str) -> Result<Option<Task>> {
        let row = self
            .fetch_one(stmt!(tasks, by_unique_key), args![key])
            .await?;
        row.as_ref().map(row::task).transpose()
    }

    async fn task_run_now(&self, p: TaskRunNowParams) -> Result<Task> {
        let TaskRunNowParams { id, now } = p;
        again(|| async move {
            let mut tx = self.begin().await?;
            if let Some(r) = tx
                .change_task(stmt!(tasks, run_now), args![id, now], id)
                .await?
            {
                let t = row::task(&r)?;
                tx.wake(std::slice::from_ref(&t.queue)).await?;
                tx.commit().await?;
                return Ok(t);
            }
            let found = read_in(&mut tx, id).await?;
            tx.commit().await?;
            match found {
                None => Err(StoreError::NotFound(format!("task {id}"))),
                Some(t) => Err(StoreError::InvalidState(format!(
                    "task {id} is {}; only scheduled or retryable tasks can run now",
                    t.state.as_str()
                ))),
            }
        })
        .await
    }

    async fn task_update(&self, p: TaskUpdateParams) -> Result<Task> {
        let p = &p;
        again(|| async move {
            let id = p.id;
            let mut tx = self.begin().await?;
            tx.unarchive(&[id]).await?;
            let Some(row) = tx.fetch_one(stmt!(tasks, lock), args![id]).await? else {
                return Err(StoreError::NotFound(format!("task {id}")));
            };
            let n = (p.rule)(&row::task(&row)?, row::token_of(&row)?.as_deref())?;
            let ms = docket_core::duration::to_ms;
            let row = tx
                .change_task(
                    stmt!(tasks, update),
                    args![
                        id,
                        &n.queue,
                        n.priority,
                        n.run_at,
                        n.state.as_str(),
                        &n.payload,
                        n.node.as_deref(),
                        n.max_attempts,
                        n.stage.as_deref(),
                        n.progress.as_ref(),
                        n.attempt,
                        n.backoff.kind.as_str(),
                        ms(n.backoff.initial),
                        n.backoff.coefficient,
                        ms(n.backoff.max),
                        n.backoff.jitter,
                        n.updated_at,
                    ],
                    id,
                )
                .await?
                .ok_or_else(|| StoreError::NotFound(format!("task {id}")))?;
            let t = row::task(&row)?;
            if t.state == TaskState::Available {
                tx.wake(std::slice::from_ref(&t.queue)).await?;
            }
            tx.commit().await?;
            Ok(t)
        })
        .await
    }

    async fn task_throughput(&self, since: Timestamp) -> Result<Vec<Throughput>> {
        // A step between the two reads may count a second's tasks twice in one minute of the
        // chart; the counts (portable/counts.rs) guard against that, the chart does not need to.
        let counted_to = counted_to(self).await?;
        let rows = self
            .fetch(stmt!(tasks, throughput), args![since, counted_to])
            .await?;
        rows.iter()
            .map(|r| {
                Ok(Throughput {
                    minute: r.time("m")?,
                    completed: r.int("completed")?,
                    failed: r.int("failed")?,
                })
            })
            .collect()
    }
}

/// One round of [`TaskStore::task_debounce`]: replace the waiting task with the key, or insert
/// one and mark it.
async fn debounce_once<D: Driver>(
    d: &D,
    p: &TaskDebounceParams,
    rule: &docket_core::debounce::Debounce,
) -> Result<Task> {
    let t = &p.task;
    let now = p.now;
    let mut tx = d.begin().await?;
    if let Some(row) = tx
        .fetch_one(stmt!(tasks, debounce_lock), args![rule.key.as_str()])
        .await?
    {
        let id = row.int("id")?;
        let run_at = rule.run_at(now, row.time_opt("debounce_until")?);
        let state = if run_at > now {
            TaskState::Scheduled
        } else {
            TaskState::Available
        };
        let ms = |v: std::time::Duration| docket_core::duration::to_ms(v);
        let tags = row::tags_json(&t.tags);
        let affinity = row::affinity_json(t.affinity.as_ref());
        let row = tx
            .change_task(
                stmt!(tasks, debounce_replace),
                args![
                    id,
                    &t.queue,
                    &t.kind,
                    &t.payload,
                    t.priority,
                    run_at,
                    state.as_str(),
                    t.expires_at,
                    t.max_attempts,
                    t.backoff.kind.as_str(),
                    ms(t.backoff.initial),
                    t.backoff.coefficient,
                    ms(t.backoff.max),
                    t.backoff.jitter,
                    t.timeout_ms,
                    t.concurrency_key.as_deref(),
                    t.concurrency_limit,
                    t.rate_limit.as_deref(),
                    t.partition_key.as_deref(),
                    t.node.as_deref(),
                    t.user_id.as_deref(),
                    t.stage.as_deref(),
                    t.progress.as_ref(),
                    now,
                    tags.as_ref(),
                    affinity.as_ref(),
                ],
                id,
            )
            .await?
            .ok_or_else(|| StoreError::Conflict(format!("task {id} left while replaced")))?;
        let mut task = row::task(&row)?;
        tx.retag(id, &t.tags).await?;
        if task.state == TaskState::Available {
            tx.wake(std::slice::from_ref(&task.queue)).await?;
        }
        tx.commit().await?;
        task.inserted = Some(false);
        task.replaced = Some(true);
        return Ok(task);
    }
    let mut task = tx
        .insert_task(t, now)
        .await?
        .ok_or_else(|| StoreError::Conflict("debounced insert refused".into()))?;
    tx.execute(
        stmt!(tasks, debounce_mark),
        args![task.id, rule.key.as_str(), rule.deadline(now)],
    )
    .await?;
    tx.commit().await?;
    task.debounce_key = Some(rule.key.clone());
    task.replaced = Some(false);
    Ok(task)
}

/// Task `id` as `tx` sees it (MySQL: in either table), for the refusal a change answers.
async fn read_in<T: DriverTx>(tx: &mut T, id: i64) -> Result<Option<Task>> {
    let row = tx.fetch_one(stmt!(tasks, get), args![id]).await?;
    row.as_ref().map(row::task).transpose()
}

/// [`TaskStore::task_delete`] on every backend: under the kept counts' lock, the finished
/// tasks among `ids` are locked, deleted and subtracted from the counts in one transaction.
///
/// # Errors
/// Database failure; nothing is deleted then.
pub(crate) async fn task_delete<D: Driver>(d: &D, ids: &[i64]) -> Result<u64> {
    if ids.is_empty() {
        return Ok(0);
    }
    let mut tx = d.begin().await?;
    let counted_to = counts_lock(&mut tx).await?;
    // MariaDB keeps finished tasks in docket_tasks_done (mysql 0004): back where the
    // statements look (a no-op elsewhere).
    tx.unarchive(ids).await?;
    let all = serde_json::Value::from(ids.to_vec());
    let rows = tx.fetch(stmt!(tasks, delete_lock), args![&all]).await?;
    let gone = pruned_rows(&rows)?;
    if !rows.is_empty() {
        let locked = rows
            .iter()
            .map(|r| r.int("id"))
            .collect::<Result<Vec<i64>>>()?;
        let locked = serde_json::Value::from(locked);
        tx.execute(stmt!(tasks, delete), args![&locked]).await?;
    }
    counts_forget(&mut tx, counted_to, &gone).await?;
    tx.commit().await?;
    Ok(gone.len() as u64)
}

/// [`TaskStore::task_insert_many`] a task at a time in one transaction (SQLite's: statements
/// cost no round trip there): a task whose unique key an unfinished task holds answers with
/// that task (`inserted: Some(false)`). Claimers of the queues that got available tasks are
/// woken once it commits.
///
/// # Errors
/// Database failure; nothing is inserted then.
pub(crate) async fn insert_each<D: Driver>(d: &D, p: TaskInsertManyParams) -> Result<Vec<Task>> {
    if p.tasks.is_empty() {
        return Ok(vec![]);
    }
    let mut tx = d.begin().await?;
    let mut out = Vec::with_capacity(p.tasks.len());
    for t in &p.tasks {
        let task = match tx.insert_task(t, p.now).await? {
            Some(task) => task,
            None => {
                let r = tx
                    .fetch_one(
                        stmt!(tasks, unfinished_by_unique_key),
                        args![t.unique_key.as_deref()],
                    )
                    .await?
                    .ok_or_else(|| StoreError::Conflict("insert refused".into()))?;
                let mut t = row::task(&r)?;
                t.inserted = Some(false);
                t
            }
        };
        out.push(task);
    }
    tx.commit().await?;
    Ok(out)
}

/// The rows of the list statement for `p` (`sql/tasks.sql`, `list`); with `count`, one row
/// whose `n` is how many rows that page has. The statement's keyset order is filled in at run
/// time (`{cmp}` `>` and `{order}` `ASC` for oldest first); its arguments, in every dialect:
/// `?1` queue, `?2` the states (a list), `?3` kind, `?4` after, `?5` limit, `?6` concurrency
/// key, `?7` text, `?8` user id, `?9` trace id, `?10` unique key, `?11` worker, `?12`/`?13` the
/// id window, `?14` whether any state will do (an empty list is no filter).
async fn list_rows<D: Driver>(d: &D, p: &TaskListParams, count: bool) -> Result<Vec<D::Row>> {
    let (cmp, order) = if p.descending {
        ("<", "DESC")
    } else {
        (">", "ASC")
    };
    let st = if p.tag.is_some() {
        D::stmt(stmt!(tasks, list_tagged))
    } else {
        D::stmt(stmt!(tasks, list))
    };
    let text = crate::sql::fill(&st.text, &[("cmp", cmp), ("order", order)]);
    let st = crate::sql::Stmt {
        text: if count {
            format!("SELECT count(*) AS n FROM ({text}) x")
        } else {
            text
        },
        order: st.order.clone(),
        read: st.read,
    };
    let states: Vec<String> = p.states.iter().map(|s| s.as_str().to_string()).collect();
    let mut args = vec![
        Arg::Text(p.queue.as_deref()),
        Arg::Texts(&states),
        Arg::Text(p.kind.as_deref()),
        Arg::Int(p.after),
        Arg::Int(Some(p.limit)),
        Arg::Text(p.concurrency_key.as_deref()),
        Arg::Text(p.text.as_deref()),
        Arg::Text(p.user_id.as_deref()),
        Arg::Text(p.trace_id.as_deref()),
        Arg::Text(p.unique_key.as_deref()),
        Arg::Text(p.worker.as_deref()),
        Arg::Int(p.min_id),
        Arg::Int(p.max_id),
        Arg::Bool(states.is_empty()),
    ];
    if let Some(tag) = &p.tag {
        args.push(Arg::Text(Some(tag)));
    }
    d.fetch_stmt(&st, &args).await
}
