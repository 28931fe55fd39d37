//! SQLite: the maintenance steps whose batch is chosen per backend
//! ([`crate::driver::MaintenanceDriver`]).

use super::*;
use crate::driver::{args, stmt, DriverTx};
use crate::{Rotation, TaskPruneParams, TaskRotateParams};

#[async_trait]
impl crate::driver::MaintenanceDriver for SqliteStore {
    async fn promote_in(
        &self,
        tx: &mut SqliteTx,
        now: Timestamp,
        limit: i64,
    ) -> Result<Vec<String>> {
        crate::portable::promote_returning(tx, stmt!(maintenance, promote), now, limit).await
    }

    async fn expire_in(&self, tx: &mut SqliteTx, now: Timestamp, limit: i64) -> Result<u64> {
        // The error's time as the API writes it (RFC 3339, µs): SQLite keeps times as µs.
        let at = now.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        tx.execute(stmt!(maintenance, expire), args![now, &at, limit])
            .await
    }

    async fn prune_in(
        &self,
        tx: &mut SqliteTx,
        p: &TaskPruneParams,
    ) -> Result<Vec<(String, TaskState, Option<Timestamp>)>> {
        // The write transaction also holds the kept counts still (docket_core::counts).
        crate::portable::prune_returning(tx, stmt!(maintenance, prune), p).await
    }

    async fn task_rotate(&self, _p: TaskRotateParams) -> Result<Rotation> {
        // One table here: the ring of slots is PostgreSQL's (migration 0021).
        Ok(Rotation::Unsupported)
    }
}
