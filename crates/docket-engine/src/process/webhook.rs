//! Delivery of a namespace's notifications to its webhook, in order, at least once.

use super::*;

impl ProcessService {
    /// Delivers the namespace's notifications to its webhook: whichever node holds the sink's
    /// lease POSTs batches in seq order and advances the cursor after a 2xx (at-least-once).
    pub(super) async fn deliver(self, ns: String) {
        let sink = format!("webhook:{ns}");
        let owner = self.engine.config.node.clone();
        let mut backoff = Duration::from_millis(200);
        loop {
            let url = self
                .config(&ns)
                .await
                .ok()
                .and_then(|c| c.webhook.map(|w| w.url));
            let pause = match url {
                None => Duration::from_secs(1),
                Some(url) => match self.deliver_once(&ns, &sink, &owner, &url).await {
                    Ok(true) => {
                        backoff = Duration::from_millis(200);
                        Duration::ZERO
                    }
                    Ok(false) => Duration::from_millis(200),
                    Err(e) => {
                        tracing::warn!(namespace = %ns, error = %e, "webhook delivery failed; retrying in {backoff:?}");
                        let b = backoff;
                        backoff = (backoff * 2).min(Duration::from_secs(30));
                        b
                    }
                },
            };
            tokio::select! {
                _ = self.cancel.cancelled() => return,
                _ = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// One batch: Ok(true) when something was delivered, Ok(false) when idle or not our lease.
    pub(super) async fn deliver_once(
        &self,
        ns: &str,
        sink: &str,
        owner: &str,
        url: &str,
    ) -> Result<bool, String> {
        self.client.check_outbound(url)?;
        let now = self.engine.clock.now();
        let until = docket_core::time::add(now, std::time::Duration::from_secs(30));
        let store = &self.engine.store;
        let Some(cursor) = store
            .sink_lease(docket_store::SinkLeaseParams {
                name: sink,
                owner,
                until,
                now,
            })
            .await
            .map_err(|e| e.to_string())?
        else {
            return Ok(false);
        };
        let batch = store
            .notification_list(docket_store::NotificationListParams {
                namespace: Some(ns),
                after: cursor,
                limit: 100,
            })
            .await
            .map_err(|e| e.to_string())?;
        let Some(last) = batch.last().map(|n| n.seq) else {
            return Ok(false);
        };
        let t0 = std::time::Instant::now();
        let resp = self
            .client
            .http
            .post(url)
            .timeout(Duration::from_secs(10))
            .json(&json!({"notifications": batch}))
            .send()
            .await
            .map_err(|e| format!("webhook unreachable: {e}"))?;
        ::metrics::histogram!(M::NOTIFICATION, "namespace" => ns.to_string(), "notification_type" => "webhook")
            .record(M::ms_since(t0));
        if !resp.status().is_success() {
            return Err(format!("webhook answered HTTP {}", resp.status()));
        }
        store
            .sink_advance(docket_store::SinkAdvanceParams {
                name: sink,
                owner,
                seq: last,
            })
            .await
            .map_err(|e| e.to_string())?;
        Ok(true)
    }
}
