//! Releases of claims and held tasks, written once over [`Driver`](crate::driver::Driver).

use super::prelude::*;

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
    let written = tx
        .update_each(stmt!(leases, fail), args![keep, rescue_at], &rows)
        .await?;
    dead_letters(tx, items, &written).await?;
    Ok(written)
}

/// The dead letters of the discards among `items` that were `written` (issue 43,
/// [`docket_core::dead_letter`]): for each whose queue names a `dead_letter` queue, a task
/// there with `dead_letter_of`, in `tx` — the discard's transaction. Costs nothing unless a
/// failure discards; then one read of the queues' settings, and per dead letter a read of the
/// discarded task, an insert and a mark. A dead letter the rules refuse to make (a spec the
/// dead-letter queue's settings make invalid) is logged and skipped: the discard stands, and no
/// loop that writes failures dies of it.
///
/// # Errors
/// Database failure.
async fn dead_letters<T: DriverTx>(tx: &mut T, items: &[Failure], written: &[i64]) -> Result<()> {
    let discarded: Vec<&Failure> = items
        .iter()
        .filter(|f| f.state == TaskState::Discarded && written.contains(&f.id))
        .collect();
    if discarded.is_empty() {
        return Ok(());
    }
    let mut names: Vec<String> = discarded.iter().map(|f| f.labels.queue.clone()).collect();
    names.sort();
    names.dedup();
    let from = tx_settings(tx, names).await?;
    let mut targets: Vec<String> = from
        .values()
        .filter_map(|s| s.dead_letter.clone())
        .collect();
    if targets.is_empty() {
        return Ok(());
    }
    targets.sort();
    targets.dedup();
    let to = tx_settings(tx, targets).await?;
    for f in discarded {
        let dead_letter = from
            .get(&f.labels.queue)
            .and_then(|s| s.dead_letter.as_deref());
        let Some(row) = tx.fetch_one(stmt!(tasks, get), args![f.id]).await? else {
            continue;
        };
        let t = row::task(&row)?;
        if !docket_core::dead_letter::wanted(&t, dead_letter) {
            continue;
        }
        let Some(q) = dead_letter else { continue };
        let at = f.finished_at.unwrap_or(f.run_at);
        let spec = docket_core::dead_letter::spec(&t, q);
        let resolved = match spec.resolve(to.get(q), &docket_core::TaskDefaults::default(), at) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(task = t.id, dead_letter = q, "no dead letter: {e}");
                continue;
            }
        };
        let Some(letter) = tx.insert_task(&resolved, at).await? else {
            continue;
        };
        let link = serde_json::to_value(docket_core::dead_letter::of(&t, at))
            .map_err(|e| StoreError::Corrupt(format!("dead_letter_of: {e}")))?;
        tx.execute(stmt!(tasks, dead_letter_mark), args![letter.id, &link])
            .await?;
    }
    Ok(())
}

/// Queue settings of `names` read in `tx`, by name (queues without settings are absent).
async fn tx_settings<T: DriverTx>(
    tx: &mut T,
    names: Vec<String>,
) -> Result<HashMap<String, QueueSettings>> {
    let rows = tx
        .fetch(stmt!(queues, settings_many), &[Arg::Texts(&names)])
        .await?;
    rows.iter()
        .map(|r| Ok((r.text("name")?, row::queue_settings(r)?)))
        .collect()
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
pub(crate) struct Locked {
    pub(crate) task: Task,
    pub(crate) nonce: Option<u128>,
    lease_ms: Option<i64>,
}

/// Tasks `ids` (sorted, distinct: every caller locks in one order) locked, by id. Finished
/// tasks kept apart (MySQL's `docket_tasks_done`) are read unlocked, for the refusal the caller
/// answers: nothing changes a finished task there.
pub(crate) async fn locked<T: DriverTx>(tx: &mut T, ids: &[i64]) -> Result<HashMap<i64, Locked>> {
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
            let decision = fail_rule(&l.task, now, it.retry_in, it.permanent);
            let f = Failure::new(&l.task, decision, &it.error, worker, now);
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
        // One statement per 500 completions, each row's result picked by its id. The rows
        // are locked and checked above: the statement reads no nonce (none are passed).
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

/// A candidate row of `claim_candidates`/`claim_candidates_fair`.
fn candidate(r: &impl Cols) -> Result<ClaimCandidate> {
    let key = r.text_opt("concurrency_key")?;
    let limit = r.int32_opt("concurrency_limit")?;
    Ok(ClaimCandidate {
        id: r.int("id")?,
        key: key.map(|k| (k, limit.unwrap_or(1))),
        rate: r.text_opt("rate_limit")?,
        timeout_ms: r.int("timeout_ms")?,
        process: r.flag("process")?,
    })
}

/// [`LeaseStore::task_claim`] on every backend: the one-statement claim first where the
/// backend has one ([`LeaseDriver::claim_fast`]), else a transaction that reads the queue's
/// settings and candidates, serialises on the queue and each concurrency key
/// ([`DriverTx::lock`]) to count what runs, admits rate limits, picks ([`claim_pick`]) and
/// starts the picked tasks.
///
/// Two claimers that lock the same new lock row at once can deadlock inside InnoDB's
/// duplicate-key check, and on Galera two claims through different nodes that took the same
/// task fail certification at COMMIT (1213): the loser is rolled back whole, so it is safe to
/// go again (a growing random pause between tries). On Galera every claim through another node
/// is a rival for the same first tasks in claim order: a claim loses about two rounds in three
/// when three nodes claim flat out, so it gets 30 tries ([`Driver::contended_tries`]; 10 left
/// one claim in a hundred answering 503 with 24 claim loops over three Galera nodes).
///
/// # Errors
/// Database failure; nothing is claimed then.
pub(crate) async fn task_claim<D: LeaseDriver>(d: &D, p: TaskClaimParams) -> Result<Vec<Task>> {
    if p.limit <= 0 {
        return Ok(vec![]);
    }
    let p = &p;
    again_up_to(d.contended_tries(), || claim_once(d, p)).await
}

async fn claim_once<D: LeaseDriver>(d: &D, p: &TaskClaimParams) -> Result<Vec<Task>> {
    let nonce = p
        .nonce
        .unwrap_or_else(docket_core::lease::LeaseToken::new_nonce);
    if let Some(tasks) = d.claim_fast(p, nonce).await? {
        return Ok(tasks);
    }
    let mut tx = d.begin_hot().await?;
    let q = tx
        .fetch_one(stmt!(leases, claim_queue), args![p.queue.as_str()])
        .await?;
    let (paused, queue_limit, schedule_limit) = match &q {
        Some(r) => (
            r.flag("paused")?,
            r.int32_opt("concurrency_limit")?,
            r.int32_opt("schedule_limit")?,
        ),
        None => (false, None, None),
    };
    let fair = match &q {
        Some(r) if r.flag("fair")? => Some(Fairness {
            weights: r
                .json_opt("partition_weights")?
                .map(serde_json::from_value)
                .transpose()
                .map_err(|e| {
                    StoreError::Corrupt(format!("queue {}: partition_weights: {e}", p.queue))
                })?
                .unwrap_or_default(),
        }),
        _ => None,
    };
    let limit = schedule_limit.map_or(p.limit, |l| p.limit.min(i64::from(l)));
    let none: Vec<String> = vec![];
    let kinds = p.kinds.as_ref().unwrap_or(&none);
    let stages = p.stages.as_ref().unwrap_or(&none);
    if paused
        || p.kinds.as_ref().is_some_and(Vec::is_empty)
        || p.stages.as_ref().is_some_and(Vec::is_empty)
    {
        tx.commit().await?;
        return Ok(vec![]);
    }
    let (any_kind, any_stage) = (p.kinds.is_none(), p.stages.is_none());
    let labels = row::labels_json(&p.labels);
    let rows = if let Some(f) = &fair {
        // Ranked (a window function; MySQL reads them unlocked), ordered by weight, then the
        // ones still available locked, in that order. Concurrent fair claims read the same
        // first ranks, so what another claim locked first is left out and the ranks read
        // again, until this claim has its limit or another claim held none of them (with one
        // reading, all but one of eight claims came back empty from a full queue:
        // docket-engine's test concurrent_fair_claims_on_two_nodes). PostgreSQL's statement
        // locks as it reads, and SQLite's writer lock is held: there one reading is all.
        let (per, fetch) = f.fetch(limit);
        tx.fair_settings().await?;
        let mut skip: Vec<i64> = vec![];
        loop {
            let all = tx
                .fetch(
                    stmt!(leases, claim_candidates_fair),
                    args![
                        p.queue.as_str(),
                        p.node.as_str(),
                        p.now,
                        fetch,
                        Arg::Texts(kinds),
                        Arg::Texts(stages),
                        any_kind,
                        any_stage,
                        per,
                        &skip,
                        Arg::Json(Some(&labels))
                    ],
                )
                .await?;
            let ranks = all
                .iter()
                .map(|r| Ok((r.text_opt("partition_key")?, r.int("rn")?)))
                .collect::<Result<Vec<_>>>()?;
            let order = f.order(&ranks);
            let ids: Vec<i64> = order
                .iter()
                .map(|i| all[*i].int("id"))
                .collect::<Result<_>>()?;
            let mut locked = std::collections::HashSet::new();
            if !ids.is_empty() {
                for r in tx.fetch(stmt!(leases, lock_available), args![&ids]).await? {
                    locked.insert(r.int("id")?);
                }
            }
            let missed: Vec<i64> = ids
                .iter()
                .copied()
                .filter(|id| !locked.contains(id))
                .collect();
            if locked.len() as i64 >= limit || missed.is_empty() {
                let mut all: Vec<Option<D::Row>> = all.into_iter().map(Some).collect();
                let mut out = Vec::new();
                for (i, id) in order.into_iter().zip(ids) {
                    if out.len() as i64 >= limit {
                        break;
                    }
                    if locked.contains(&id) {
                        out.extend(all[i].take());
                    }
                }
                break out;
            }
            skip.extend(missed);
        }
    } else {
        tx.fetch(
            stmt!(leases, claim_candidates),
            args![
                p.queue.as_str(),
                p.node.as_str(),
                p.now,
                limit,
                Arg::Texts(kinds),
                Arg::Texts(stages),
                any_kind,
                any_stage,
                Arg::Json(Some(&labels))
            ],
        )
        .await?
    };
    if rows.is_empty() {
        tx.commit().await?;
        return Ok(vec![]);
    }
    let cands = rows.iter().map(candidate).collect::<Result<Vec<_>>>()?;
    let keys = claim_keys(&cands);
    let rated = cands.iter().any(|c| c.rate.is_some());
    let mut rate_keys = vec![];
    let picked = if queue_limit.is_none() && keys.is_empty() && !rated {
        cands.iter().collect()
    } else {
        // Serialise on the queue and on each key (in key order), then count what runs now:
        // each count sees every claim committed before this one got the lock (MySQL runs
        // READ COMMITTED for it).
        let mut room = usize::MAX;
        if let Some(limit) = queue_limit {
            tx.lock(&format!("docket-queue:{}", p.queue)).await?;
            let running = count(&mut tx, stmt!(leases, running_in_queue), &p.queue).await?;
            room = usize::try_from((i64::from(limit) - running).max(0)).unwrap_or(0);
        }
        let mut key_room: HashMap<String, i64> = HashMap::new();
        for (k, l) in &keys {
            tx.lock(&format!("docket-key:{k}")).await?;
            let running = count(&mut tx, stmt!(leases, running_with_key), k).await?;
            key_room.insert(k.clone(), i64::from(*l) - running);
        }
        // Rate limit keys last (their rows, in key order), so every claim takes its locks in
        // one order: queue, concurrency keys, rate keys.
        if rated {
            rate_keys = crate::rate_limits::rate_lock(&mut tx, &cands, p.now).await?;
        }
        let rate_room = crate::rate_limits::rate_room(&rate_keys, p.now);
        claim_pick(&cands, room, key_room, &rate_room)
    };
    if !rate_keys.is_empty() {
        crate::rate_limits::rate_record(&mut tx, &rate_keys, &cands, &picked, p.now).await?;
    }
    if picked.is_empty() {
        tx.commit().await?;
        return Ok(vec![]);
    }
    // Each task's lease by `docket_core::lease::claim_lease`.
    let c = ClaimColumns::of(&picked, p.now, p.lease);
    let expires: Vec<Option<Timestamp>> = c.expires_at.iter().copied().map(Some).collect();
    let args = args![
        &c.ids,
        p.now,
        p.worker.as_str(),
        Arg::Nonce(Some(nonce)),
        p.node.as_str(),
        &c.lease_ms,
        Arg::Times(&expires),
        Arg::Times(&c.deadline_at)
    ];
    let tasks = if d.returning() {
        let rows = tx.fetch(stmt!(leases, claim), args).await?;
        rows.iter().map(row::task).collect::<Result<Vec<_>>>()?
    } else {
        let started = tx.execute(stmt!(leases, claim), args).await?;
        if started != c.ids.len() as u64 {
            // A picked task was claimed elsewhere meanwhile (on Galera a row another node
            // claimed may be applied here between the pick and the update): never start it
            // twice. Rolled back whole (dropping `tx`); the claim goes again.
            return Err(StoreError::Database {
                kind: DbErrorKind::Retryable,
                message: format!(
                    "{} of the {} tasks picked were claimed meanwhile",
                    c.ids.len() as u64 - started,
                    c.ids.len()
                ),
            });
        }
        let mut ids = c.ids.clone();
        ids.sort_unstable();
        locked(&mut tx, &ids)
            .await?
            .into_values()
            .map(|l| l.task)
            .collect()
    };
    tx.commit().await?;
    Ok(claimed(tasks, nonce, p.now))
}

/// The count (`n`) statement `s` reads for `key`.
async fn count<T: DriverTx>(tx: &mut T, s: crate::driver::StmtName, key: &str) -> Result<i64> {
    match tx.fetch_one(s, args![key]).await? {
        Some(r) => r.int("n"),
        None => Ok(0),
    }
}

#[async_trait]
impl<D: LeaseDriver> LeaseStore for D {
    async fn task_claim(&self, p: TaskClaimParams) -> Result<Vec<Task>> {
        task_claim(self, p).await
    }

    async fn task_heartbeat(&self, p: TaskHeartbeatParams) -> Result<Task> {
        task_heartbeat(self, p).await
    }

    async fn task_complete_many(&self, p: TaskCompleteManyParams<'_>) -> Result<Vec<LeaseOutcome>> {
        task_complete_many(self, p).await
    }

    async fn task_fail_many(&self, p: TaskFailManyParams<'_>) -> Result<Vec<LeaseOutcome>> {
        task_fail_many(self, p).await
    }

    async fn task_release(&self, p: TaskReleaseParams<'_>) -> Result<Vec<Released>> {
        task_release(self, p).await
    }

    async fn task_lease_token(&self, id: i64) -> Result<Option<String>> {
        task_lease_token(self, id).await
    }
}
