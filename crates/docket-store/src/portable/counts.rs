//! The kept counts (`docket_core::counts`): their lock, what a delete or retry subtracts, the live read, written once over [`Driver`](crate::driver::Driver).

use super::prelude::*;

/// Takes the kept counts' lock in `tx` ([`docket_core::counts`]) and returns `counted_to`:
/// a prune takes it before deleting, so what it subtracts matches what a step counted.
///
/// # Errors
/// Database failure; [`StoreError::Corrupt`] without the counts' row.
pub(crate) async fn counts_lock<T: DriverTx>(tx: &mut T) -> Result<Timestamp> {
    match tx.fetch_one(stmt!(queues, counts_lock), args![]).await? {
        Some(r) => r.time("counted_to"),
        None => Err(StoreError::Corrupt(
            "docket_counts has no row (migration 0029 / sqlite 0027 / mysql 0011 adds it)".into(),
        )),
    }
}

/// Subtracts from the kept counts, in `tx` after [`counts_lock`], the deleted finished tasks
/// `rows` (queue, state, finished_at) that were counted ([`docket_core::counts::forgotten`]).
///
/// # Errors
/// Database failure.
pub(crate) async fn counts_forget<T: DriverTx>(
    tx: &mut T,
    counted_to: Timestamp,
    rows: &[(String, TaskState, Option<Timestamp>)],
) -> Result<()> {
    let gone = docket_core::counts::forgotten(
        rows.iter().map(|(q, s, t)| (q.as_str(), *s, *t)),
        counted_to,
    );
    for ((queue, state), n) in gone {
        tx.execute(
            stmt!(queues, counts_add),
            args![queue.as_str(), state.as_str(), -n],
        )
        .await?;
    }
    Ok(())
}

/// The kept counts' `counted_to` ([`docket_core::counts`]), read to be bound into a statement
/// (a bound value the planner sizes; a subquery it cannot).
///
/// # Errors
/// Database failure.
pub(crate) async fn counted_to<D: Driver>(d: &D) -> Result<Timestamp> {
    Ok(
        match d.fetch_one(stmt!(queues, counted_to), args![]).await? {
            Some(r) => r.time("counted_to")?,
            None => docket_core::counts::origin(),
        },
    )
}

/// Before a retry makes finished task `id` unfinished, in the retry's transaction: takes the
/// kept counts' lock, locks the task and subtracts it from the counts if they counted it
/// ([`docket_core::counts`]) — so a bulk retry of 48,210 failures leaves the discarded count
/// at 0 at once, not after the next recount. A task not retryable is left alone (the retry
/// then finds nothing and rolls this back with it).
///
/// # Errors
/// Database failure.
pub(crate) async fn counts_before_retry<T: DriverTx>(tx: &mut T, id: i64) -> Result<()> {
    let counted_to = counts_lock(tx).await?;
    let rows = tx.fetch(stmt!(tasks, retry_lock), args![id]).await?;
    counts_forget(tx, counted_to, &pruned_rows(&rows)?).await
}

/// (queue, state, finished_at) of rows a prune's `RETURNING` gave.
pub(crate) fn pruned_rows<R: Cols>(
    rows: &[R],
) -> Result<Vec<(String, TaskState, Option<Timestamp>)>> {
    rows.iter()
        .map(|r| {
            let state = r.text("state")?;
            let state = state
                .parse::<TaskState>()
                .map_err(|_| StoreError::Corrupt(format!("task state {state:?}")))?;
            Ok((r.text("queue")?, state, r.time_opt("finished_at")?))
        })
        .collect()
}

/// Tasks by queue and state, for one queue or all.
pub(super) async fn counts<D: Driver>(
    d: &D,
    queue: Option<&str>,
) -> Result<HashMap<String, std::collections::BTreeMap<TaskState, i64>>> {
    // `counted_to` is read first and bound, so the planner sizes the range of finished tasks
    // past it (a subquery's value it cannot see: PostgreSQL then guessed a third of the table
    // and scanned all 10 million rows, 3 s). The counts statement checks, in its own snapshot,
    // that the kept counts are still at that `counted_to` (else a row `stale`): a step that
    // committed in between would have them count the same tasks twice, so read again.
    for _ in 0..5 {
        let counted_to = counted_to(d).await?;
        let mut out: HashMap<String, _> = HashMap::new();
        let mut stale = false;
        for r in d
            .fetch(stmt!(queues, counts), args![queue, counted_to])
            .await?
        {
            let state = r.text("state")?;
            if state == "stale" {
                stale = true;
            } else if let Ok(st) = state.parse::<TaskState>() {
                // Never below zero: a state changed behind the engine's back (plain SQL) is
                // subtracted without having been counted, until the hourly recount.
                out.entry(r.text("queue")?)
                    .or_insert_with(empty_counts)
                    .insert(st, r.int("n")?.max(0));
            }
        }
        if !stale {
            return Ok(out);
        }
    }
    Err(StoreError::Database {
        kind: DbErrorKind::Unavailable,
        message: "the kept counts moved on under five reads in a row".into(),
    })
}
