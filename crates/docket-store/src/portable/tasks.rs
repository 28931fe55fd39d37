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
        let (rows, _) = list_page(self, &p, false).await?;
        rows.iter().map(row::task).collect()
    }

    async fn task_count(&self, p: TaskListParams) -> Result<i64> {
        let (_, n) = list_page(self, &p, true).await?;
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
/// one, mark it and make it the key's waiting task ([`DriverTx::debounce_own`]).
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
    tx.debounce_own(task.id, rule.key.as_str()).await?;
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
        let ids = serde_json::Value::from(locked.clone());
        tx.execute(stmt!(tasks, delete), args![&ids]).await?;
        tx.forget(&locked).await?;
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

/// The page `p` (with `count`, its count) and how many tasks it has. A page filtered by a tag
/// on a backend that reads tags in id windows ([`Driver::tag_id_span`], PostgreSQL) is read
/// in parts, as [`TagScan`] says.
async fn list_page<D: Driver>(
    d: &D,
    p: &TaskListParams,
    count: bool,
) -> Result<(Vec<D::Row>, i64)> {
    let n_of = |rows: &[D::Row]| -> Result<i64> {
        if count {
            Ok(rows.first().map(|r| r.int("n")).transpose()?.unwrap_or(0))
        } else {
            Ok(i64::try_from(rows.len()).unwrap_or(i64::MAX))
        }
    };
    let span = match &p.tag {
        Some(_) => d.tag_id_span(p).await?,
        None => None,
    };
    let Some(mut scan) = span.and_then(|(lo, hi)| TagScan::new(lo, hi, p.descending, p.limit))
    else {
        let rows = list_rows(d, p, count, "id").await?;
        let n = n_of(&rows)?;
        return Ok((rows, n));
    };
    let mut all = vec![];
    while let Some(part) = scan.next_part() {
        let q = TaskListParams {
            min_id: Some(part.min),
            max_id: Some(part.max),
            limit: scan.want,
            ..p.clone()
        };
        let sort = if part.in_order { "id" } else { "id + 0" };
        let rows = list_rows(d, &q, count, sort).await?;
        scan.read(&part, n_of(&rows)?);
        all.extend(rows);
    }
    Ok((all, scan.found))
}

/// Ids a tag's page reads in order first ([`TagScan`]).
const TAG_WINDOW: i64 = 20_000;
/// Most ids one part of a tag's page reads in order (~25 ms on PostgreSQL at 10M tasks).
const TAG_MOST_IN_ORDER: i64 = 100_000;
/// Parts read in order before the rest is asked of the index.
const TAG_PARTS_IN_ORDER: u32 = 3;

/// How a page filtered by a tag reads the ids `lo..=hi` where the tag's index does not give
/// them in order (PostgreSQL's GIN). The planner picks between that index (then a sort) and
/// the primary key read in order with the tag as a filter by its guess of how common the
/// tag is, a guess from a histogram of whole tag arrays: a rare tag can pass for 1% of the
/// rows (one whose array is a bound), and the page read the primary key past all 10M tasks
/// for it (6.7 s; a tag on 1 task in 500, guessed common, 11 s at p99: bench/tags). So the
/// page reads TAG_WINDOW ids in order; while the tag's density there says the rest of the
/// page lies within TAG_MOST_IN_ORDER ids, the next part is read in order too (twice what
/// that density says); otherwise — nothing found, too
/// sparse, or TAG_PARTS_IN_ORDER parts read — the rest comes through the index, sorted by
/// `id + 0` (which no index serves, so the planner cannot walk the key). Each part is
/// bounded whatever the guess: in order by its width, through the index by the tag's tasks
/// in what is left, which the parts before found to be sparse.
#[derive(Debug, Clone, PartialEq)]
struct TagScan {
    /// The next id to read, in the page's order.
    next: i64,
    /// The last id to read.
    end: i64,
    descending: bool,
    /// Tasks the page still wants.
    want: i64,
    /// Ids read so far, and the tasks found there.
    seen: i64,
    found: i64,
    parts: u32,
    /// The span's last id was read.
    done: bool,
}

/// One part of a tag's page: ids `min..=max`, read in id order or through the index.
#[derive(Debug, Clone, PartialEq)]
struct TagPart {
    min: i64,
    max: i64,
    in_order: bool,
}

impl TagScan {
    /// `None` when `lo..=hi` is one window's width or less (one statement reads it in order).
    fn new(lo: i64, hi: i64, descending: bool, limit: i64) -> Option<TagScan> {
        (i128::from(hi) - i128::from(lo) >= i128::from(TAG_WINDOW) && limit > 0).then_some(
            TagScan {
                next: if descending { hi } else { lo },
                end: if descending { lo } else { hi },
                descending,
                want: limit,
                seen: 0,
                found: 0,
                parts: 0,
                done: false,
            },
        )
    }

    fn next_part(&self) -> Option<TagPart> {
        // Ids left to read (i128: any two i64 ids apart fit).
        let left = if self.descending {
            i128::from(self.next) - i128::from(self.end)
        } else {
            i128::from(self.end) - i128::from(self.next)
        } + 1;
        if self.want <= 0 || left <= 0 || self.done {
            return None;
        }
        let left = i64::try_from(left).unwrap_or(i64::MAX);
        let width = if self.parts == 0 {
            Some(TAG_WINDOW)
        } else if self.found == 0 || self.parts >= TAG_PARTS_IN_ORDER {
            None
        } else {
            // Twice the ids the rest of the page takes at the density seen so far.
            let need = self.want.saturating_mul(self.seen).saturating_mul(2) / self.found;
            (need <= TAG_MOST_IN_ORDER).then(|| need.max(TAG_WINDOW))
        };
        let (width, in_order) = match width {
            Some(w) => (w.min(left), true),
            None => (left, false),
        };
        let far = if self.descending {
            self.next.saturating_sub(width - 1)
        } else {
            self.next.saturating_add(width - 1)
        };
        Some(TagPart {
            min: self.next.min(far),
            max: self.next.max(far),
            in_order,
        })
    }

    /// `part` was read and held `got` tasks.
    fn read(&mut self, part: &TagPart, got: i64) {
        // The span's last id read: nothing is left (past i64's ends too).
        self.done = if self.descending {
            part.min <= self.end
        } else {
            part.max >= self.end
        };
        self.next = if self.descending {
            part.min.saturating_sub(1)
        } else {
            part.max.saturating_add(1)
        };
        self.seen = self
            .seen
            .saturating_add(part.max.saturating_sub(part.min).saturating_add(1));
        self.found = self.found.saturating_add(got);
        self.want -= got;
        self.parts += 1;
    }
}

/// The rows of the list statement for `p` (`sql/tasks.sql`, `list`); with `count`, one row
/// whose `n` is how many rows that page has. The statement's keyset order is filled in at run
/// time (`{cmp}` `>` and `{order}` `ASC` for oldest first, `{sort}` what is ordered: `id`, or
/// `id + 0` for a page no index may order; PostgreSQL's statement alone has `{sort}`); its
/// arguments, in every dialect: `?1` queue, `?2` the states (a list), `?3` kind, `?4` after,
/// `?5` limit, `?6` concurrency key, `?7` text, `?8` user id, `?9` trace id, `?10` unique key,
/// `?11` worker, `?12`/`?13` the id window, `?14` whether any state will do (an empty list is
/// no filter).
async fn list_rows<D: Driver>(
    d: &D,
    p: &TaskListParams,
    count: bool,
    sort: &str,
) -> Result<Vec<D::Row>> {
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
    let mut st = st.filled(&[("cmp", cmp), ("order", order), ("sort", sort)]);
    if count {
        st.text = format!("SELECT count(*) AS n FROM ({}) x", st.text);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The parts a scan reads when each part finds what `found` says.
    fn parts(
        lo: i64,
        hi: i64,
        descending: bool,
        limit: i64,
        found: impl Fn(&TagPart) -> i64,
    ) -> Vec<TagPart> {
        let Some(mut s) = TagScan::new(lo, hi, descending, limit) else {
            return vec![];
        };
        let mut out = vec![];
        while let Some(p) = s.next_part() {
            s.read(&p, found(&p).min(s.want));
            out.push(p);
            assert!(out.len() <= 5, "{out:?}");
        }
        out
    }

    fn part(min: i64, max: i64, in_order: bool) -> TagPart {
        TagPart { min, max, in_order }
    }

    #[test]
    fn a_small_span_is_one_statement() {
        assert_eq!(TagScan::new(1, 20_000, true, 50), None);
        assert!(TagScan::new(1, 20_001, true, 50).is_some());
        assert_eq!(TagScan::new(1, 1_000_000, true, 0), None);
    }

    #[test]
    fn a_common_tag_is_read_in_order() {
        assert_eq!(
            parts(1, 10_000_000, true, 50, |_| 50),
            vec![part(9_980_001, 10_000_000, true)]
        );
        assert_eq!(
            parts(1, 10_000_000, false, 50, |_| 50),
            vec![part(1, 20_000, true)]
        );
    }

    #[test]
    fn a_rare_tag_goes_to_the_index() {
        assert_eq!(
            parts(1, 10_000_000, true, 50, |_| 0),
            vec![part(9_980_001, 10_000_000, true), part(1, 9_980_000, false)]
        );
        // One found in 20,000: the page's 49 others would take ~2M ids.
        assert_eq!(
            parts(1, 10_000_000, false, 50, |p| i64::from(p.in_order)),
            vec![part(1, 20_000, true), part(20_001, 10_000_000, false)]
        );
    }

    #[test]
    fn a_tag_on_one_task_in_500_stays_in_order() {
        // 40 in the first 20,000 ids: 10 more take ~5,000, read as a window of 20,000.
        let got = parts(1, 10_000_000, true, 50, |p| (p.max - p.min + 1) / 500);
        assert_eq!(
            got,
            vec![
                part(9_980_001, 10_000_000, true),
                part(9_960_001, 9_980_000, true)
            ]
        );
        // 1 in 4,000: 5 in the first window, the next reads 2 × 45 × 4,000 = 360,000 ids at
        // most: too many, the index reads the rest.
        let got = parts(1, 10_000_000, true, 50, |p| (p.max - p.min + 1) / 4_000);
        assert_eq!(got.len(), 2);
        assert!(!got[1].in_order);
        // 1 in 1,000: 20, then 2 × 30 × 1,000 = 60,000 ids in order.
        let got = parts(1, 10_000_000, true, 50, |p| (p.max - p.min + 1) / 1_000);
        assert_eq!(got[1], part(9_920_001, 9_980_000, true));
    }

    #[test]
    fn a_scan_ends_at_the_span_and_after_three_parts() {
        // The span's end: the last part in order stops there.
        assert_eq!(
            parts(1, 30_000, true, 50, |p| (p.max - p.min + 1) / 1_000),
            vec![part(10_001, 30_000, true), part(1, 10_000, true)]
        );
        // Density falling part after part: the index after three parts in order.
        let n = std::cell::Cell::new(0);
        let got = parts(1, 10_000_000, true, 100, |_| {
            n.set(n.get() + 1);
            [40, 30, 10, 20][n.get() - 1]
        });
        assert_eq!(got.iter().filter(|p| p.in_order).count(), 3, "{got:?}");
        assert!(!got.last().unwrap().in_order);
        // Every id read once, in order, from hi down to lo.
        let mut next = 10_000_000;
        for p in &got {
            assert_eq!(p.max, next);
            next = p.min - 1;
        }
        assert_eq!(next, 0);
    }

    #[test]
    fn worst_values_do_not_overflow() {
        let got = parts(i64::MIN, i64::MAX, true, i64::MAX, |_| 1);
        assert!(!got.is_empty());
        // Nothing found: every id of the span read once, in order, and the scan ends.
        let got = parts(i64::MIN, i64::MAX, false, i64::MAX, |_| 0);
        assert_eq!(got.first().map(|p| p.min), Some(i64::MIN));
        assert_eq!(got.last().map(|p| p.max), Some(i64::MAX));
        for w in got.windows(2) {
            assert_eq!(w[0].max + 1, w[1].min, "{got:?}");
        }
    }
}
