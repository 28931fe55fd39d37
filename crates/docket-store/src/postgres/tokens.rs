//! PostgreSQL: aPI tokens (only hashes are stored).

use super::*;

#[async_trait]
impl TokenStore for PgStore {
    async fn token_create(&self, p: TokenCreate) -> Result<TokenRecord> {
        let row = sqlx::query(sql!(tokens, create))
            .bind(&p.name)
            .bind(&p.hash)
            .bind(serde_json::to_value(&p.scopes).expect("scopes serialise"))
            .bind(serde_json::to_value(&p.queues).expect("queues serialise"))
            .bind(p.now)
            .bind(p.expires_at)
            .fetch_one(&self.pool)
            .await?;
        decode_token(&row)
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
            "UPDATE docket_tokens SET revoked_at = $2 WHERE name = $1 AND revoked_at IS NULL",
        )
        .bind(&p.name)
        .bind(p.now)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected() > 0)
    }

    async fn token_touch(&self, p: TokenTouch) -> Result<()> {
        sqlx::query("UPDATE docket_tokens SET last_used_at = $2 WHERE id = $1")
            .bind(p.id)
            .bind(p.now)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
