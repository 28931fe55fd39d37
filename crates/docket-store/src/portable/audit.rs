//! The audit log, written once over [`Driver`](crate::driver::Driver).

use super::prelude::*;

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
