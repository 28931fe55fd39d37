//! Rate limits.

use crate::{Client, Result};
use serde_json::Value;

impl Client {
    /// `PUT /v1/rate-limits/{name}` (needs `admin`): creates or replaces a rate limit.
    ///
    /// # Errors
    /// `invalid_request` (a bad name, limit or period), `forbidden`, transport errors.
    pub async fn rate_limit_put(
        &self,
        name: &str,
        spec: &docket_core::rate_limit::RateLimitSpec,
    ) -> Result<docket_core::rate_limit::RateLimit> {
        self.send(
            self.http
                .put(self.url(&format!("/v1/rate-limits/{}", Self::seg(name))))
                .json(spec),
        )
        .await
    }

    /// `GET /v1/rate-limits/{name}`: the limit and its totals.
    ///
    /// # Errors
    /// `not_found`, transport errors.
    pub async fn rate_limit_get(&self, name: &str) -> Result<docket_core::rate_limit::RateLimit> {
        self.send(
            self.http
                .get(self.url(&format!("/v1/rate-limits/{}", Self::seg(name)))),
        )
        .await
    }

    /// `GET /v1/rate-limits`: every limit, by name.
    ///
    /// # Errors
    /// Transport errors.
    pub async fn rate_limit_list(&self) -> Result<Vec<docket_core::rate_limit::RateLimit>> {
        let l: docket_core::rate_limit::RateLimitList = self
            .send(self.http.get(self.url("/v1/rate-limits")))
            .await?;
        Ok(l.rate_limits)
    }

    /// `DELETE /v1/rate-limits/{name}` (needs `admin`): its tasks run unlimited.
    ///
    /// # Errors
    /// `not_found`, `forbidden`, transport errors.
    pub async fn rate_limit_delete(&self, name: &str) -> Result<()> {
        let _: Value = self
            .send(
                self.http
                    .delete(self.url(&format!("/v1/rate-limits/{}", Self::seg(name)))),
            )
            .await?;
        Ok(())
    }
}
