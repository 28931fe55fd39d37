//! Nodes, workers and drains, written once over [`Driver`](crate::driver::Driver).

use super::prelude::*;

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
