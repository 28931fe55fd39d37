//! A consumer of docket's RabbitMQ sink: a durable queue bound to the sink's exchange for
//! every routing key (`events.<ns>`, `lifecycle.<ns>`; bind `events.orders` for one), each
//! message acknowledged once handled, repeats dropped by `message_id`. Run it with
//! `cargo run -p docket-sinks --example consume_rabbitmq -- amqp://guest:guest@127.0.0.1:5672/%2f docket`;
//! the sink tests (crates/docket-sinks/tests/sinks.rs) read every broker through [`next_batch`].

// ANCHOR: consumer
use lapin::options::{
    BasicAckOptions, BasicGetOptions, ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{Channel, Connection, ConnectionProperties, ExchangeKind};

/// One message: its `message_id` and JSON body.
pub struct Received {
    /// `"<namespace>/<process id>/<seq>"`: the same for every copy of a message.
    pub id: String,
    /// The `docket-key` header: `"<namespace> <process id>"`.
    pub key: String,
    /// The message (see docs/src/operations/sinks.md).
    pub body: serde_json::Value,
}

/// A channel on `url` with durable queue `queue` bound to topic exchange `exchange` for `#`.
/// Declare it before the sink publishes: docket keeps a message no queue takes waiting.
///
/// # Errors
/// AMQP errors, as text.
pub async fn bind(url: &str, exchange: &str, queue: &str) -> Result<(Connection, Channel), String> {
    let props = ConnectionProperties::default()
        .with_executor(tokio_executor_trait::Tokio::current())
        .with_reactor(tokio_reactor_trait::Tokio::current());
    let conn = Connection::connect(url, props)
        .await
        .map_err(|e| e.to_string())?;
    let ch = conn.create_channel().await.map_err(|e| e.to_string())?;
    let durable = ExchangeDeclareOptions {
        durable: true,
        ..Default::default()
    };
    ch.exchange_declare(
        exchange,
        ExchangeKind::Topic,
        durable,
        FieldTable::default(),
    )
    .await
    .map_err(|e| e.to_string())?;
    let durable = QueueDeclareOptions {
        durable: true,
        ..Default::default()
    };
    ch.queue_declare(queue, durable, FieldTable::default())
        .await
        .map_err(|e| e.to_string())?;
    ch.queue_bind(
        queue,
        exchange,
        "#",
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await
    .map_err(|e| e.to_string())?;
    Ok((conn, ch))
}

/// Up to `max` messages waiting in `queue`, each acknowledged (empty when none waits).
///
/// # Errors
/// AMQP errors, as text.
pub async fn next_batch(ch: &Channel, queue: &str, max: usize) -> Result<Vec<Received>, String> {
    let mut out = vec![];
    while out.len() < max {
        let Some(m) = ch
            .basic_get(queue, BasicGetOptions::default())
            .await
            .map_err(|e| e.to_string())?
        else {
            break;
        };
        let id = m
            .properties
            .message_id()
            .as_ref()
            .map(|s| s.to_string())
            .unwrap_or_default();
        let key = m
            .properties
            .headers()
            .as_ref()
            .and_then(|h| h.inner().get("docket-key"))
            .and_then(|v| v.as_long_string())
            .map(|s| s.to_string())
            .unwrap_or_default();
        let body = serde_json::from_slice(&m.data).map_err(|e| e.to_string())?;
        m.ack(BasicAckOptions::default())
            .await
            .map_err(|e| e.to_string())?;
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
        .unwrap_or_else(|| "amqp://guest:guest@127.0.0.1:5672/%2f".into());
    let exchange = args.next().unwrap_or_else(|| "docket".into());
    let (_conn, ch) = bind(&url, &exchange, "docket-example").await?;
    // A real consumer keeps the ids of a window: a repeat follows its first copy closely.
    let mut seen = std::collections::HashSet::new();
    loop {
        let batch = next_batch(&ch, "docket-example", 100).await?;
        if batch.is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        for m in batch {
            if seen.insert(m.id.clone()) {
                println!("{} {} {}", m.id, m.body["kind"], m.body["payload"]);
            }
        }
    }
}
// ANCHOR_END: consumer
