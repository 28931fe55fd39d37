//! Untyped calls by path (the CLI's read-only and generic commands) and the change stream.

use crate::{Client, ClientError, Result};
use serde_json::Value;

impl Client {
    /// `GET` a path of the API as JSON (for the CLI's read-only commands).
    ///
    /// # Errors
    /// API and transport errors.
    pub async fn get_json(&self, path: &str, query: &[(&str, String)]) -> Result<Value> {
        self.send(self.http.get(self.url(path)).query(query)).await
    }

    /// `POST` a JSON body to a path of the API.
    ///
    /// # Errors
    /// API and transport errors.
    pub async fn post_json(&self, path: &str, body: &Value) -> Result<Value> {
        self.send(self.http.post(self.url(path)).json(body)).await
    }

    /// `GET /v1/changes`: a stream that yields once per burst of task changes on the server.
    ///
    /// # Errors
    /// Transport errors and API errors opening the stream.
    pub async fn changes(
        &self,
    ) -> Result<impl futures::Stream<Item = ()> + Unpin + Send + 'static> {
        use futures::StreamExt;
        let resp = self.http.get(self.url("/v1/changes")).send().await?;
        if !resp.status().is_success() {
            return Err(ClientError::Decode(format!(
                "changes: HTTP {}",
                resp.status()
            )));
        }
        // Each `event: changed` block is one tick; keep-alive comments are skipped.
        Ok(Box::pin(resp.bytes_stream().filter_map(
            |chunk| async move {
                match chunk {
                    Ok(b) if b.windows(7).any(|w| w == b"changed") => Some(()),
                    _ => None,
                }
            },
        )))
    }

    /// `DELETE` a path of the API.
    ///
    /// # Errors
    /// API and transport errors.
    pub async fn delete(&self, path: &str) -> Result<Value> {
        self.send(self.http.delete(self.url(path))).await
    }

    /// `POST` to a path of the API without a body.
    ///
    /// # Errors
    /// API and transport errors.
    pub async fn post_empty(&self, path: &str) -> Result<Value> {
        self.send(self.http.post(self.url(path))).await
    }
}
