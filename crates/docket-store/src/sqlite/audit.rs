//! SQLite: the audit log of operator actions.

use super::*;

#[async_trait]
impl AuditStore for SqliteStore {
    async fn audit_add(&self, p: AuditAddParams<'_>) -> Result<()> {
        let AuditAddParams {
            actor,
            action,
            target,
            detail,
            now,
        } = p;
        let mut tx = self.begin().await?;
        sqlx::query(
            "INSERT INTO docket_audit (at, actor, action, target, detail) VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .bind(us(now))
        .bind(actor)
        .bind(action)
        .bind(target)
        .bind(detail.map(|d| d.to_string()))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn audit_list(&self, limit: i64) -> Result<Vec<AuditEntry>> {
        let rows: Vec<(i64, i64, String, String, String, Option<String>)> = sqlx::query_as(
            "SELECT id, at, actor, action, target, detail FROM docket_audit ORDER BY id DESC LIMIT ?1",
        )
        .bind(limit)
        .fetch_all(&self.reader)
        .await?;
        rows.into_iter()
            .map(|(id, at, actor, action, target, detail)| {
                let row = format!("audit entry {id}");
                Ok(AuditEntry {
                    id,
                    at: decode::micros(&row, "at", at)?,
                    actor,
                    action,
                    target,
                    detail: detail
                        .map(|d| {
                            serde_json::from_str(&d).map_err(|e| {
                                StoreError::Corrupt(format!("{row}: column detail: {e}"))
                            })
                        })
                        .transpose()?,
                })
            })
            .collect()
    }
}
