//! RabbitMQ: a durable topic exchange, routing keys `events.<ns>` and `lifecycle.<ns>`,
//! persistent messages with `message_id` and a `docket-key` header (`"<ns> <process id>"`),
//! published on a channel in confirm mode and `mandatory`: a message counts as delivered
//! when the broker confirmed it and it reached a queue. One that no queue is bound for comes
//! back and waits (nothing is dropped before a consumer's queue exists).

use crate::{all_failed, CONFIRM_TIMEOUT, CONNECT_TIMEOUT};
use docket_core::sink::Message;
use docket_engine::process::Sink;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions};
use lapin::publisher_confirm::Confirmation;
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};

/// A RabbitMQ sink; (re)connects on first use and after its connection or channel closed.
pub struct Rabbit {
    url: String,
    exchange: String,
    conn: tokio::sync::Mutex<Option<(Connection, Channel)>>,
}

impl Rabbit {
    /// A sink publishing to topic exchange `exchange` on the broker at `url`.
    #[must_use]
    pub fn new(url: &str, exchange: &str) -> Self {
        Rabbit {
            url: url.to_string(),
            exchange: exchange.to_string(),
            conn: tokio::sync::Mutex::new(None),
        }
    }

    /// The routing key of a message.
    #[must_use]
    pub fn routing_key(m: &Message) -> String {
        docket_core::sink::subject_tail(m)
    }

    async fn channel(&self) -> Result<Channel, String> {
        let mut g = self.conn.lock().await;
        if let Some((c, ch)) = g.as_ref() {
            if c.status().connected() && ch.status().connected() {
                return Ok(ch.clone());
            }
            let _ = c.close(0, "reconnecting").await;
        }
        *g = None;
        let props = ConnectionProperties::default()
            .with_connection_name("docket".into())
            .with_executor(tokio_executor_trait::Tokio::current())
            .with_reactor(tokio_reactor_trait::Tokio::current());
        let conn = tokio::time::timeout(CONNECT_TIMEOUT, Connection::connect(&self.url, props))
            .await
            .map_err(|_| "connecting to RabbitMQ timed out".to_string())?
            .map_err(|e| format!("cannot connect to RabbitMQ: {e}"))?;
        let ch = conn
            .create_channel()
            .await
            .map_err(|e| format!("cannot open a channel: {e}"))?;
        ch.confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| format!("confirm.select failed: {e}"))?;
        ch.exchange_declare(
            &self.exchange,
            ExchangeKind::Topic,
            ExchangeDeclareOptions {
                durable: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .map_err(|e| format!("cannot declare exchange {}: {e}", self.exchange))?;
        *g = Some((conn, ch.clone()));
        Ok(ch)
    }
}

#[async_trait::async_trait]
impl Sink for Rabbit {
    fn kind(&self) -> &'static str {
        "rabbitmq"
    }

    async fn publish(&self, msgs: &[Message]) -> Vec<Result<(), String>> {
        let ch = match self.channel().await {
            Ok(ch) => ch,
            Err(e) => return all_failed(msgs.len(), &e),
        };
        let mut confirms = Vec::with_capacity(msgs.len());
        for m in msgs {
            let mut headers = FieldTable::default();
            headers.insert(
                "docket-key".into(),
                AMQPValue::LongString(m.key.as_str().into()),
            );
            let props = BasicProperties::default()
                .with_message_id(m.id.as_str().into())
                .with_content_type("application/json".into())
                .with_delivery_mode(2)
                .with_headers(headers);
            confirms.push(
                ch.basic_publish(
                    &self.exchange,
                    &Self::routing_key(m),
                    BasicPublishOptions {
                        mandatory: true,
                        ..Default::default()
                    },
                    &m.body,
                    props,
                )
                .await,
            );
        }
        let mut out = Vec::with_capacity(msgs.len());
        for (m, c) in msgs.iter().zip(confirms) {
            out.push(match c {
                Err(e) => Err(format!("publish failed: {e}")),
                Ok(confirm) => match tokio::time::timeout(CONFIRM_TIMEOUT, confirm).await {
                    Err(_) => Err("no confirm from RabbitMQ in time".into()),
                    Ok(Err(e)) => Err(format!("publish failed: {e}")),
                    Ok(Ok(Confirmation::Ack(None))) => Ok(()),
                    Ok(Ok(Confirmation::Ack(Some(_)))) => Err(format!(
                        "no queue is bound to exchange {} for {}: the message waits",
                        self.exchange,
                        Self::routing_key(m)
                    )),
                    Ok(Ok(Confirmation::Nack(_))) => Err("RabbitMQ refused the message".into()),
                    Ok(Ok(Confirmation::NotRequested)) => {
                        Err("the channel is not in confirm mode".into())
                    }
                },
            });
        }
        out
    }
}
