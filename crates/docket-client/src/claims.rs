//! Claims and the leases they hand out: claim, release, heartbeat, complete, fail.

use crate::{Client, Result};
use docket_core::api::{
    BatchRequest, BatchResponse, ClaimRequest, ClaimResponse, CompleteRequest, FailRequest,
    Finished, HeartbeatRequest, ItemOutcome,
};
use docket_core::Task;
use serde_json::Value;
use std::time::Duration;

impl Client {
    /// `POST /v1/queues/{queue}/claim`: up to `limit` tasks (of `kinds` only, when not empty),
    /// long-polling up to `wait`.
    ///
    /// # Errors
    /// API and transport errors.
    pub async fn claim(
        &self,
        queue: &str,
        worker: &str,
        kinds: &[String],
        limit: usize,
        lease: Duration,
        wait: Duration,
    ) -> Result<Vec<Task>> {
        self.claim_stages(queue, worker, kinds, &[], limit, lease, wait)
            .await
    }

    /// [`Client::claim`] of only the tasks at one of `stages` (empty: any stage; asyncflow's
    /// task_stage).
    ///
    /// # Errors
    /// `unauthenticated`, `forbidden`, `invalid_request`, transport errors.
    #[allow(clippy::too_many_arguments)]
    pub async fn claim_stages(
        &self,
        queue: &str,
        worker: &str,
        kinds: &[String],
        stages: &[String],
        limit: usize,
        lease: Duration,
        wait: Duration,
    ) -> Result<Vec<Task>> {
        let body = ClaimRequest {
            kinds: (!kinds.is_empty()).then(|| kinds.to_vec()),
            stages: (!stages.is_empty()).then(|| stages.to_vec()),
            worker: worker.to_string(),
            limit: Some(i64::try_from(limit).unwrap_or(i64::MAX)),
            lease: Some(lease),
            wait: Some(wait),
            ..ClaimRequest::default()
        };
        self.claim_with(queue, &body).await
    }

    /// `POST /v1/queues/{queue}/claim` with the whole request; give it a `claim_id` (a random
    /// UUID) to be able to [`Client::release_claim`] it should its answer never arrive. The
    /// full tasks: a claim with `lean` tasks or reports answers in [`Client::claim_answer`].
    ///
    /// # Errors
    /// `unauthenticated`, `forbidden`, `invalid_request`, transport errors.
    pub async fn claim_with(&self, queue: &str, body: &ClaimRequest) -> Result<Vec<Task>> {
        Ok(self.claim_answer(queue, body).await?.tasks)
    }

    /// `POST /v1/queues/{queue}/claim`, the whole answer: what a claim with `lean` tasks or
    /// with reports (`complete`, `fail`: what finished, recorded before the claim looks) needs.
    ///
    /// # Errors
    /// `unauthenticated`, `forbidden`, `invalid_request` (then no report was recorded either),
    /// transport errors.
    pub async fn claim_answer(&self, queue: &str, body: &ClaimRequest) -> Result<ClaimResponse> {
        let wait = body.wait.unwrap_or_default();
        self.send(
            self.http
                .post(self.url(&format!("/v1/queues/{}/claim", Self::seg(queue))))
                .timeout(wait + Duration::from_secs(30))
                .json(body),
        )
        .await
    }

    /// `POST /v1/queues/{queue}/claims/{claim_id}/release`: hands back what a claim sent with
    /// `claim_id` took (its answer never arrived): available at once, no attempt counted. The
    /// ids handed back.
    ///
    /// # Errors
    /// `invalid_request` (not a UUID), `forbidden`, transport errors.
    pub async fn release_claim(&self, queue: &str, claim_id: &str) -> Result<Vec<i64>> {
        let r: docket_core::api::ClaimReleased = self
            .send(self.http.post(self.url(&format!(
                "/v1/queues/{}/claims/{}/release",
                Self::seg(queue),
                Self::seg(claim_id)
            ))))
            .await?;
        Ok(r.released)
    }

    /// `POST /v1/tasks/release`: hands back tasks held but not started, `(id, lease)` pairs;
    /// one outcome per item (`ok` or `lease_lost`).
    ///
    /// # Errors
    /// `invalid_request`, transport errors.
    pub async fn release_many(&self, items: &[(i64, String)]) -> Result<Vec<ItemOutcome>> {
        let body = BatchRequest {
            items: items
                .iter()
                .map(|(id, lease)| docket_core::api::ReleaseItem {
                    id: *id,
                    lease: lease.clone(),
                })
                .collect(),
        };
        let r: BatchResponse = self
            .send(self.http.post(self.url("/v1/tasks/release")).json(&body))
            .await?;
        Ok(r.results)
    }

    /// `POST /v1/tasks/{id}/heartbeat`.
    ///
    /// # Errors
    /// `lease_lost`, `cancelled`, transport errors.
    pub async fn heartbeat(&self, id: i64, lease: &str, progress: Option<Value>) -> Result<Task> {
        let body = HeartbeatRequest {
            lease: lease.to_string(),
            progress,
            extend: None,
        };
        self.send(
            self.http
                .post(self.url(&format!("/v1/tasks/{id}/heartbeat")))
                .json(&body),
        )
        .await
    }

    /// `POST /v1/tasks/{id}/complete`.
    ///
    /// # Errors
    /// `lease_lost`, `cancelled`, transport errors.
    pub async fn complete(&self, id: i64, lease: &str, result: Value) -> Result<Finished> {
        let body = CompleteRequest {
            id: None,
            lease: lease.to_string(),
            result,
            ..Default::default()
        };
        self.complete_with(id, &body).await
    }

    /// `POST /v1/tasks/{id}/complete` with every field, e.g. `next_stage` to hand the task on
    /// to its next stage.
    ///
    /// # Errors
    /// `lease_lost`, `cancelled`, `invalid_request`, transport errors.
    pub async fn complete_with(&self, id: i64, body: &CompleteRequest) -> Result<Finished> {
        self.send(
            self.http
                .post(self.url(&format!("/v1/tasks/{id}/complete")))
                .json(&body),
        )
        .await
    }

    /// `POST /v1/tasks/complete`: many completions in one statement. Items: (id, lease,
    /// result). Returns the per-item results.
    ///
    /// # Errors
    /// API and transport errors.
    pub async fn complete_many(&self, items: &[(i64, String, Value)]) -> Result<Vec<ItemOutcome>> {
        let body = BatchRequest {
            items: items
                .iter()
                .map(|(id, lease, result)| CompleteRequest {
                    id: Some(*id),
                    lease: lease.clone(),
                    result: result.clone(),
                    ..Default::default()
                })
                .collect(),
        };
        let r: BatchResponse = self
            .send(self.http.post(self.url("/v1/tasks/complete")).json(&body))
            .await?;
        Ok(r.results)
    }

    /// `POST /v1/tasks/{id}/fail`.
    ///
    /// # Errors
    /// `lease_lost`, `cancelled`, transport errors.
    pub async fn fail(
        &self,
        id: i64,
        lease: &str,
        error: &str,
        worker: &str,
        retry_in: Option<Duration>,
        permanent: bool,
    ) -> Result<Finished> {
        let body = FailRequest {
            id: None,
            lease: lease.to_string(),
            error: error.to_string(),
            retry_in,
            permanent,
            worker: Some(worker.to_string()),
        };
        self.send(
            self.http
                .post(self.url(&format!("/v1/tasks/{id}/fail")))
                .json(&body),
        )
        .await
    }
}
