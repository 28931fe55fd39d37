//! Event sink benchmark: throughput of a sink draining a full outbox, and end-to-end latency
//! from a step's commit to a consumer at a steady rate.
//!
//! ```text
//! cargo run --release -p docket-sinks --example sink_bench -- BACKEND SINK [EVENTS] [RATE]
//!   BACKEND  pg | sqlite | mysql   (the test databases of scripts/test.sh)
//!   SINK     nats | rabbitmq | kafka  (nats://127.0.0.1:4222, amqp://127.0.0.1:5672; kafka: a
//!            private tansu, `DOCKET_TANSU`, topics of 3 partitions, progressor's phash2)
//!   EVENTS   events in the outbox for the throughput phase (default 20000)
//!   RATE     process steps per second in the latency phase, 5 events each (default 100)
//! ```
//!
//! Throughput: processes step with no sink until EVENTS notifications wait; then a node with
//! the sink starts and the time until its cursor passed the last one is measured.
//! Latency: a consumer (core NATS subscription / a RabbitMQ queue / a Kafka consumer group)
//! takes each message's
//! `created_at` (set in the step's transaction) from its arrival, for 10 s of steps at RATE.

use docket_core::process::{NewEvent, ProcessorReply, ProcessorRequest, ProcessorResult};
use docket_core::SystemClock;
use docket_engine::process::{ProcessService, Processor, Request, SinkSpec};
use docket_engine::{Engine, EngineConfig};
use docket_sinks::SinkConfig;
use docket_store::testing::TestStore;
use docket_store::Store;
use futures::StreamExt;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Messages as they arrived at the consumer: wall-clock time and body.
type Arrivals = Arc<Mutex<Vec<(chrono::DateTime<chrono::Utc>, Vec<u8>)>>>;

struct Emit;

#[async_trait::async_trait]
impl Processor for Emit {
    async fn process(&self, req: ProcessorRequest) -> ProcessorReply {
        let n = req.args.get("events").and_then(Value::as_u64).unwrap_or(1);
        ProcessorReply::Ok(ProcessorResult {
            events: (0..n)
                .map(|i| NewEvent {
                    payload: json!({"i": i, "pad": "x".repeat(100)}),
                    metadata: json!({}),
                })
                .collect(),
            aux_state: None,
            metadata: None,
            response: json!("ok"),
            action: None,
        })
    }
}

async fn node(
    store: Arc<dyn Store>,
    sinks: Vec<SinkSpec>,
    stop: &CancellationToken,
) -> ProcessService {
    let cfg = EngineConfig::new("bench", store.backend());
    let engine = Engine::new(store, Arc::new(SystemClock), cfg);
    engine.start(stop.clone()).await.unwrap();
    let svc = ProcessService::new(engine, stop.clone()).with_sinks(sinks);
    svc.register_processor("emit", Arc::new(Emit));
    svc.start().await.unwrap();
    svc
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let backend = args.first().map_or("sqlite", String::as_str).to_string();
    let kind = args.get(1).map_or("nats", String::as_str).to_string();
    let events: usize = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let rate: u64 = args.get(3).and_then(|v| v.parse().ok()).unwrap_or(100);
    let db = match backend.as_str() {
        "pg" => TestStore::postgres().await,
        "mysql" => TestStore::mysql().await,
        _ => TestStore::sqlite().await,
    };
    let tag = format!("bench{}", std::process::id());
    // Kafka: a private broker (tansu), kept until the end.
    let tansu = (kind == "kafka").then(docket_sinks::testing::TansuServer::start);
    let (url, stream, exchange) = match kind.as_str() {
        "kafka" => {
            let t = tansu.as_ref().unwrap();
            kafka_topics(&t.brokers(), &tag).await;
            (t.url(), None, None)
        }
        "nats" => (
            "nats://127.0.0.1:4222".to_string(),
            Some(tag.to_uppercase()),
            None,
        ),
        _ => (
            "amqp://guest:guest@127.0.0.1:5672/%2f".to_string(),
            None,
            Some(tag.clone()),
        ),
    };
    let spec = SinkConfig {
        name: "bench".into(),
        kind: kind.clone(),
        url: url.clone(),
        namespaces: vec!["ns".into()],
        queues: vec![],
        subject_prefix: (kind == "nats").then(|| tag.clone()),
        topic_prefix: (kind == "kafka").then(|| tag.clone()),
        stream: stream.clone(),
        exchange: exchange.clone(),
        ..Default::default()
    };
    // The consumer first (RabbitMQ needs its queue bound before anything is published).
    let arrivals: Arrivals = Arc::default();
    let consumer = consume(&kind, &url, &tag, arrivals.clone()).await;
    // Phase 1: fill the outbox with no sink, then drain it.
    let stop0 = CancellationToken::new();
    let filler = node(db.store.clone(), vec![], &stop0).await;
    let cfg = serde_json::from_value(
        json!({"processor": {"url": "inproc:emit"}, "worker_pool_size": 20}),
    )
    .unwrap();
    filler.namespace_put("ns", cfg).await.unwrap();
    let steps = events / 10;
    futures::stream::iter(0..steps)
        .for_each_concurrent(20, |i| {
            let f = filler.clone();
            async move {
                f.init(
                    "ns",
                    &format!("f{i}"),
                    Request {
                        args: json!({"events": 9}),
                        ..Default::default()
                    },
                )
                .await
                .unwrap();
            }
        })
        .await;
    let last = db.store.notification_last_seq().await.unwrap();
    stop0.cancel();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stop = CancellationToken::new();
    let t0 = Instant::now();
    let svc = node(db.store.clone(), vec![spec.build().unwrap()], &stop).await;
    loop {
        if svc.sink_status().iter().any(|s| s.delivered_seq >= last) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = t0.elapsed();
    println!(
        "{backend} {kind}: drained {} notifications in {:.2} s: {:.0} events/s",
        steps * 10,
        took.as_secs_f64(),
        (steps * 10) as f64 / took.as_secs_f64()
    );
    // Phase 2: steady steps, end-to-end latency at the consumer.
    tokio::time::sleep(Duration::from_millis(500)).await;
    arrivals.lock().unwrap().clear();
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
    let end = Instant::now() + Duration::from_secs(10);
    let mut i = 0;
    let mut pending = vec![];
    while Instant::now() < end {
        tick.tick().await;
        let s = svc.clone();
        i += 1;
        pending.push(tokio::spawn(async move {
            s.init(
                "ns",
                &format!("l{i}"),
                Request {
                    args: json!({"events": 4}),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        }));
    }
    for p in pending {
        p.await.unwrap();
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let got = std::mem::take(&mut *arrivals.lock().unwrap());
    let mut lat: Vec<f64> = got
        .iter()
        .filter_map(|(at, body)| {
            let v: Value = serde_json::from_slice(body).ok()?;
            let created: chrono::DateTime<chrono::Utc> = v["created_at"].as_str()?.parse().ok()?;
            Some((*at - created).num_microseconds()? as f64 / 1000.0)
        })
        .collect();
    if lat.is_empty() {
        println!("no messages arrived in the latency phase");
    } else {
        let n = lat.len();
        println!(
            "{backend} {kind}: {n} messages at {rate} steps/s x 5: commit to consumer p50 {:.2} ms, p99 {:.2} ms",
            pct(&mut lat, 0.5),
            pct(&mut lat, 0.99)
        );
    }
    stop.cancel();
    consumer.abort();
    if let Some(s) = stream {
        if let Ok(c) = async_nats::connect(url.as_str()).await {
            let _ = async_nats::jetstream::new(c).delete_stream(&s).await;
        }
    }
    let _ = exchange;
}

/// Topics `<tag>.events.ns` and `<tag>.lifecycle.ns`, 3 partitions each.
async fn kafka_topics(brokers: &str, tag: &str) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let admin: AdminClient<rdkafka::client::DefaultClientContext> =
        rdkafka::config::ClientConfig::new()
            .set("bootstrap.servers", brokers)
            .create()
            .unwrap();
    let names = [format!("{tag}.events.ns"), format!("{tag}.lifecycle.ns")];
    let topics: Vec<_> = names
        .iter()
        .map(|n| NewTopic::new(n, 3, TopicReplication::Fixed(1)))
        .collect();
    for r in admin
        .create_topics(&topics, &AdminOptions::new())
        .await
        .unwrap()
    {
        r.unwrap();
    }
}

async fn consume(kind: &str, url: &str, tag: &str, out: Arrivals) -> tokio::task::JoinHandle<()> {
    if kind == "kafka" {
        use rdkafka::consumer::{BaseConsumer, Consumer};
        use rdkafka::message::Message as _;
        let c: BaseConsumer = rdkafka::config::ClientConfig::new()
            .set("bootstrap.servers", url.trim_start_matches("kafka://"))
            .set("group.id", tag)
            .set("auto.offset.reset", "earliest")
            .create()
            .unwrap();
        c.subscribe(&[&format!("{tag}.events.ns"), &format!("{tag}.lifecycle.ns")])
            .unwrap();
        // librdkafka's poll blocks: a thread of its own; it ends with the process.
        std::thread::spawn(move || loop {
            if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
                let body = m.payload().unwrap_or_default().to_vec();
                out.lock().unwrap().push((chrono::Utc::now(), body));
            }
        });
        return tokio::spawn(async {});
    }
    if kind == "nats" {
        let c = async_nats::connect(url)
            .await
            .expect("NATS at 127.0.0.1:4222");
        let mut sub = c.subscribe(format!("{tag}.>")).await.unwrap();
        c.flush().await.unwrap();
        return tokio::spawn(async move {
            let _c = c;
            while let Some(m) = sub.next().await {
                out.lock()
                    .unwrap()
                    .push((chrono::Utc::now(), m.payload.to_vec()));
            }
        });
    }
    use lapin::options::*;
    use lapin::types::FieldTable;
    let props = lapin::ConnectionProperties::default()
        .with_executor(tokio_executor_trait::Tokio::current())
        .with_reactor(tokio_reactor_trait::Tokio::current());
    let conn = lapin::Connection::connect(url, props)
        .await
        .expect("RabbitMQ at 127.0.0.1:5672");
    let ch = conn.create_channel().await.unwrap();
    ch.exchange_declare(
        tag,
        lapin::ExchangeKind::Topic,
        ExchangeDeclareOptions {
            durable: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap();
    ch.queue_declare(
        tag,
        QueueDeclareOptions {
            auto_delete: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap();
    ch.queue_bind(
        tag,
        tag,
        "#",
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap();
    let mut consumer = ch
        .basic_consume(
            tag,
            "bench",
            BasicConsumeOptions {
                no_ack: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    tokio::spawn(async move {
        let _keep = (conn, ch);
        while let Some(Ok(d)) = consumer.next().await {
            out.lock()
                .unwrap()
                .push((chrono::Utc::now(), d.data.clone()));
        }
    })
}
