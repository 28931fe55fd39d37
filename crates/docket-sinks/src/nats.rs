//! NATS JetStream: subjects `<prefix>.events.<ns>` and `<prefix>.lifecycle.<ns>`, each message
//! with `Nats-Msg-Id` (JetStream drops a repeat within the stream's duplicate window) and a
//! `Docket-Key` header (`"<ns> <process id>"`). A message counts as delivered when JetStream
//! acknowledged storing it.

use crate::{all_failed, CONFIRM_TIMEOUT, CONNECT_TIMEOUT};
use async_nats::jetstream;
use docket_core::sink::Message;
use docket_engine::process::Sink;

/// A JetStream sink; connects on first use and again after a failed connect (the client
/// reconnects by itself once it was connected).
pub struct Nats {
    url: String,
    prefix: String,
    stream: Option<String>,
    js: tokio::sync::Mutex<Option<jetstream::Context>>,
}

impl Nats {
    /// A sink publishing to `url` under subject prefix `prefix`, creating stream `stream`
    /// (subjects `<prefix>.>`) when given and missing.
    #[must_use]
    pub fn new(url: &str, prefix: &str, stream: Option<String>) -> Self {
        Nats {
            url: url.to_string(),
            prefix: prefix.to_string(),
            stream,
            js: tokio::sync::Mutex::new(None),
        }
    }

    /// The subject of a message.
    #[must_use]
    pub fn subject(&self, m: &Message) -> String {
        format!("{}.{}", self.prefix, docket_core::sink::subject_tail(m))
    }

    async fn context(&self) -> Result<jetstream::Context, String> {
        let mut g = self.js.lock().await;
        if let Some(js) = g.as_ref() {
            return Ok(js.clone());
        }
        let client = tokio::time::timeout(
            CONNECT_TIMEOUT,
            async_nats::ConnectOptions::new()
                .connection_timeout(CONNECT_TIMEOUT)
                .name("docket")
                .connect(self.url.as_str()),
        )
        .await
        .map_err(|_| "connecting to NATS timed out".to_string())?
        .map_err(|e| format!("cannot connect to NATS: {e}"))?;
        let mut js = jetstream::new(client);
        js.set_timeout(CONFIRM_TIMEOUT);
        if let Some(name) = &self.stream {
            js.get_or_create_stream(jetstream::stream::Config {
                name: name.clone(),
                subjects: vec![format!("{}.>", self.prefix)],
                ..Default::default()
            })
            .await
            .map_err(|e| format!("cannot create stream {name}: {e}"))?;
        }
        *g = Some(js.clone());
        Ok(js)
    }
}

#[async_trait::async_trait]
impl Sink for Nats {
    fn kind(&self) -> &'static str {
        "nats"
    }

    async fn publish(&self, msgs: &[Message]) -> Vec<Result<(), String>> {
        let js = match self.context().await {
            Ok(js) => js,
            Err(e) => return all_failed(msgs.len(), &e),
        };
        let mut acks = Vec::with_capacity(msgs.len());
        for m in msgs {
            let mut h = async_nats::HeaderMap::new();
            h.insert(async_nats::header::NATS_MESSAGE_ID, m.id.as_str());
            h.insert("Docket-Key", m.key.as_str());
            h.insert("Content-Type", "application/json");
            acks.push(
                js.publish_with_headers(self.subject(m), h, m.body.clone().into())
                    .await,
            );
        }
        let mut out = Vec::with_capacity(msgs.len());
        for a in acks {
            out.push(match a {
                Err(e) => Err(format!("publish failed: {e}")),
                Ok(ack) => match tokio::time::timeout(
                    CONFIRM_TIMEOUT,
                    std::future::IntoFuture::into_future(ack),
                )
                .await
                {
                    Err(_) => Err("no acknowledgement from JetStream in time".into()),
                    Ok(Err(e)) => Err(format!("JetStream did not store it: {e}")),
                    Ok(Ok(_)) => Ok(()),
                },
            });
        }
        out
    }
}
