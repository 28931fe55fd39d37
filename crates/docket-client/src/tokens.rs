//! API tokens.

use crate::{Client, Result};
use serde_json::Value;

impl Client {
    /// `POST /v1/tokens` (needs `admin`): the new token, shown this once.
    ///
    /// # Errors
    /// `invalid_request`, `conflict` (a live token has the name), `forbidden`, transport errors.
    pub async fn token_create(
        &self,
        req: &docket_core::api::TokenCreateRequest,
    ) -> Result<docket_core::api::TokenCreated> {
        self.send(self.http.post(self.url("/v1/tokens")).json(req))
            .await
    }

    /// `GET /v1/tokens` (needs `admin`): every token, revoked ones included, never the secrets.
    ///
    /// # Errors
    /// `forbidden`, transport errors.
    pub async fn token_list(&self) -> Result<docket_core::api::TokenList> {
        self.send(self.http.get(self.url("/v1/tokens"))).await
    }

    /// `DELETE /v1/tokens/{name}` (needs `admin`): stops working at once on every node.
    ///
    /// # Errors
    /// `not_found` (no live token has the name), `forbidden`, transport errors.
    pub async fn token_revoke(&self, name: &str) -> Result<()> {
        let _: Value = self
            .send(
                self.http
                    .delete(self.url(&format!("/v1/tokens/{}", Self::seg(name)))),
            )
            .await?;
        Ok(())
    }
}
