//! Batches.

use crate::{Client, Result};

impl Client {
    /// `POST /v1/batches`: a batch, its tasks and callbacks, in one transaction.
    ///
    /// # Errors
    /// `invalid_request`, `invalid_task`, `payload_too_large`, transport errors.
    pub async fn batch_create(
        &self,
        b: &docket_core::batch::NewBatch,
    ) -> Result<docket_core::batch::BatchCreated> {
        self.send(self.http.post(self.url("/v1/batches")).json(b))
            .await
    }

    /// `POST /v1/batches/{id}/tasks`: adds tasks to a batch that has not settled (and seals it
    /// with `seal`).
    ///
    /// # Errors
    /// `not_found`, `conflict` (it settled), `invalid_task`, transport errors.
    pub async fn batch_add(
        &self,
        id: i64,
        add: &docket_core::batch::BatchAdd,
    ) -> Result<docket_core::batch::BatchCreated> {
        self.send(
            self.http
                .post(self.url(&format!("/v1/batches/{id}/tasks")))
                .json(add),
        )
        .await
    }

    /// `POST /v1/batches/{id}/seal`.
    ///
    /// # Errors
    /// `not_found`, `conflict` (it settled), transport errors.
    pub async fn batch_seal(&self, id: i64) -> Result<docket_core::batch::Batch> {
        self.send(self.http.post(self.url(&format!("/v1/batches/{id}/seal"))))
            .await
    }

    /// `GET /v1/batches/{id}`: the batch and its progress.
    ///
    /// # Errors
    /// `not_found`, transport errors.
    pub async fn batch_get(&self, id: i64) -> Result<docket_core::batch::Batch> {
        self.send(self.http.get(self.url(&format!("/v1/batches/{id}"))))
            .await
    }

    /// `GET /v1/batches`: newest first, ids below `before`.
    ///
    /// # Errors
    /// `invalid_request`, transport errors.
    pub async fn batch_list(
        &self,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<docket_core::batch::Batch>> {
        let mut q = vec![("limit", limit.to_string())];
        if let Some(b) = before {
            q.push(("before", b.to_string()));
        }
        let l: docket_core::batch::BatchList = self
            .send(self.http.get(self.url("/v1/batches")).query(&q))
            .await?;
        Ok(l.batches)
    }
}
