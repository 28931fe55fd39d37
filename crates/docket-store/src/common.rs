//! Store methods whose flow is the same on every backend, written once over [`Driver`]: the
//! backends differ only in their statements' text and in how a value is bound.

use crate::driver::{again, args, stmt, Driver, DriverTx, Listen};
use crate::row;
use crate::row::Cols;
use crate::*;
use async_trait::async_trait;
use docket_core::api::AuditEntry;
use docket_core::process::Notification;

#[async_trait]
impl<D: Driver> AuditStore for D {
    async fn audit_add(&self, p: AuditAddParams<'_>) -> Result<()> {
        self.execute(
            stmt!(audit, add),
            args![p.now, p.actor, p.action, p.target, p.detail.as_ref()],
        )
        .await?;
        Ok(())
    }

    async fn audit_list(&self, limit: i64) -> Result<Vec<AuditEntry>> {
        let rows = self.fetch(stmt!(audit, list), args![limit]).await?;
        rows.iter().map(row::audit).collect()
    }
}

#[async_trait]
impl<D: Driver> TokenStore for D {
    async fn token_create(&self, p: TokenCreate) -> Result<TokenRecord> {
        let scopes = serde_json::to_value(&p.scopes).expect("scopes serialise");
        let queues = serde_json::to_value(&p.queues).expect("queues serialise");
        self.execute(
            stmt!(tokens, create),
            args![&p.name, &p.hash, &scopes, &queues, p.now, p.expires_at],
        )
        .await?;
        // The hash is unique: the row just written.
        self.token_by_hash(&p.hash)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("token {}", p.name)))
    }

    async fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRecord>> {
        let row = self.fetch_one(stmt!(tokens, by_hash), args![hash]).await?;
        row.as_ref().map(row::token).transpose()
    }

    async fn token_list(&self) -> Result<Vec<TokenRecord>> {
        let rows = self.fetch(stmt!(tokens, list), args![]).await?;
        rows.iter().map(row::token).collect()
    }

    async fn token_revoke(&self, p: TokenRevoke) -> Result<bool> {
        let n = self
            .execute(stmt!(tokens, revoke), args![&p.name, p.now])
            .await?;
        Ok(n > 0)
    }

    async fn token_touch(&self, p: TokenTouch) -> Result<()> {
        self.execute(stmt!(tokens, touch), args![p.id, p.now])
            .await?;
        Ok(())
    }
}

#[async_trait]
impl<D: Driver> NodeStore for D {
    async fn node_heartbeat(&self, n: &NodeRecord) -> Result<()> {
        self.execute(
            stmt!(nodes, heartbeat),
            args![&n.name, n.started_at, n.heartbeat_at, &n.version, &n.info],
        )
        .await?;
        Ok(())
    }

    async fn node_stop(&self, p: NodeStopParams<'_>) -> Result<()> {
        self.execute(stmt!(nodes, stop), args![p.name, p.now])
            .await?;
        Ok(())
    }

    async fn node_list(&self) -> Result<Vec<NodeRecord>> {
        let rows = self.fetch(stmt!(nodes, list), args![]).await?;
        rows.iter().map(row::node).collect()
    }

    async fn node_drain(&self, p: NodeDrainParams<'_>) -> Result<Option<u64>> {
        again(|| async {
            let mut tx = self.begin().await?;
            let found = tx
                .execute(stmt!(nodes, drain), args![p.name, p.drain, p.now])
                .await?;
            if found == 0 {
                return Ok(None);
            }
            let mut moved = 0;
            if p.drain {
                let queues = tx
                    .fetch(stmt!(nodes, pinned_queues), args![p.name])
                    .await?
                    .iter()
                    .map(|r| r.text("queue"))
                    .collect::<Result<Vec<_>>>()?;
                moved = tx
                    .execute(stmt!(nodes, hand_over_tasks), args![p.name, p.to])
                    .await?;
                // Claimers of these queues look again: the tasks may run elsewhere now.
                tx.wake(&queues).await?;
            }
            tx.commit().await?;
            Ok(Some(moved))
        })
        .await
    }

    async fn worker_report(&self, p: WorkerReportParams<'_>) -> Result<()> {
        self.execute(
            stmt!(nodes, worker_report),
            args![p.name, p.report, p.now, p.interval_ms],
        )
        .await?;
        Ok(())
    }

    async fn worker_list(&self) -> Result<Vec<WorkerRecord>> {
        let rows = self.fetch(stmt!(nodes, worker_list), args![]).await?;
        rows.iter().map(row::worker).collect()
    }
}

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

#[async_trait]
impl<D: Driver> ScheduleStore for D {
    async fn schedule_put(&self, p: SchedulePutParams<'_>) -> Result<Schedule> {
        let spec = serde_json::to_value(p.spec).expect("a schedule serialises");
        self.execute(
            stmt!(schedules, put),
            args![&p.spec.name, &spec, p.next_run_at, p.now],
        )
        .await?;
        self.schedule_get(&p.spec.name)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("schedule {}", p.spec.name)))
    }

    async fn schedule_get(&self, name: &str) -> Result<Option<Schedule>> {
        let row = self.fetch_one(stmt!(schedules, get), args![name]).await?;
        row.as_ref().map(row::schedule).transpose()
    }

    async fn schedule_list(&self) -> Result<Vec<Schedule>> {
        let rows = self.fetch(stmt!(schedules, list), args![]).await?;
        rows.iter().map(row::schedule).collect()
    }

    async fn schedule_delete(&self, name: &str) -> Result<bool> {
        Ok(self.execute(stmt!(schedules, delete), args![name]).await? == 1)
    }

    async fn schedule_pause(&self, p: SchedulePauseParams<'_>) -> Result<Option<Schedule>> {
        let n = self
            .execute(
                stmt!(schedules, pause),
                args![p.name, p.paused, p.next_run_at, p.now],
            )
            .await?;
        if n == 0 {
            return Ok(None);
        }
        self.schedule_get(p.name).await
    }

    async fn schedule_due(&self, p: ScheduleDueParams) -> Result<Vec<Schedule>> {
        let rows = self
            .fetch(stmt!(schedules, due), args![p.now, p.limit])
            .await?;
        rows.iter().map(row::schedule).collect()
    }

    async fn schedule_next_due(&self) -> Result<Option<Timestamp>> {
        let row = self.fetch_one(stmt!(schedules, next_due), args![]).await?;
        Ok(row.map(|r| r.time_opt("t")).transpose()?.flatten())
    }

    async fn schedule_fire(&self, p: ScheduleFireParams) -> Result<ScheduleFired> {
        again(|| async {
            let mut tx = self.begin().await?;
            // Moving next_run_at from this occurrence is the claim (see sql/schedules.sql).
            let moved = tx
                .execute(
                    stmt!(schedules, fire),
                    args![&p.name, p.occurrence, p.next_run_at, p.now],
                )
                .await?;
            if moved == 0 {
                return Ok(ScheduleFired::NotDue);
            }
            let task = tx.insert_task(&p.task, p.now).await?;
            if let Some(t) = &task {
                tx.execute(stmt!(schedules, last_task), args![&p.name, t.id])
                    .await?;
            }
            tx.commit().await?;
            Ok(task.map_or(ScheduleFired::KeyHeld, |t| {
                ScheduleFired::Enqueued(Box::new(t))
            }))
        })
        .await
    }

    async fn schedule_defer(&self, p: ScheduleDeferParams<'_>) -> Result<bool> {
        let n = self
            .execute(
                stmt!(schedules, defer),
                args![p.name, p.occurrence, p.next_run_at, p.now],
            )
            .await?;
        Ok(n == 1)
    }
}
