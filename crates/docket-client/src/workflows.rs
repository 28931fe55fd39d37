//! Workflows.

use crate::{Client, Result};

impl Client {
    /// `POST /v1/workflows`: tasks with dependencies, in one transaction.
    ///
    /// # Errors
    /// `invalid_request` (a cycle, an unknown or duplicate ref, …), `invalid_task`, transport
    /// errors.
    pub async fn workflow_create(
        &self,
        w: &docket_core::workflow::NewWorkflow,
    ) -> Result<docket_core::workflow::WorkflowCreated> {
        self.send(self.http.post(self.url("/v1/workflows")).json(w))
            .await
    }

    /// `GET /v1/workflows/{id}`.
    ///
    /// # Errors
    /// `not_found`, transport errors.
    pub async fn workflow_get(&self, id: i64) -> Result<docket_core::workflow::Workflow> {
        self.send(self.http.get(self.url(&format!("/v1/workflows/{id}"))))
            .await
    }

    /// `POST /v1/workflows/{id}/cancel`.
    ///
    /// # Errors
    /// `not_found`, transport errors.
    pub async fn workflow_cancel(&self, id: i64) -> Result<docket_core::workflow::Workflow> {
        self.send(
            self.http
                .post(self.url(&format!("/v1/workflows/{id}/cancel"))),
        )
        .await
    }

    /// `POST /v1/workflows/{id}/retry`: failed tasks run again, what they cancelled after them.
    ///
    /// # Errors
    /// `not_found`, transport errors.
    pub async fn workflow_retry(&self, id: i64) -> Result<docket_core::workflow::Workflow> {
        self.send(
            self.http
                .post(self.url(&format!("/v1/workflows/{id}/retry"))),
        )
        .await
    }

    /// `POST /v1/workflows/{id}/tasks`: tasks (and sub-workflows) added at run time.
    ///
    /// # Errors
    /// `invalid_request` (a cycle, an unknown ref, a ref the workflow has), `conflict` (settled),
    /// `not_found`, `invalid_task`, transport errors.
    pub async fn workflow_add(
        &self,
        id: i64,
        add: &docket_core::workflow::WorkflowAddition,
    ) -> Result<docket_core::workflow::WorkflowCreated> {
        self.send(
            self.http
                .post(self.url(&format!("/v1/workflows/{id}/tasks")))
                .json(add),
        )
        .await
    }
}
