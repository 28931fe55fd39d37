//! A consumer of docket's NATS sink: a durable JetStream pull consumer on the sink's stream,
//! acknowledging each message once handled and dropping repeats by message id. Run it with
//! `cargo run -p docket-sinks --example consume_nats -- nats://127.0.0.1:4222 DOCKET`; the
//! sink tests (crates/docket-sinks/tests/sinks.rs) read every broker through [`next_batch`].

// ANCHOR: consumer
use async_nats::jetstream::{self, consumer::pull, consumer::AckPolicy};
use futures::StreamExt;
use std::time::Duration;

/// One message: its id (`Nats-Msg-Id`) and JSON body.
pub struct Received {
    /// `"<namespace>/<process id>/<seq>"`: the same for every copy of a message.
    pub id: String,
    /// The `Docket-Key` header: `"<namespace> <process id>"`.
    pub key: String,
    /// The message (see docs/src/operations/sinks.md).
    pub body: serde_json::Value,
}

/// Up to `max` messages for durable consumer `name` of `stream` (created when missing), each
/// acknowledged; empty when none came within 200 ms.
///
/// # Errors
/// NATS errors, as text.
pub async fn next_batch(
    js: &jetstream::Context,
    stream: &str,
    name: &str,
    max: usize,
) -> Result<Vec<Received>, String> {
    let consumer: jetstream::consumer::PullConsumer = js
        .get_stream(stream)
        .await
        .map_err(|e| e.to_string())?
        .get_or_create_consumer(
            name,
            pull::Config {
                durable_name: Some(name.to_string()),
                ack_policy: AckPolicy::Explicit,
                ..Default::default()
            },
        )
        .await
        .map_err(|e| e.to_string())?;
    let mut batch = consumer
        .fetch()
        .max_messages(max)
        .expires(Duration::from_millis(200))
        .messages()
        .await
        .map_err(|e| e.to_string())?;
    let mut out = vec![];
    while let Some(m) = batch.next().await {
        let m = m.map_err(|e| e.to_string())?;
        let header = |name: &str| {
            m.headers
                .as_ref()
                .and_then(|h| h.get(name))
                .map(|v| v.to_string())
                .unwrap_or_default()
        };
        let (id, key) = (header("Nats-Msg-Id"), header("Docket-Key"));
        let body = serde_json::from_slice(&m.payload).map_err(|e| e.to_string())?;
        m.ack().await.map_err(|e| e.to_string())?;
        out.push(Received { id, key, body });
    }
    Ok(out)
}

#[allow(dead_code)]
#[tokio::main]
async fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let url = args
        .next()
        .unwrap_or_else(|| "nats://127.0.0.1:4222".into());
    let stream = args.next().unwrap_or_else(|| "DOCKET".into());
    let js = jetstream::new(async_nats::connect(url).await.map_err(|e| e.to_string())?);
    // A real consumer keeps the ids of a window (JetStream already drops repeats published
    // within its duplicate window, 2 minutes by default).
    let mut seen = std::collections::HashSet::new();
    loop {
        for m in next_batch(&js, &stream, "example", 100).await? {
            if seen.insert(m.id.clone()) {
                println!("{} {} {}", m.id, m.body["kind"], m.body["payload"]);
            }
        }
    }
}
// ANCHOR_END: consumer
