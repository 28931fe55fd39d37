//! Durable functions' runs ([`RunStore`]), written once over [`Driver`]. Every flow of a run
//! locks the run's row first; the calls a worker makes under the lease of the run's task then
//! lock that task and check the lease as a completion does (`docket_core::lease::check`).

use super::leases::{fail_locked, locked, Locked};
use super::prelude::*;
use crate::{
    NewRun, RunCancelled, RunFinishParams, RunLease, RunRecordParams, RunReport, RunReported,
    RunSendParams, RunStartParams, RunStore, RunSuspendParams,
};
use docket_core::durable::{
    self, Entry, EntryKind, EntryState, EventSent, NewEntry, Resumed, RunListParams, RunState,
    SuspendOutcome, Suspended, WaitOutcome, WorkflowRun,
};
use serde_json::Value;

/// The run `id`, locked.
async fn lock_run<T: DriverTx>(tx: &mut T, id: &str) -> Result<WorkflowRun> {
    let r = tx
        .fetch_one(stmt!(runs, lock), args![id])
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("workflow run {id}")))?;
    row::workflow_run(&r)
}

/// The runs `ids` (sorted, distinct: every caller locks in one order), locked, by id.
async fn lock_runs<T: DriverTx>(
    tx: &mut T,
    ids: &[String],
) -> Result<HashMap<String, WorkflowRun>> {
    tx.fetch(stmt!(runs, lock_many), &[Arg::Texts(ids)])
        .await?
        .iter()
        .map(|r| row::workflow_run(r).map(|run| (run.id.clone(), run)))
        .collect()
}

/// The run's task, locked, when `l`'s lease holds it. A cancel requested or a deadline passed
/// is applied to the task here (the caller commits, then answers the error).
async fn hold<T: DriverTx>(
    tx: &mut T,
    run: &WorkflowRun,
    l: &RunLease,
) -> Result<std::result::Result<Locked, StoreError>> {
    let t = locked(tx, &[run.task_id]).await?.remove(&run.task_id);
    check_lease(tx, t, &l.token, l.now, l.fail_rule).await
}

/// [`hold`] on a task locked already (`None`: not there).
async fn check_lease<T: DriverTx>(
    tx: &mut T,
    t: Option<Locked>,
    token: &str,
    now: Timestamp,
    fail_rule: docket_core::task::FailRule,
) -> Result<std::result::Result<Locked, StoreError>> {
    let Some(t) = t else {
        return Ok(Err(StoreError::LeaseLost));
    };
    match docket_core::lease::check(&t.task, t.nonce, token, now) {
        LeaseCheck::Held => Ok(Ok(t)),
        LeaseCheck::CancelRequested => {
            let f = Failure::new(&t.task, FailDecision::Cancel, "cancelled", None, now);
            fail_locked(tx, &[f]).await?;
            Ok(Err(StoreError::Cancelled))
        }
        LeaseCheck::PastDeadline => {
            fail_locked(tx, &[Failure::timed_out(&t.task, fail_rule, now)]).await?;
            Ok(Err(StoreError::TimedOut))
        }
        LeaseCheck::Cancelled => Ok(Err(StoreError::Cancelled)),
        LeaseCheck::Lost => Ok(Err(StoreError::LeaseLost)),
    }
}

/// Inserts a run and its task unless a run of that id is there; answers the run and whether
/// it was inserted.
async fn insert_run<T: DriverTx>(
    tx: &mut T,
    run: &NewRun,
    now: Timestamp,
) -> Result<(WorkflowRun, bool)> {
    if let Some(r) = tx
        .fetch_one(stmt!(runs, get), args![run.id.as_str()])
        .await?
    {
        return Ok((row::workflow_run(&r)?, false));
    }
    insert_new(tx, run, now).await?;
    Ok((get_in(tx, &run.id).await?, true))
}

/// Inserts a run that is not there, and its task.
async fn insert_new<T: DriverTx>(tx: &mut T, run: &NewRun, now: Timestamp) -> Result<()> {
    insert_many(tx, &[run], now).await
}

/// Inserts runs that are not there, and their tasks: a statement for the tasks and one for
/// the runs on PostgreSQL (arrays), a statement per row elsewhere.
async fn insert_many<T: DriverTx>(tx: &mut T, runs: &[&NewRun], now: Timestamp) -> Result<()> {
    let tasks = runs.iter().map(|r| r.task.clone()).collect();
    let tasks = tx.insert_tasks(tasks, now).await?;
    let mut rows = Vec::with_capacity(runs.len());
    for (run, task) in runs.iter().zip(&tasks) {
        let Some(task) = task else {
            return Err(StoreError::Conflict(format!(
                "workflow run {}: its task's unique key",
                run.id
            )));
        };
        rows.push(
            args![
                run.id.as_str(),
                run.workflow.as_str(),
                task.queue.as_str(),
                &run.input,
                run.parent_id.as_deref(),
                task.id,
                now
            ]
            .to_vec(),
        );
    }
    tx.update_each(stmt!(runs, insert), &[], &rows).await?;
    Ok(())
}

/// The runs `ids`, by id (not locked).
async fn runs_in<T: DriverTx>(tx: &mut T, ids: &[String]) -> Result<HashMap<String, WorkflowRun>> {
    tx.fetch(stmt!(runs, get_many), &[Arg::Texts(ids)])
        .await?
        .iter()
        .map(|r| row::workflow_run(r).map(|run| (run.id.clone(), run)))
        .collect()
}

/// Starts `starts` (of distinct ids) in `tx` ([`RunStore::run_start_many`]): the runs there
/// read with one statement, the others inserted together, then read back with one.
async fn start<T: DriverTx>(
    tx: &mut T,
    starts: &[&RunStartParams],
) -> Result<Vec<(WorkflowRun, bool)>> {
    let mut ids: Vec<String> = starts.iter().map(|p| p.run.id.clone()).collect();
    ids.sort_unstable();
    let there = runs_in(tx, &ids).await?;
    let fresh: Vec<&NewRun> = starts
        .iter()
        .filter(|p| !there.contains_key(&p.run.id))
        .map(|p| &p.run)
        .collect();
    // One time for all (the latest of the starts'), as one transaction has.
    if let Some(now) = starts
        .iter()
        .map(|p| p.now)
        .max()
        .filter(|_| !fresh.is_empty())
    {
        insert_many(tx, &fresh, now).await?;
    }
    let mut new: Vec<String> = fresh.iter().map(|r| r.id.clone()).collect();
    new.sort_unstable();
    let mut made = if new.is_empty() {
        HashMap::new()
    } else {
        runs_in(tx, &new).await?
    };
    starts
        .iter()
        .map(|p| match there.get(&p.run.id) {
            Some(r) => Ok((r.clone(), false)),
            None => made
                .remove(&p.run.id)
                .map(|r| (r, true))
                .ok_or_else(|| StoreError::NotFound(format!("workflow run {}", p.run.id))),
        })
        .collect()
}

/// One start in its own transaction; two starts of one id at once: the other one's insert
/// won, and its run is answered.
async fn start_one<D: Driver>(d: &D, p: &RunStartParams) -> Result<(WorkflowRun, bool)> {
    let first = again(|| async move {
        let mut tx = d.begin_keyed().await?;
        let mut out = start(&mut tx, &[p]).await?;
        tx.commit().await?;
        Ok(out.remove(0))
    })
    .await;
    match first {
        Err(StoreError::Conflict(_)) => match d.run_get(&p.run.id).await? {
            Some(r) => Ok((r, false)),
            None => first,
        },
        other => other,
    }
}

/// A journal entry to insert ([`Writes`]).
struct EntryRow<'a> {
    run_id: &'a str,
    seq: i64,
    kind: EntryKind,
    name: &'a str,
    state: EntryState,
    output: Option<&'a Value>,
    error: Option<String>,
    attempts: i32,
    child_id: Option<String>,
    started_at: Timestamp,
    finished_at: Option<Timestamp>,
    wake_at: Option<Timestamp>,
}

/// A run's end to write ([`Writes`]): `runs.finish`'s arguments.
struct EndRow {
    id: String,
    state: RunState,
    result: Option<Value>,
    error: Option<String>,
    steps: i64,
}

/// The journal entries, journal lengths and run ends a flow writes, kept until
/// [`Writes::flush`] writes each kind with one statement on PostgreSQL (arrays,
/// [`DriverTx::update_each`]) — a report batch's for all its runs — and a statement per row
/// elsewhere.
#[derive(Default)]
struct Writes<'a> {
    entries: Vec<EntryRow<'a>>,
    /// (run, the journal's length at least, now).
    steps: Vec<(String, i64, Timestamp)>,
    ends: Vec<EndRow>,
}

impl Writes<'_> {
    async fn flush<T: DriverTx>(&mut self, tx: &mut T, now: Timestamp) -> Result<()> {
        let entries: Vec<Vec<Arg<'_>>> = self
            .entries
            .iter()
            .map(|e| {
                args![
                    e.run_id,
                    e.seq,
                    e.kind.as_str(),
                    e.name,
                    e.state.as_str(),
                    e.output,
                    e.error.as_deref(),
                    e.attempts,
                    e.child_id.as_deref(),
                    e.started_at,
                    e.finished_at,
                    e.wake_at
                ]
                .to_vec()
            })
            .collect();
        tx.update_each(stmt!(runs, entry_insert), &[], &entries)
            .await?;
        let steps: Vec<Vec<Arg<'_>>> = self
            .steps
            .iter()
            .map(|(id, n, at)| args![id.as_str(), *n, *at].to_vec())
            .collect();
        tx.update_each(stmt!(runs, set_steps), &[], &steps).await?;
        let ends: Vec<Vec<Arg<'_>>> = self
            .ends
            .iter()
            .map(|e| {
                args![
                    e.id.as_str(),
                    e.state.as_str(),
                    e.result.as_ref(),
                    e.error.as_deref(),
                    e.steps
                ]
                .to_vec()
            })
            .collect();
        tx.update_each(stmt!(runs, finish), args![now], &ends)
            .await?;
        *self = Writes::default();
        Ok(())
    }
}

/// Writes `entries` into `run`'s journal (see [`RunStore::run_record`]) through `w` (the
/// caller flushes it); answers how many were written and the journal's length after them
/// (`set_steps`: written to the run's row here; otherwise the caller writes it, as a finish
/// does with the run's end).
async fn record<'a, T: DriverTx>(
    tx: &mut T,
    w: &mut Writes<'a>,
    run: &'a WorkflowRun,
    entries: &'a [NewEntry],
    children: &[(i64, NewRun)],
    now: Timestamp,
    set_steps: bool,
) -> Result<(usize, i64)> {
    let Some(min) = entries.iter().map(|e| e.seq).min() else {
        return Ok((0, run.steps));
    };
    // `steps` is one past the journal's last seq (every insert raises it under the run's lock):
    // entries from there on cannot be there yet, the usual case of a worker going forward.
    let there: HashMap<i64, Entry> = if min < run.steps {
        tx.fetch(stmt!(runs, entries_from), args![run.id.as_str(), min])
            .await?
            .iter()
            .map(|r| row::entry(r).map(|e| (e.seq, e)))
            .collect::<Result<_>>()?
    } else {
        HashMap::new()
    };
    let mut written = 0;
    let mut top = -1;
    for e in entries {
        top = top.max(e.seq);
        if let Some(old) = there.get(&e.seq) {
            if let Some(msg) = durable::replay_conflict(
                &run.workflow,
                &run.id,
                (old.kind.as_str(), &old.name),
                (e.kind, &e.name),
                e.seq,
            ) {
                return Err(StoreError::Nondeterministic(msg));
            }
            continue;
        }
        let mut child_id = None;
        if e.kind == EntryKind::Child {
            let Some((_, child)) = children.iter().find(|(s, _)| *s == e.seq) else {
                return Err(StoreError::Invalid(format!(
                    "steps: entry {} starts no child",
                    e.seq
                )));
            };
            let (c, _) = insert_run(tx, child, now).await?;
            if c.workflow != child.workflow || c.parent_id.as_deref() != Some(run.id.as_str()) {
                return Err(StoreError::Conflict(format!(
                    "workflow run {} exists and is not a child {} of {}",
                    c.id, child.workflow, run.id
                )));
            }
            child_id = Some(c.id);
        }
        let state = if e.error.is_some() {
            EntryState::Failed
        } else {
            EntryState::Completed
        };
        w.entries.push(EntryRow {
            run_id: &run.id,
            seq: e.seq,
            kind: e.kind,
            name: &e.name,
            state,
            output: e.output.as_ref(),
            error: e.error.as_deref().map(durable::clip_error),
            attempts: e.attempts.unwrap_or(1),
            child_id,
            started_at: e.started_at.unwrap_or(now),
            finished_at: Some(now),
            wake_at: None,
        });
        written += 1;
    }
    if set_steps {
        w.steps.push((run.id.clone(), top + 1, now));
    }
    Ok((written, run.steps.max(top + 1)))
}

/// Puts event `name` in run `id`'s mailbox and wakes the run when it waits for it; `None` when
/// there is no such run and `must` is false (a parent pruned before its child ended).
async fn deliver<T: DriverTx>(
    tx: &mut T,
    id: &str,
    name: &str,
    payload: &Value,
    now: Timestamp,
    must: bool,
) -> Result<Option<EventSent>> {
    let run = match lock_run(tx, id).await {
        Ok(r) => r,
        Err(StoreError::NotFound(_)) if !must => return Ok(None),
        Err(e) => return Err(e),
    };
    if must && run.state.is_finished() {
        return Err(StoreError::InvalidState(format!(
            "workflow run {id} has finished ({})",
            run.state.as_str()
        )));
    }
    tx.execute(stmt!(runs, event_insert), args![id, name, payload, now])
        .await?;
    let ev = tx
        .fetch_one(stmt!(runs, last_id), args![])
        .await?
        .ok_or_else(|| StoreError::NotFound("the event's id".into()))?
        .int("id")?;
    let delivered = run.state == RunState::Waiting && run.waiting_for.as_deref() == Some(name);
    if delivered {
        tx.execute(stmt!(runs, wake_task), args![run.task_id, now])
            .await?;
        set_state(tx, id, RunState::Running, None, None, now).await?;
        tx.wake(std::slice::from_ref(&run.queue)).await?;
    }
    Ok(Some(EventSent { id: ev, delivered }))
}

async fn set_state<T: DriverTx>(
    tx: &mut T,
    id: &str,
    state: RunState,
    waiting_for: Option<&str>,
    wake_at: Option<Timestamp>,
    now: Timestamp,
) -> Result<()> {
    tx.execute(
        stmt!(runs, set_state),
        args![id, state.as_str(), waiting_for, wake_at, now],
    )
    .await?;
    Ok(())
}

/// Tells `run`'s parent, if any, that it ended.
async fn tell_parent<T: DriverTx>(tx: &mut T, run: &WorkflowRun, now: Timestamp) -> Result<()> {
    if let Some(parent) = &run.parent_id {
        let payload = durable::child_event_payload(run);
        deliver(
            tx,
            parent,
            &durable::child_event(&run.id),
            &payload,
            now,
            false,
        )
        .await?;
    }
    Ok(())
}

async fn get_in<T: DriverTx>(tx: &mut T, id: &str) -> Result<WorkflowRun> {
    let r = tx
        .fetch_one(stmt!(runs, get), args![id])
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("workflow run {id}")))?;
    row::workflow_run(&r)
}

async fn entry_at<T: DriverTx>(tx: &mut T, id: &str, seq: i64) -> Result<Option<Entry>> {
    let rows = tx.fetch(stmt!(runs, entries_from), args![id, seq]).await?;
    match rows.first() {
        Some(r) => {
            let e = row::entry(r)?;
            Ok((e.seq == seq).then_some(e))
        }
        None => Ok(None),
    }
}

/// A call's items in groups of distinct keys, in order: an item whose key came before goes in
/// the next group (the k-th item of a key in group k), so items of one key are written one
/// after the other.
struct Groups<'a, T> {
    parts: Vec<Vec<&'a T>>,
    /// Each item's group and place in it.
    at: Vec<(usize, usize)>,
}

fn in_groups<'a, T>(items: &'a [T], key: impl Fn(&'a T) -> &'a str) -> Groups<'a, T> {
    let mut g = Groups {
        parts: vec![],
        at: vec![],
    };
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for it in items {
        let k = seen.entry(key(it)).and_modify(|k| *k += 1).or_insert(0);
        if g.parts.len() <= *k {
            g.parts.push(vec![]);
        }
        g.at.push((*k, g.parts[*k].len()));
        g.parts[*k].push(it);
    }
    g
}

impl<T> Groups<'_, T> {
    /// The groups' answers put back in the items' order.
    fn answers<O>(&self, outs: Vec<Vec<O>>) -> Vec<O> {
        let mut outs: Vec<Vec<Option<O>>> = outs
            .into_iter()
            .map(|o| o.into_iter().map(Some).collect())
            .collect();
        self.at
            .iter()
            .filter_map(|&(k, i)| {
                outs.get_mut(k)
                    .and_then(|o| o.get_mut(i))
                    .and_then(Option::take)
            })
            .collect()
    }
}

/// A report of a batch refused: the error, and whether what its refusal applied (a lease
/// check's cancel or timeout of the task) is to be committed.
struct Refusal {
    /// Its place in the reports written.
    at: usize,
    error: StoreError,
    commit: bool,
}

/// Errors of one report that do not end its batch's transaction for the others.
fn refusable(e: &StoreError) -> bool {
    matches!(
        e,
        StoreError::Nondeterministic(_)
            | StoreError::Conflict(_)
            | StoreError::Invalid(_)
            | StoreError::NotFound(_)
    )
}

/// Writes `reports` (of distinct runs) in `tx` ([`RunStore::run_report_many`]): the runs and
/// then their tasks locked with one statement each, in id order; each report's lease checked
/// and its entries recorded; the ends written, the finished tasks completed with one statement
/// and discarded with one; the ended runs read back together. `Err(Refusal)` at the first
/// report refused (the caller rolls back, or commits the refusal of a report alone). One
/// time for all (the latest of the reports'), as one transaction has.
async fn report<T: DriverTx>(
    tx: &mut T,
    reports: &[&RunReport],
) -> Result<std::result::Result<Vec<RunReported>, Refusal>> {
    let Some(now) = reports.iter().map(|r| r.record.lease.now).max() else {
        return Ok(Ok(vec![]));
    };
    let mut ids: Vec<String> = reports.iter().map(|r| r.record.lease.id.clone()).collect();
    ids.sort_unstable();
    ids.dedup();
    let runs = lock_runs(tx, &ids).await?;
    let mut task_ids: Vec<i64> = runs.values().map(|r| r.task_id).collect();
    task_ids.sort_unstable();
    task_ids.dedup();
    let mut tasks = locked(tx, &task_ids).await?;
    let (mut done, mut nonces, mut results) = (vec![], vec![], vec![]);
    let mut failures = vec![];
    let mut ended: Vec<(usize, &str)> = vec![];
    let mut w = Writes::default();
    let mut out = Vec::with_capacity(reports.len());
    for (at, r) in reports.iter().enumerate() {
        let l = &r.record.lease;
        let refuse = |error, commit| Ok(Err(Refusal { at, error, commit }));
        let Some(run) = runs.get(&l.id) else {
            return refuse(
                StoreError::NotFound(format!("workflow run {}", l.id)),
                false,
            );
        };
        let t = tasks.remove(&run.task_id);
        let t = match check_lease(tx, t, &l.token, now, l.fail_rule).await? {
            Ok(t) => t,
            Err(e) => return refuse(e, true),
        };
        let (entries, children) = (&r.record.entries, &r.record.children);
        let Some(outcome) = &r.finish else {
            match record(tx, &mut w, run, entries, children, now, true).await {
                Ok((n, _)) => out.push(RunReported::Recorded(n)),
                Err(e) if refusable(&e) => return refuse(e, false),
                Err(e) => return Err(e),
            }
            continue;
        };
        let nonce = t.nonce.unwrap_or(0);
        if run.state.is_finished() {
            // Ended before (a cancel, or this call sent again): the task only carried it.
            done.push(run.task_id);
            nonces.push(nonce);
            results.push(run.result.clone().unwrap_or(Value::Null));
            out.push(RunReported::Finished(Box::new(run.clone())));
            continue;
        }
        let steps = match record(tx, &mut w, run, entries, children, now, false).await {
            Ok((_, steps)) => steps,
            Err(e) if refusable(&e) => return refuse(e, false),
            Err(e) => return Err(e),
        };
        let (state, result, error) = match outcome {
            Ok(v) => (RunState::Completed, Some(v), None),
            Err(e) => (RunState::Failed, None, Some(durable::clip_error(e))),
        };
        w.ends.push(EndRow {
            id: run.id.clone(),
            state,
            result: result.cloned(),
            error: error.clone(),
            steps,
        });
        match (result, &error) {
            (Some(v), _) => {
                done.push(run.task_id);
                nonces.push(nonce);
                results.push(v.clone());
            }
            (None, e) => failures.push(Failure::new(
                &t.task,
                FailDecision::Discard,
                e.as_deref().unwrap_or_default(),
                None,
                now,
            )),
        }
        ended.push((at, run.id.as_str()));
        out.push(RunReported::Recorded(0));
    }
    w.flush(tx, now).await?;
    if !done.is_empty() {
        tx.execute(
            stmt!(leases, complete_held),
            args![
                now,
                Arg::Ints(&done),
                Arg::Nonces(&nonces),
                Arg::Jsons(&results)
            ],
        )
        .await?;
    }
    fail_locked(tx, &failures).await?;
    if !ended.is_empty() {
        // Read back as the database keeps them (the answer, and what a parent is told).
        let mut ids: Vec<String> = ended.iter().map(|(_, id)| id.to_string()).collect();
        ids.sort_unstable();
        let mut now_runs = lock_runs(tx, &ids).await?;
        for (at, id) in ended {
            let run = now_runs
                .remove(id)
                .ok_or_else(|| StoreError::NotFound(format!("workflow run {id}")))?;
            tell_parent(tx, &run, now).await?;
            out[at] = RunReported::Finished(Box::new(run));
        }
    }
    Ok(Ok(out))
}

/// One report in its own transaction; a refusal's cancel or timeout of the task is committed.
async fn report_one<D: Driver>(d: &D, r: &RunReport) -> Result<RunReported> {
    again(|| async move {
        let mut tx = d.begin_keyed().await?;
        match report(&mut tx, &[r]).await? {
            Ok(mut o) => {
                tx.commit().await?;
                Ok(o.remove(0))
            }
            Err(Refusal { error, commit, .. }) => {
                if commit {
                    tx.commit().await?;
                }
                Err(error)
            }
        }
    })
    .await
}

/// Locks the run and holds its task's lease: `Err` (after committing what the check applied)
/// when it does not hold.
macro_rules! held {
    ($tx:ident, $lease:expr) => {{
        let run = lock_run(&mut $tx, &$lease.id).await?;
        match hold(&mut $tx, &run, $lease).await? {
            Ok(t) => (run, t),
            Err(e) => {
                $tx.commit().await?;
                return Err(e);
            }
        }
    }};
}

#[async_trait]
impl<D: Driver> RunStore for D {
    async fn run_start(&self, p: RunStartParams) -> Result<(WorkflowRun, bool)> {
        start_one(self, &p).await
    }

    async fn run_start_many(
        &self,
        starts: Vec<RunStartParams>,
    ) -> Result<Vec<Result<(WorkflowRun, bool)>>> {
        if starts.len() <= 1 {
            let mut out = vec![];
            for p in &starts {
                out.push(start_one(self, p).await);
            }
            return Ok(out);
        }
        // A second start of an id in the call goes in a later group: it answers the first's run.
        let groups = in_groups(&starts, |p| p.run.id.as_str());
        let parts = &groups.parts;
        let written = again(|| async move {
            let mut tx = self.begin_keyed().await?;
            let mut outs = vec![];
            for g in parts {
                outs.push(start(&mut tx, g).await?);
            }
            tx.commit().await?;
            Ok(outs)
        })
        .await;
        match written {
            Ok(outs) => Ok(groups.answers(outs).into_iter().map(Ok).collect()),
            Err(_) => {
                let mut out = vec![];
                for p in &starts {
                    out.push(start_one(self, p).await);
                }
                Ok(out)
            }
        }
    }

    async fn run_get(&self, id: &str) -> Result<Option<WorkflowRun>> {
        let r = self.fetch_one(stmt!(runs, get), args![id]).await?;
        r.as_ref().map(row::workflow_run).transpose()
    }

    async fn run_list(&self, p: RunListParams) -> Result<Vec<WorkflowRun>> {
        let rows = self
            .fetch(
                stmt!(runs, list),
                args![
                    p.workflow.as_deref(),
                    p.state.map(RunState::as_str),
                    p.parent_id.as_deref(),
                    p.created_after,
                    p.created_before,
                    p.limit.unwrap_or(100)
                ],
            )
            .await?;
        rows.iter().map(row::workflow_run).collect()
    }

    async fn run_entries(&self, id: &str) -> Result<Vec<Entry>> {
        let rows = self.fetch(stmt!(runs, entries), args![id]).await?;
        rows.iter().map(row::entry).collect()
    }

    async fn run_record(&self, p: RunRecordParams) -> Result<usize> {
        let r = RunReport {
            record: p,
            finish: None,
        };
        match report_one(self, &r).await? {
            RunReported::Recorded(n) => Ok(n),
            RunReported::Finished(_) => Ok(0),
        }
    }

    async fn run_suspend(&self, p: RunSuspendParams) -> Result<Suspended> {
        let p = &p;
        again(|| async move {
            let now = p.record.lease.now;
            let mut tx = self.begin_keyed().await?;
            let (run, _) = held!(tx, &p.record.lease);
            let mut writes = Writes::default();
            record(
                &mut tx,
                &mut writes,
                &run,
                &p.record.entries,
                &p.record.children,
                now,
                true,
            )
            .await?;
            writes.flush(&mut tx, now).await?;
            let w = &p.wait;
            let event_name = w.event();
            let wake_at = match entry_at(&mut tx, &run.id, w.seq).await? {
                Some(old) => {
                    if let Some(msg) = durable::replay_conflict(
                        &run.workflow,
                        &run.id,
                        (old.kind.as_str(), &old.name),
                        (w.kind, &w.name),
                        w.seq,
                    ) {
                        return Err(StoreError::Nondeterministic(msg));
                    }
                    let outcome = match old.state {
                        EntryState::Waiting => None,
                        EntryState::TimedOut => Some(SuspendOutcome::TimedOut),
                        _ if w.kind == EntryKind::Sleep => Some(SuspendOutcome::Due),
                        _ => Some(SuspendOutcome::Event),
                    };
                    if let Some(outcome) = outcome {
                        tx.commit().await?;
                        return Ok(Suspended {
                            payload: (outcome == SuspendOutcome::Event)
                                .then(|| old.output.clone().unwrap_or(Value::Null)),
                            outcome,
                            entry: old,
                        });
                    }
                    old.wake_at
                }
                None => {
                    let wake_at = match w.kind {
                        EntryKind::Sleep => w.until,
                        _ => w.timeout.map(|t| docket_core::time::add(now, t)),
                    };
                    writes.entries.push(EntryRow {
                        run_id: &run.id,
                        seq: w.seq,
                        kind: w.kind,
                        name: &w.name,
                        state: EntryState::Waiting,
                        output: None,
                        error: None,
                        attempts: 1,
                        child_id: w.child_id.clone(),
                        started_at: now,
                        finished_at: None,
                        wake_at,
                    });
                    writes.steps.push((run.id.clone(), w.seq + 1, now));
                    writes.flush(&mut tx, now).await?;
                    wake_at
                }
            };
            let event = match &event_name {
                Some(name) => tx
                    .fetch_one(
                        stmt!(runs, event_next),
                        args![run.id.as_str(), name.as_str()],
                    )
                    .await?
                    .map(|r| Ok::<_, StoreError>((r.int("id")?, r.json("payload")?)))
                    .transpose()?,
                None => None,
            };
            let (ev_id, ev_payload) = match event {
                Some((i, p)) => (Some(i), Some(p)),
                None => (None, None),
            };
            let (outcome, payload) = match durable::wait_outcome(w.kind, wake_at, ev_payload, now) {
                WaitOutcome::Due => {
                    tx.execute(
                        stmt!(runs, entry_end),
                        args![
                            run.id.as_str(),
                            w.seq,
                            EntryState::Completed.as_str(),
                            None::<&Value>,
                            now
                        ],
                    )
                    .await?;
                    (SuspendOutcome::Due, None)
                }
                WaitOutcome::Event(v) => {
                    if let Some(i) = ev_id {
                        tx.execute(stmt!(runs, event_take), args![i, w.seq]).await?;
                    }
                    tx.execute(
                        stmt!(runs, entry_end),
                        args![
                            run.id.as_str(),
                            w.seq,
                            EntryState::Completed.as_str(),
                            &v,
                            now
                        ],
                    )
                    .await?;
                    (SuspendOutcome::Event, Some(v))
                }
                WaitOutcome::TimedOut => {
                    tx.execute(
                        stmt!(runs, entry_end),
                        args![
                            run.id.as_str(),
                            w.seq,
                            EntryState::TimedOut.as_str(),
                            None::<&Value>,
                            now
                        ],
                    )
                    .await?;
                    (SuspendOutcome::TimedOut, None)
                }
                WaitOutcome::Suspend { until } => {
                    tx.execute(stmt!(runs, suspend_task), args![run.task_id, until, now])
                        .await?;
                    let (state, waiting_for) = match w.kind {
                        EntryKind::Sleep => (RunState::Sleeping, None),
                        _ => (RunState::Waiting, event_name.as_deref()),
                    };
                    set_state(&mut tx, &run.id, state, waiting_for, wake_at, now).await?;
                    (SuspendOutcome::Suspended, None)
                }
            };
            let entry = entry_at(&mut tx, &run.id, w.seq)
                .await?
                .ok_or_else(|| StoreError::NotFound(format!("journal entry {}", w.seq)))?;
            tx.commit().await?;
            Ok(Suspended {
                outcome,
                payload,
                entry,
            })
        })
        .await
    }

    async fn run_finish(&self, p: RunFinishParams) -> Result<WorkflowRun> {
        let r = RunReport {
            record: p.record,
            finish: Some(p.outcome),
        };
        match report_one(self, &r).await? {
            RunReported::Finished(run) => Ok(*run),
            RunReported::Recorded(_) => Err(StoreError::NotFound(format!(
                "workflow run {}",
                r.record.lease.id
            ))),
        }
    }

    async fn run_report_many(&self, reports: Vec<RunReport>) -> Result<Vec<Result<RunReported>>> {
        if reports.len() <= 1 {
            let mut out = vec![];
            for r in &reports {
                out.push(report_one(self, r).await);
            }
            return Ok(out);
        }
        let mut out: Vec<Option<Result<RunReported>>> = reports.iter().map(|_| None).collect();
        let mut pending: Vec<usize> = (0..reports.len()).collect();
        while !pending.is_empty() {
            let items: Vec<&RunReport> = pending.iter().map(|&i| &reports[i]).collect();
            // A run's second report in the call goes in a later group, written after the first.
            let groups = in_groups(&items, |r| r.record.lease.id.as_str());
            let parts = &groups.parts;
            let written = again(|| async move {
                let mut tx = self.begin_keyed().await?;
                let mut outs = vec![];
                for (k, g) in parts.iter().enumerate() {
                    let g: Vec<&RunReport> = g.iter().map(|r| **r).collect();
                    match report(&mut tx, &g).await? {
                        Ok(o) => outs.push(o),
                        // Rolled back (dropped).
                        Err(r) => return Ok(Err((k, r.at))),
                    }
                }
                tx.commit().await?;
                Ok(Ok(outs))
            })
            .await;
            match written {
                Ok(Ok(outs)) => {
                    for (j, o) in groups.answers(outs).into_iter().enumerate() {
                        out[pending[j]] = Some(Ok(o));
                    }
                    break;
                }
                // The refused report is answered alone, then the others go again without it
                // (one more transaction per refusal) — unless its run has another report here,
                // whose order only going one by one keeps.
                Ok(Err((k, i))) => {
                    let j = groups.at.iter().position(|&a| a == (k, i)).unwrap_or(0);
                    let id = &reports[pending[j]].record.lease.id;
                    if pending
                        .iter()
                        .filter(|&&p| reports[p].record.lease.id == *id)
                        .count()
                        > 1
                    {
                        for &p in &pending {
                            out[p] = Some(report_one(self, &reports[p]).await);
                        }
                        break;
                    }
                    let p = pending.remove(j);
                    out[p] = Some(report_one(self, &reports[p]).await);
                }
                // A database failure of the batch (not a retryable one: `again` went again):
                // each goes alone.
                Err(_) => {
                    for &p in &pending {
                        out[p] = Some(report_one(self, &reports[p]).await);
                    }
                    break;
                }
            }
        }
        Ok(out
            .into_iter()
            .map(|o| o.unwrap_or_else(|| Err(StoreError::Invalid("a report not written".into()))))
            .collect())
    }

    async fn run_resume(&self, p: RunLease) -> Result<Resumed> {
        let p = &p;
        again(|| async move {
            let mut tx = self.begin_keyed().await?;
            let (run, _) = held!(tx, &p);
            tx.execute(stmt!(runs, sleeps_over), args![run.id.as_str(), p.now])
                .await?;
            if matches!(run.state, RunState::Sleeping | RunState::Waiting) {
                set_state(&mut tx, &run.id, RunState::Running, None, None, p.now).await?;
            }
            let steps = tx
                .fetch(stmt!(runs, entries), args![run.id.as_str()])
                .await?
                .iter()
                .map(row::entry)
                .collect::<Result<Vec<_>>>()?;
            let run = get_in(&mut tx, &run.id).await?;
            tx.commit().await?;
            Ok(Resumed {
                run,
                steps,
                now: p.now,
            })
        })
        .await
    }

    async fn run_send(&self, p: RunSendParams) -> Result<EventSent> {
        let p = &p;
        again(|| async move {
            let mut tx = self.begin_keyed().await?;
            let sent = deliver(&mut tx, &p.id, &p.name, &p.payload, p.now, true)
                .await?
                .ok_or_else(|| StoreError::NotFound(format!("workflow run {}", p.id)))?;
            tx.commit().await?;
            Ok(sent)
        })
        .await
    }

    async fn run_cancel(&self, id: &str, now: Timestamp) -> Result<RunCancelled> {
        again(|| async move {
            let mut tx = self.begin_keyed().await?;
            let run = lock_run(&mut tx, id).await?;
            if run.state.is_finished() {
                tx.commit().await?;
                return Ok(RunCancelled {
                    run,
                    cancelled: false,
                    children: vec![],
                });
            }
            Writes {
                ends: vec![EndRow {
                    id: id.to_string(),
                    state: RunState::Cancelled,
                    result: None,
                    error: Some("cancelled".into()),
                    steps: 0,
                }],
                ..Writes::default()
            }
            .flush(&mut tx, now)
            .await?;
            let children = tx
                .fetch(stmt!(runs, open_children), args![id])
                .await?
                .iter()
                .map(|r| r.text("id"))
                .collect::<Result<Vec<_>>>()?;
            let ended = get_in(&mut tx, id).await?;
            tell_parent(&mut tx, &ended, now).await?;
            tx.commit().await?;
            Ok(RunCancelled {
                run: ended,
                cancelled: true,
                children,
            })
        })
        .await
    }

    async fn run_reopen(&self, id: &str, now: Timestamp) -> Result<WorkflowRun> {
        again(|| async move {
            let mut tx = self.begin_keyed().await?;
            let run = lock_run(&mut tx, id).await?;
            if !matches!(run.state, RunState::Failed | RunState::Cancelled) {
                return Err(StoreError::InvalidState(format!(
                    "workflow run {id} is {}: only a failed or cancelled run runs again",
                    run.state.as_str()
                )));
            }
            tx.execute(stmt!(runs, reopen), args![id, now]).await?;
            let run = get_in(&mut tx, id).await?;
            tx.commit().await?;
            Ok(run)
        })
        .await
    }

    async fn run_of_tasks(&self, task_ids: &[i64]) -> Result<Vec<docket_core::sink::TaskRun>> {
        if task_ids.is_empty() {
            return Ok(vec![]);
        }
        let list = serde_json::json!(task_ids);
        self.fetch(stmt!(runs, of_tasks), args![&list])
            .await?
            .iter()
            .map(|r| {
                Ok(docket_core::sink::TaskRun {
                    task_id: r.int("task_id")?,
                    run_id: r.text("id")?,
                    workflow: r.text("workflow")?,
                })
            })
            .collect()
    }

    async fn run_prune(&self, before: Timestamp, limit: i64) -> Result<u64> {
        let ids: Vec<String> = self
            .fetch(stmt!(runs, prune_ids), args![before, limit])
            .await?
            .iter()
            .map(|r| r.text("id"))
            .collect::<Result<_>>()?;
        if ids.is_empty() {
            return Ok(0);
        }
        let ids = &ids;
        again(|| async move {
            let mut tx = self.begin_keyed().await?;
            for id in ids {
                tx.execute(stmt!(runs, prune_entries), args![id]).await?;
                tx.execute(stmt!(runs, prune_events), args![id]).await?;
                tx.execute(stmt!(runs, prune_run), args![id]).await?;
            }
            tx.commit().await?;
            Ok(ids.len() as u64)
        })
        .await
    }
}
