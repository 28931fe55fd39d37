//! Releases of claims and held tasks, written once over [`Driver`](crate::driver::Driver).

use super::*;

/// How long a claim's release mark is kept: far longer than a claim takes to commit (its
/// long-poll is at most a minute), so the claim's check after it commits still sees it.
const RELEASE_MARK_KEPT: std::time::Duration = std::time::Duration::from_secs(3600);

/// [`LeaseStore::task_release`] on every backend. A [`Release::Claim`] commits its mark
/// before it looks for the claim's tasks, and a claim's check ([`Release::IfClaimReleased`])
/// reads the mark only after the claim committed: whichever runs second sees the other, so a
/// release never misses a claim that overtook it.
///
/// # Errors
/// Database failure.
pub(crate) async fn task_release<D: Driver>(
    d: &D,
    p: TaskReleaseParams<'_>,
) -> Result<Vec<Released>> {
    let nonce = docket_core::lease::nonce_hex(p.nonce);
    let ids = match p.release {
        Release::Claim => {
            let old = docket_core::time::sub(p.now, RELEASE_MARK_KEPT);
            d.execute(stmt!(leases, release_prune), args![old]).await?;
            d.execute(stmt!(leases, release_mark), args![nonce.as_str(), p.now])
                .await?;
            None
        }
        Release::Tasks(ids) => Some(ids),
        Release::IfClaimReleased(ids) => {
            if ids.is_empty()
                || d.fetch_one(stmt!(leases, release_marked), args![nonce.as_str()])
                    .await?
                    .is_none()
            {
                return Ok(vec![]);
            }
            Some(ids)
        }
    };
    if ids.is_some_and(<[i64]>::is_empty) {
        return Ok(vec![]);
    }
    let ids = ids.map(|i| serde_json::Value::from(i.to_vec()));
    let (nonce, ids) = (&nonce, &ids);
    again(|| async move {
        let mut tx = d.begin().await?;
        let rows = tx
            .fetch(
                stmt!(leases, release_lock),
                args![nonce.as_str(), p.queue, ids.as_ref()],
            )
            .await?;
        let out = rows
            .iter()
            .map(|r| {
                Ok(Released {
                    id: r.int("id")?,
                    queue: r.text("queue")?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        if !out.is_empty() {
            let locked = serde_json::Value::from(out.iter().map(|r| r.id).collect::<Vec<_>>());
            tx.execute(stmt!(leases, release), args![&locked]).await?;
        }
        tx.commit().await?;
        Ok(out)
    })
    .await
}

/// Writes failures ([`Failure`]: `docket_core::lease`'s end of an attempt) of tasks `tx`
/// holds. With `rescue_at`, each only while its task still runs the same attempt with its
/// lease expired at that time (the rescue reads without locking). Returns the ids written.
/// One statement on PostgreSQL (arrays), one per failure elsewhere ([`DriverTx::update_each`]).
///
/// # Errors
/// Database failure.
pub(crate) async fn apply_failures<T: DriverTx>(
    tx: &mut T,
    items: &[Failure],
    rescue_at: Option<Timestamp>,
) -> Result<Vec<i64>> {
    if items.is_empty() {
        return Ok(vec![]);
    }
    let errs: Vec<serde_json::Value> = items.iter().map(Failure::error_json).collect();
    let runs: Vec<String> = items.iter().map(Failure::run_json).collect();
    let rows: Vec<Vec<Arg<'_>>> = items
        .iter()
        .zip(&errs)
        .zip(&runs)
        .map(|((f, e), r)| {
            args![
                f.id,
                f.state.as_str(),
                f.run_at,
                f.finished_at,
                e,
                r,
                f.attempt
            ]
            .to_vec()
        })
        .collect();
    let keep = docket_core::run::RUN_LOG_KEEP;
    tx.update_each(stmt!(leases, fail), args![keep, rescue_at], &rows)
        .await
}

/// [`apply_failures`] of attempts whose rows `tx` holds locked, and their queues' claimers
/// woken (a failed attempt frees its key's and queue's slot).
///
/// # Errors
/// Database failure.
pub(crate) async fn fail_locked<T: DriverTx>(tx: &mut T, items: &[Failure]) -> Result<()> {
    if items.is_empty() {
        return Ok(());
    }
    apply_failures(tx, items, None).await?;
    let queues: Vec<String> = items.iter().map(|f| f.labels.queue.clone()).collect();
    tx.wake(&queues).await
}

/// A task locked for a call made under its lease: the task, the nonce its `lease_token`
/// holds and the lease length the claim kept (`lease_ms`).
struct Locked {
    task: Task,
    nonce: Option<u128>,
    lease_ms: Option<i64>,
}

/// Tasks `ids` (sorted, distinct: every caller locks in one order) locked, by id. Finished
/// tasks kept apart (MySQL's `docket_tasks_done`) are read unlocked, for the refusal the caller
/// answers: nothing changes a finished task there.
async fn locked<T: DriverTx>(tx: &mut T, ids: &[i64]) -> Result<HashMap<i64, Locked>> {
    let mut rows = tx.fetch(stmt!(leases, lock_held), args![ids]).await?;
    if rows.len() < ids.len() {
        let found: std::collections::HashSet<i64> =
            rows.iter().map(|r| r.int("id")).collect::<Result<_>>()?;
        let missing: Vec<i64> = ids.iter().copied().filter(|i| !found.contains(i)).collect();
        rows.extend(tx.fetch_archived(&missing).await?);
    }
    rows.iter()
        .map(|r| {
            let task = row::task(r)?;
            let l = Locked {
                nonce: r.nonce("lease_token")?,
                lease_ms: r.int_opt("lease_ms")?,
                task,
            };
            Ok((l.task.id, l))
        })
        .collect()
}

/// The task a change returned (`RETURNING`), or where statements return nothing (MySQL) the
/// task read again.
async fn changed<T: DriverTx>(tx: &mut T, rows: Vec<T::Row>, id: i64) -> Result<Task> {
    match rows.first() {
        Some(r) => row::task(r),
        None => locked(tx, &[id])
            .await?
            .remove(&id)
            .map(|l| l.task)
            .ok_or_else(|| StoreError::NotFound(format!("task {id}"))),
    }
}

/// [`LeaseStore::task_heartbeat`] on every backend.
///
/// # Errors
/// As [`LeaseStore::task_heartbeat`].
pub(crate) async fn task_heartbeat<D: Driver>(d: &D, p: TaskHeartbeatParams) -> Result<Task> {
    use docket_core::lease::{self, LeaseCheck};
    let p = &p;
    again(|| async move {
        let mut tx = d.begin().await?;
        let Some(l) = locked(&mut tx, &[p.id]).await?.remove(&p.id) else {
            return Err(StoreError::NotFound(format!("task {}", p.id)));
        };
        let t = &l.task;
        match lease::check(t, l.nonce, &p.token, p.now) {
            LeaseCheck::Held => {
                let n = lease::renew(t, l.lease_ms, p.lease, p.now);
                let rows = tx
                    .fetch(
                        stmt!(leases, heartbeat),
                        args![p.id, p.progress.as_ref(), p.now, n.lease_ms, n.expires_at],
                    )
                    .await?;
                let t = changed(&mut tx, rows, p.id).await?;
                tx.commit().await?;
                Ok(t)
            }
            LeaseCheck::CancelRequested => {
                tx.execute(
                    stmt!(leases, heartbeat_cancelled),
                    args![p.id, p.now, p.progress.as_ref()],
                )
                .await?;
                tx.wake(std::slice::from_ref(&t.queue)).await?;
                tx.commit().await?;
                Err(StoreError::Cancelled)
            }
            LeaseCheck::PastDeadline => {
                let f = [Failure::timed_out(t, p.fail_rule, p.now)];
                fail_locked(&mut tx, &f).await?;
                tx.commit().await?;
                Err(StoreError::TimedOut)
            }
            LeaseCheck::Cancelled => Err(StoreError::Cancelled),
            LeaseCheck::Lost => Err(StoreError::LeaseLost),
        }
    })
    .await
}

/// [`LeaseStore::task_fail_many`] on every backend: the tasks locked in id order, each
/// failure `docket_core`'s rule, all written at once.
///
/// # Errors
/// Database failure (then nothing changed).
pub(crate) async fn task_fail_many<D: Driver>(
    d: &D,
    p: TaskFailManyParams<'_>,
) -> Result<Vec<LeaseOutcome>> {
    use docket_core::lease::{self, LeaseCheck};
    let TaskFailManyParams {
        items,
        worker,
        now,
        fail_rule,
    } = p;
    if items.is_empty() {
        return Ok(vec![]);
    }
    let mut ids: Vec<i64> = items.iter().map(|i| i.id).collect();
    ids.sort_unstable();
    ids.dedup();
    let ids = &ids;
    // A deadlock with a concurrent claim or report rolls the transaction back whole (InnoDB
    // picks a victim; PostgreSQL: a row moved to another partition): going again is safe.
    again(|| async move {
        let mut tx = d.begin().await?;
        let rows = locked(&mut tx, ids).await?;
        let mut apply = vec![];
        let mut out = Vec::with_capacity(items.len());
        let mut touched = std::collections::HashSet::new();
        for it in items {
            let Some(l) = rows.get(&it.id) else {
                out.push(LeaseOutcome::NotFound);
                continue;
            };
            // A worker's failure is taken past the deadline too (it is the same end); a
            // cancel requested meanwhile is the fail rule's to apply.
            let check = lease::check(&l.task, l.nonce, &it.token, now);
            let applies = matches!(
                check,
                LeaseCheck::Held | LeaseCheck::PastDeadline | LeaseCheck::CancelRequested
            );
            if !applies {
                out.push(check.refusal());
                continue;
            }
            // The same id twice in one batch: the second finds it failed already.
            if !touched.insert(it.id) {
                out.push(LeaseOutcome::LeaseLost);
                continue;
            }
            let d = fail_rule(&l.task, now, it.retry_in, it.permanent);
            let f = Failure::new(&l.task, d, &it.error, worker, now);
            out.push(f.outcome());
            apply.push(f);
        }
        fail_locked(&mut tx, &apply).await?;
        tx.commit().await?;
        Ok(out)
    })
    .await
}

/// [`LeaseStore::task_lease_token`] on every backend.
///
/// # Errors
/// Database failure.
pub(crate) async fn task_lease_token<D: Driver>(d: &D, id: i64) -> Result<Option<String>> {
    let row = d.fetch_one(stmt!(leases, lease_token), args![id]).await?;
    let nonce = row.map(|r| r.nonce("lease_token")).transpose()?.flatten();
    Ok(docket_core::lease::token_string(nonce, id))
}

/// A task a completion finished (or sent to its next stage): its outcome, and whether its
/// queue's claimers should look again (a key's, a rate limit's or a limited queue's slot is
/// free, or it is waiting again).
fn completed(r: &impl Cols, state: TaskState) -> Result<(i64, LeaseOutcome, Option<String>)> {
    let queue = r.text("queue")?;
    let frees = r.flag("frees")? || state == TaskState::Available;
    let ok = LeaseOutcome::Ok {
        state,
        run_at: r.time("run_at")?,
        labels: TaskLabels {
            kind: r.text("kind")?,
            attempted_at: r.time_opt("attempted_at")?,
            queue: queue.clone(),
        },
    };
    Ok((r.int("id")?, ok, frees.then_some(queue)))
}

/// The arguments of `complete_to_next_stage` for item `it` (nonce 0, never issued, for a
/// malformed token).
macro_rules! next_stage_args {
    ($it:expr, $n:expr, $now:expr) => {
        args![
            $it.id,
            Arg::Nonce(Some(
                docket_core::lease::LeaseToken::nonce_for(&$it.token, $it.id).unwrap_or(0)
            )),
            $n.state.as_str(),
            $n.run_at,
            $n.stage.as_str(),
            $n.payload.as_ref(),
            $n.priority,
            &$it.result,
            $now
        ]
    };
}

/// [`LeaseStore::task_complete_many`] on every backend. Where statements return the rows they
/// change ([`LeaseDriver::returning`]), one statement completes every item that
/// `docket_core::lease::check` would find `Held` (the same conditions, on the deadline the
/// claim stored: `complete_held`), and only what it leaves is locked and checked here;
/// elsewhere (MySQL) every item is locked and checked here, then written.
///
/// # Errors
/// Database failure (then nothing changed).
pub(crate) async fn task_complete_many<D: LeaseDriver>(
    d: &D,
    p: TaskCompleteManyParams<'_>,
) -> Result<Vec<LeaseOutcome>> {
    use docket_core::lease::{self, LeaseCheck, LeaseToken};
    let TaskCompleteManyParams {
        items,
        now,
        fail_rule,
    } = p;
    if items.is_empty() {
        return Ok(vec![]);
    }
    let returning = d.returning();
    // A deadlock with a concurrent claim or report rolls the transaction back whole (InnoDB
    // picks a victim; PostgreSQL: a row moved to another partition): going again is safe.
    again(|| async move {
        let mut tx = d.begin_hot().await?;
        let mut done: HashMap<i64, LeaseOutcome> = HashMap::new();
        let mut freed: Vec<String> = vec![];
        if returning {
            let plain: Vec<&TaskComplete> = items.iter().filter(|it| it.next.is_none()).collect();
            if !plain.is_empty() {
                let ids: Vec<i64> = plain.iter().map(|it| it.id).collect();
                // A malformed token, or one of another task, can never match: nil is never
                // issued.
                let nonces: Vec<u128> = plain
                    .iter()
                    .map(|it| LeaseToken::nonce_for(&it.token, it.id).unwrap_or(0))
                    .collect();
                let results: Vec<serde_json::Value> =
                    plain.iter().map(|it| it.result.clone()).collect();
                let rows = tx
                    .fetch(
                        stmt!(leases, complete_held),
                        args![
                            now,
                            Arg::Ints(&ids),
                            Arg::Nonces(&nonces),
                            Arg::Jsons(&results)
                        ],
                    )
                    .await?;
                for r in &rows {
                    let (id, ok, frees) = completed(r, TaskState::Completed)?;
                    done.insert(id, ok);
                    freed.extend(frees);
                }
            }
            for it in items {
                let Some(n) = &it.next else { continue };
                let rows = tx
                    .fetch(
                        stmt!(leases, complete_to_next_stage),
                        next_stage_args!(it, n, now),
                    )
                    .await?;
                if let Some(r) = rows.first() {
                    let (id, ok, frees) = completed(r, n.state)?;
                    done.insert(id, ok);
                    freed.extend(frees);
                }
            }
        }
        let mut missing: Vec<i64> = items
            .iter()
            .map(|i| i.id)
            .filter(|i| !done.contains_key(i))
            .collect();
        missing.sort_unstable();
        missing.dedup();
        let rows = if missing.is_empty() {
            HashMap::new()
        } else {
            locked(&mut tx, &missing).await?
        };
        let mut out = Vec::with_capacity(items.len());
        let mut complete: Vec<&TaskComplete> = vec![];
        let mut held_queues: Vec<String> = vec![];
        let mut timed_out = vec![];
        let mut touched = std::collections::HashSet::new();
        for it in items {
            if let Some(o) = done.get(&it.id) {
                out.push(o.clone());
                continue;
            }
            let Some(l) = rows.get(&it.id) else {
                out.push(LeaseOutcome::NotFound);
                continue;
            };
            let t = &l.task;
            let check = lease::check(t, l.nonce, &it.token, now);
            // The same id twice in one batch: the second finds it finished already.
            if check != LeaseCheck::Lost && !touched.insert(it.id) {
                out.push(LeaseOutcome::LeaseLost);
                continue;
            }
            match check {
                LeaseCheck::CancelRequested => {
                    // The work was done, but a cancel won: keep its result, end it cancelled.
                    tx.execute(
                        stmt!(leases, complete_cancelled),
                        args![it.id, now, &it.result],
                    )
                    .await?;
                    freed.push(t.queue.clone());
                }
                LeaseCheck::PastDeadline => timed_out.push(Failure::timed_out(t, fail_rule, now)),
                // Held where no statement completed it (MySQL): written below.
                LeaseCheck::Held if !returning => {
                    let state = match &it.next {
                        Some(n) => {
                            tx.execute(
                                stmt!(leases, complete_to_next_stage),
                                next_stage_args!(it, n, now),
                            )
                            .await?;
                            n.state
                        }
                        None => {
                            complete.push(it);
                            TaskState::Completed
                        }
                    };
                    let frees = t.concurrency_key.is_some()
                        || t.rate_limit.is_some()
                        || state == TaskState::Available;
                    if frees {
                        freed.push(t.queue.clone());
                    }
                    held_queues.push(t.queue.clone());
                    let run_at = it.next.as_ref().map_or(t.run_at, |n| n.run_at);
                    let labels = TaskLabels::of(t);
                    out.push(LeaseOutcome::Ok {
                        state,
                        run_at,
                        labels,
                    });
                    continue;
                }
                // The statement took every held item; a duplicate id finds it completed.
                LeaseCheck::Held | LeaseCheck::Cancelled | LeaseCheck::Lost => {}
            }
            out.push(check.refusal());
        }
        // One statement per 500 completions, each row's result picked by its id.
        for chunk in complete.chunks(500) {
            let ids: Vec<i64> = chunk.iter().map(|it| it.id).collect();
            let nonces: Vec<u128> = vec![0; chunk.len()];
            let results: Vec<serde_json::Value> =
                chunk.iter().map(|it| it.result.clone()).collect();
            tx.execute(
                stmt!(leases, complete_held),
                args![
                    now,
                    Arg::Ints(&ids),
                    Arg::Nonces(&nonces),
                    Arg::Jsons(&results)
                ],
            )
            .await?;
        }
        // A queue with a concurrency limit has a slot free now.
        if !held_queues.is_empty() {
            held_queues.sort();
            held_queues.dedup();
            let rows = tx
                .fetch(
                    stmt!(leases, limited_queues),
                    args![Arg::Texts(&held_queues)],
                )
                .await?;
            for r in &rows {
                freed.push(r.text("name")?);
            }
        }
        freed.sort();
        freed.dedup();
        tx.wake(&freed).await?;
        fail_locked(&mut tx, &timed_out).await?;
        tx.commit().await?;
        Ok(out)
    })
    .await
}
