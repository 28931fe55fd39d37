//! API tokens, written once over [`Driver`](crate::driver::Driver).

use super::prelude::*;

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
