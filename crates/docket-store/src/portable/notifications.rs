//! Process notifications, task events and sink cursors, written once over [`Driver`](crate::driver::Driver).

use super::prelude::*;

#[async_trait]
impl<D: Driver + Listen> NotificationStore for D {
    async fn listen(&self) -> Result<Option<tokio::sync::mpsc::Receiver<Wake>>> {
        Listen::listen(self).await
    }

    async fn notification_list(&self, p: NotificationListParams<'_>) -> Result<Vec<Notification>> {
        let rows = self
            .fetch(
                stmt!(notifications, list),
                args![p.after, p.namespace, p.limit],
            )
            .await?;
        rows.iter().map(row::notification).collect()
    }

    async fn notification_last_seq(&self) -> Result<i64> {
        let row = self
            .fetch_one(stmt!(notifications, last_seq), args![])
            .await?;
        row.map_or(Ok(0), |r| r.int("n"))
    }

    async fn notification_backlog(
        &self,
        p: NotificationBacklogParams<'_>,
    ) -> Result<(i64, Option<Timestamp>)> {
        let row = self
            .fetch_one(
                stmt!(notifications, backlog),
                args![p.namespace, p.after, p.limit],
            )
            .await?;
        match row {
            Some(r) => Ok((r.int("n")?, r.time_opt("oldest")?)),
            None => Ok((0, None)),
        }
    }

    async fn task_events_watch(&self, queues: &[String]) -> Result<()> {
        let list = serde_json::json!(queues);
        self.execute(stmt!(notifications, task_events_watch), args![&list])
            .await?;
        // Each is idempotent (IF NOT EXISTS, or a duplicate ignored): nodes may race here.
        self.execute_text(stmt!(notifications, task_events_arm_insert))
            .await?;
        self.execute_text(stmt!(notifications, task_events_arm_update))
            .await
    }

    async fn task_event_list(&self, p: TaskEventListParams<'_>) -> Result<Vec<TaskTransition>> {
        let rows = self
            .fetch(
                stmt!(notifications, task_event_list),
                args![p.queue, p.limit],
            )
            .await?;
        rows.iter().map(row::task_transition).collect()
    }

    async fn task_event_delete(&self, seqs: &[i64]) -> Result<u64> {
        if seqs.is_empty() {
            return Ok(0);
        }
        let list = serde_json::json!(seqs);
        self.execute(stmt!(notifications, task_event_delete), args![&list])
            .await
    }

    async fn sink_lease(&self, p: SinkLeaseParams<'_>) -> Result<Option<i64>> {
        let mut tx = self.begin().await?;
        tx.execute(stmt!(notifications, sink_ensure), args![p.name])
            .await?;
        let leased = tx
            .execute(
                stmt!(notifications, sink_lease),
                args![p.name, p.owner, p.until, p.now],
            )
            .await?;
        let seq = if leased == 1 {
            let r = tx
                .fetch_one(stmt!(notifications, sink_seq), args![p.name])
                .await?;
            r.map(|r| r.int("seq")).transpose()?
        } else {
            None
        };
        tx.commit().await?;
        Ok(seq)
    }

    async fn sink_advance(&self, p: SinkAdvanceParams<'_>) -> Result<bool> {
        let n = self
            .execute(
                stmt!(notifications, sink_advance),
                args![p.name, p.owner, p.seq],
            )
            .await?;
        Ok(n == 1)
    }
}
