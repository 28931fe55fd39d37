//! PostgreSQL: the audit log of operator actions.

use super::*;

#[async_trait]
impl AuditStore for PgStore {
    async fn audit_add(&self, p: AuditAddParams<'_>) -> Result<()> {
        let AuditAddParams {
            actor,
            action,
            target,
            detail,
            now,
        } = p;
        sqlx::query(
            "INSERT INTO docket_audit (at, actor, action, target, detail) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(now)
        .bind(actor)
        .bind(action)
        .bind(target)
        .bind(detail)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn audit_list(&self, limit: i64) -> Result<Vec<AuditEntry>> {
        let rows: Vec<(i64, Timestamp, String, String, String, Option<Value>)> = sqlx::query_as(
            "SELECT id, at, actor, action, target, detail FROM docket_audit ORDER BY id DESC LIMIT $1",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(id, at, actor, action, target, detail)| AuditEntry {
                id,
                at,
                actor,
                action,
                target,
                detail,
            })
            .collect())
    }
}
