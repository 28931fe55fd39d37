//! What the maintenance services run, written once over [`Driver`](crate::driver::Driver):
//! each step's transaction, the kept counts, the wake-ups; the batch a step changes is chosen
//! by [`MaintenanceDriver`] where the databases differ.

use super::counts::{counts_forget, counts_lock, pruned_rows};
use super::leases::apply_failures;
use super::prelude::*;

#[async_trait]
impl<D: Driver + MaintenanceDriver> MaintenanceStore for D {
    async fn task_promote(&self, p: TaskPromoteParams) -> Result<Promoted> {
        let TaskPromoteParams { now, limit } = p;
        again(|| async move {
            let mut tx = self.begin().await?;
            let mut queues = self.promote_in(&mut tx, now, limit).await?;
            let count = queues.len() as u64;
            queues.sort();
            queues.dedup();
            tx.wake(&queues).await?;
            tx.commit().await?;
            Ok(Promoted { count, queues })
        })
        .await
    }

    async fn task_rescue_list(&self, p: TaskRescueListParams) -> Result<Vec<Task>> {
        let rows = self
            .fetch(stmt!(maintenance, rescue_list), args![p.now, p.limit])
            .await?;
        rows.iter().map(row::task).collect()
    }

    async fn task_rescue_many(&self, p: TaskRescueManyParams) -> Result<Vec<TaskLabels>> {
        let p = &p;
        again(|| async move {
            let mut tx = self.begin().await?;
            let done = apply_failures(&mut tx, &p.items, Some(p.now)).await?;
            let rescued: Vec<&Failure> = p.items.iter().filter(|f| done.contains(&f.id)).collect();
            // A failed attempt frees its key's and queue's slot.
            let queues: Vec<String> = rescued.iter().map(|f| f.labels.queue.clone()).collect();
            tx.wake(&queues).await?;
            tx.commit().await?;
            Ok(rescued.into_iter().map(|f| f.labels.clone()).collect())
        })
        .await
    }

    async fn task_expire(&self, p: TaskExpireParams) -> Result<u64> {
        let TaskExpireParams { now, limit } = p;
        again(|| async move {
            let mut tx = self.begin().await?;
            let n = self.expire_in(&mut tx, now, limit).await?;
            tx.commit().await?;
            Ok(n)
        })
        .await
    }

    async fn task_prune(&self, p: TaskPruneParams) -> Result<u64> {
        let p = &p;
        again(|| async move {
            // One small batch: it never holds many rows locked. Under the kept counts' lock,
            // so what it subtracts from them matches what they counted (docket_core::counts).
            let mut tx = self.begin().await?;
            let counted_to = counts_lock(&mut tx).await?;
            let rows = self.prune_in(&mut tx, p).await?;
            counts_forget(&mut tx, counted_to, &rows).await?;
            tx.commit().await?;
            Ok(rows.len() as u64)
        })
        .await
    }

    async fn aux_prune(&self, p: AuxPruneParams) -> Result<AuxPruned> {
        let cut = |d: std::time::Duration| docket_core::time::sub(p.now, d);
        let notifications = self
            .execute(
                stmt!(maintenance, prune_notifications),
                args![cut(p.notifications), p.limit],
            )
            .await?;
        let audit = self
            .execute(
                stmt!(maintenance, prune_audit),
                args![cut(p.audit), p.limit],
            )
            .await?;
        let nodes = self
            .execute(stmt!(maintenance, prune_nodes), args![cut(p.nodes)])
            .await?;
        // Workers leave with the nodes' retention: a report that old is of a worker gone.
        let workers = self
            .execute(stmt!(maintenance, prune_workers), args![cut(p.nodes)])
            .await?;
        let task_events = self
            .execute(
                stmt!(maintenance, prune_task_events),
                args![cut(p.notifications), p.limit],
            )
            .await?;
        Ok(AuxPruned {
            workers,
            notifications,
            audit,
            nodes,
            task_events,
        })
    }

    async fn task_rotate(&self, p: TaskRotateParams) -> Result<Rotation> {
        MaintenanceDriver::task_rotate(self, p).await
    }
}

/// [`MaintenanceDriver::promote_in`] as one statement `s` (PostgreSQL, SQLite): an `UPDATE … WHERE
/// id IN (SELECT … LIMIT ?2) RETURNING queue` of the tasks due at `now`.
///
/// # Errors
/// The database failed.
pub(crate) async fn promote_returning<T: DriverTx>(
    tx: &mut T,
    s: crate::driver::StmtName,
    now: Timestamp,
    limit: i64,
) -> Result<Vec<String>> {
    let rows = tx.fetch(s, args![now, limit]).await?;
    rows.iter().map(|r| r.text("queue")).collect()
}

/// [`MaintenanceDriver::prune_in`] as one statement `s` (PostgreSQL, SQLite): a `DELETE … WHERE
/// id IN (SELECT … LIMIT ?4) RETURNING queue, state, finished_at`. Queues with their own
/// retention are pruned by their own cutoffs, the rest by the defaults (`?2`, `?3`, in ms).
///
/// # Errors
/// The database failed.
pub(crate) async fn prune_returning<T: DriverTx>(
    tx: &mut T,
    s: crate::driver::StmtName,
    p: &TaskPruneParams,
) -> Result<Vec<(String, TaskState, Option<Timestamp>)>> {
    let ms = docket_core::duration::to_ms;
    let (completed, failed) = (ms(p.retention_completed), ms(p.retention_failed));
    let rows = tx
        .fetch(s, args![p.now, completed, failed, p.limit])
        .await?;
    pruned_rows(&rows)
}
