//! Durable functions' runs (issue 41): start, read, list, wait for a result, send an event,
//! cancel, retry. (The calls a worker makes under a run's lease are the clients' durable
//! workers'; see docs/src/concepts/durable-functions.md.)

use crate::{Client, Result};
use docket_core::durable::{
    EntryList, EventRequest, EventSent, RunList, RunListParams, StartRequest, Started, WorkflowRun,
};

impl Client {
    fn run_url(&self, id: &str, tail: &str) -> String {
        self.url(&format!("/v1/workflow-runs/{}{tail}", Self::seg(id)))
    }

    /// `POST /v1/workflow-runs`: starts a run (idempotent by id: `created` false answers the
    /// run started before).
    ///
    /// # Errors
    /// `invalid_request`, `conflict` (the id is a run of another workflow), transport errors.
    pub async fn run_start(&self, r: &StartRequest) -> Result<Started> {
        self.send(self.http.post(self.url("/v1/workflow-runs")).json(r))
            .await
    }

    /// `GET /v1/workflow-runs/{id}`.
    ///
    /// # Errors
    /// `not_found`, transport errors.
    pub async fn run_get(&self, id: &str) -> Result<WorkflowRun> {
        self.send(self.http.get(self.run_url(id, ""))).await
    }

    /// `GET /v1/workflow-runs/{id}/steps`: the run's journal.
    ///
    /// # Errors
    /// `not_found`, transport errors.
    pub async fn run_steps(&self, id: &str) -> Result<EntryList> {
        self.send(self.http.get(self.run_url(id, "/steps"))).await
    }

    /// `GET /v1/workflow-runs/{id}/result?wait=…`: the run once finished or when `wait` ran
    /// out (≤ 60 s).
    ///
    /// # Errors
    /// `not_found`, transport errors.
    pub async fn run_result(&self, id: &str, wait: std::time::Duration) -> Result<WorkflowRun> {
        let wait = docket_core::duration::format(wait);
        self.send(
            self.http
                .get(self.run_url(id, "/result"))
                .query(&[("wait", wait)])
                .timeout(std::time::Duration::from_secs(90)),
        )
        .await
    }

    /// `GET /v1/workflow-runs`: runs, newest first.
    ///
    /// # Errors
    /// `invalid_request`, transport errors.
    pub async fn run_list(&self, p: &RunListParams) -> Result<RunList> {
        self.send(self.http.get(self.url("/v1/workflow-runs")).query(p))
            .await
    }

    /// `POST /v1/workflow-runs/{id}/events`.
    ///
    /// # Errors
    /// `not_found`, `invalid_state` (the run finished), `invalid_request`, transport errors.
    pub async fn run_send(&self, id: &str, e: &EventRequest) -> Result<EventSent> {
        self.send(self.http.post(self.run_url(id, "/events")).json(e))
            .await
    }

    /// `POST /v1/workflow-runs/{id}/cancel`.
    ///
    /// # Errors
    /// `not_found`, transport errors.
    pub async fn run_cancel(&self, id: &str) -> Result<WorkflowRun> {
        self.send(self.http.post(self.run_url(id, "/cancel"))).await
    }

    /// `POST /v1/workflow-runs/{id}/retry`.
    ///
    /// # Errors
    /// `not_found`, `invalid_state` (not failed or cancelled), transport errors.
    pub async fn run_retry(&self, id: &str) -> Result<WorkflowRun> {
        self.send(self.http.post(self.run_url(id, "/retry"))).await
    }
}
