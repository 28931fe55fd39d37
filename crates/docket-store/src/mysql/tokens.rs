//! MySQL: API tokens (only hashes are stored).

use super::*;

#[async_trait]
impl TokenStore for MySqlStore {
    async fn token_create(&self, p: TokenCreate) -> Result<TokenRecord> {
        let mut tx = self.begin().await?;
        let id = sqlx::query(sql!(tokens, create))
            .bind(&p.name)
            .bind(&p.hash)
            .bind(serde_json::to_string(&p.scopes).expect("scopes serialise"))
            .bind(serde_json::to_string(&p.queues).expect("queues serialise"))
            .bind(dt(p.now))
            .bind(dt(p.expires_at))
            .execute(&mut *tx)
            .await?
            .last_insert_id();
        let row = sqlx::query(sql!(tokens, get))
            .bind(id as i64)
            .fetch_one(&mut *tx)
            .await?;
        let t = decode_token(&row)?;
        tx.commit().await?;
        Ok(t)
    }

    async fn token_by_hash(&self, hash: &str) -> Result<Option<TokenRecord>> {
        let row = sqlx::query(sql!(tokens, by_hash))
            .bind(hash)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(decode_token).transpose()
    }

    async fn token_list(&self) -> Result<Vec<TokenRecord>> {
        let rows = sqlx::query(sql!(tokens, list))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(decode_token).collect()
    }

    async fn token_revoke(&self, p: TokenRevoke) -> Result<bool> {
        let r = sqlx::query(
            "UPDATE docket_tokens SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL",
        )
        .bind(dt(p.now))
        .bind(&p.name)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected() > 0)
    }

    async fn token_touch(&self, p: TokenTouch) -> Result<()> {
        sqlx::query("UPDATE docket_tokens SET last_used_at = ? WHERE id = ?")
            .bind(dt(p.now))
            .bind(p.id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
