//! MySQL: the audit log of operator actions.

use super::*;

#[async_trait]
impl AuditStore for MySqlStore {
    async fn audit_add(&self, p: AuditAddParams<'_>) -> Result<()> {
        let AuditAddParams {
            actor,
            action,
            target,
            detail,
            now,
        } = p;
        sqlx::query(
            "INSERT INTO docket_audit (at, actor, action, target, detail) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(dt(now))
        .bind(actor)
        .bind(action)
        .bind(target)
        .bind(detail.map(|d| d.to_string()))
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn audit_list(&self, limit: i64) -> Result<Vec<AuditEntry>> {
        let rows = sqlx::query(
            "SELECT id, at, actor, action, target, detail FROM docket_audit ORDER BY id DESC LIMIT ?",
        )
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|r| {
                let id: i64 = r.try_get("id")?;
                Ok(AuditEntry {
                    id,
                    at: time(r, "at")?,
                    actor: text(r, "actor")?,
                    action: text(r, "action")?,
                    target: text(r, "target")?,
                    detail: json_opt(r, "detail").map_err(|e| match e {
                        StoreError::Corrupt(m) => {
                            StoreError::Corrupt(format!("audit entry {id}: {m}"))
                        }
                        e => e,
                    })?,
                })
            })
            .collect()
    }
}
