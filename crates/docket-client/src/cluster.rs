//! The workers reporting to the cluster and its server nodes (drain, resume).

use crate::{Client, Result};
use docket_core::api::{NodeList, NodeView};

impl Client {
    /// `POST /v1/workers/{name}/report`.
    ///
    /// # Errors
    /// `invalid_request`, auth and transport errors.
    pub async fn worker_report(
        &self,
        name: &str,
        report: &docket_core::api::WorkerReport,
    ) -> Result<docket_core::api::WorkerView> {
        self.send(
            self.http
                .post(self.url(&format!("/v1/workers/{}/report", Self::seg(name))))
                .json(report),
        )
        .await
    }

    /// `GET /v1/workers`.
    ///
    /// # Errors
    /// API and transport errors.
    pub async fn worker_list(&self) -> Result<docket_core::api::WorkerList> {
        self.send(self.http.get(self.url("/v1/workers"))).await
    }

    /// `GET /v1/nodes`.
    ///
    /// # Errors
    /// Transport errors.
    pub async fn node_list(&self) -> Result<Vec<NodeView>> {
        let r: NodeList = self.send(self.http.get(self.url("/v1/nodes"))).await?;
        Ok(r.nodes)
    }

    /// `POST /v1/nodes/{name}/drain`: `{"node", "draining", "moved"}`.
    ///
    /// # Errors
    /// `not_found`, transport errors.
    pub async fn node_drain(&self, name: &str, to: Option<&str>) -> Result<serde_json::Value> {
        self.send(
            self.http
                .post(self.url(&format!("/v1/nodes/{}/drain", Self::seg(name))))
                .json(&serde_json::json!({"to": to})),
        )
        .await
    }

    /// `POST /v1/nodes/{name}/resume`.
    ///
    /// # Errors
    /// `not_found`, transport errors.
    pub async fn node_resume(&self, name: &str) -> Result<serde_json::Value> {
        self.send(
            self.http
                .post(self.url(&format!("/v1/nodes/{}/resume", Self::seg(name)))),
        )
        .await
    }
}
