//! Queues: their stats and settings, pause and resume.

use crate::{Client, Result};
use docket_core::{QueueSettings, QueueStats};
use serde::Deserialize;

impl Client {
    /// `GET /v1/queues`.
    ///
    /// # Errors
    /// Transport errors.
    pub async fn queue_list(&self) -> Result<Vec<QueueStats>> {
        #[derive(Deserialize)]
        struct R {
            queues: Vec<QueueStats>,
        }
        let r: R = self.send(self.http.get(self.url("/v1/queues"))).await?;
        Ok(r.queues)
    }

    /// `GET /v1/queues/{queue}`.
    ///
    /// # Errors
    /// Transport errors.
    pub async fn queue_get(&self, queue: &str) -> Result<QueueStats> {
        self.send(
            self.http
                .get(self.url(&format!("/v1/queues/{}", Self::seg(queue)))),
        )
        .await
    }

    /// `PUT /v1/queues/{queue}`.
    ///
    /// # Errors
    /// `invalid_request`, transport errors.
    pub async fn queue_put(&self, queue: &str, s: &QueueSettings) -> Result<QueueStats> {
        self.send(
            self.http
                .put(self.url(&format!("/v1/queues/{}", Self::seg(queue))))
                .json(s),
        )
        .await
    }

    /// `POST /v1/queues/{queue}/pause` or `/resume`.
    ///
    /// # Errors
    /// Transport errors.
    pub async fn queue_set_paused(&self, queue: &str, paused: bool) -> Result<QueueStats> {
        let verb = if paused { "pause" } else { "resume" };
        self.send(
            self.http
                .post(self.url(&format!("/v1/queues/{}/{verb}", Self::seg(queue)))),
        )
        .await
    }
}
