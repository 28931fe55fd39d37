//! Event sinks against the real brokers: a private `nats-server` with JetStream per test (so
//! a test can restart it) and the machine's RabbitMQ (127.0.0.1:5672, guest/guest; an
//! exchange and queue of each test's own), on PostgreSQL, SQLite and MariaDB. Two engines
//! (nodes) share each database; processes step on both; a consumer reads what the brokers
//! hold and checks that every notification arrived at least once, each process's in order
//! once repeats (same message id) are dropped, and a repeat carries the same body.

use docket_core::process::{NewEvent, ProcessorReply, ProcessorRequest, ProcessorResult};
use docket_core::sink::Message;
use docket_core::SystemClock;
use docket_engine::process::{ProcessService, Processor, Request, Sink, SinkSpec};
use docket_engine::{Claim, Engine, EngineConfig};
use docket_sinks::testing::{NatsServer, TansuServer};
use docket_sinks::SinkConfig;
use docket_store::testing::TestStore;
use docket_store::{NotificationListParams, Store};
use lapin::options::QueueDeleteOptions;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

// The consumers the docs show are the ones these tests read the brokers with.
#[path = "../examples/consume_kafka.rs"]
mod consume_kafka;
#[path = "../examples/consume_nats.rs"]
mod consume_nats;
#[path = "../examples/consume_rabbitmq.rs"]
mod consume_rabbitmq;

const RABBIT: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// RabbitMQ is the machine's: the test that restarts it runs alone among the RabbitMQ tests.
static RABBIT_LOCK: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// Emits `args.events` events (default 1) with payload `{"step": task, "i": k}`.
struct Emit;

#[async_trait::async_trait]
impl Processor for Emit {
    async fn process(&self, req: ProcessorRequest) -> ProcessorReply {
        let n = req.args.get("events").and_then(Value::as_u64).unwrap_or(1);
        let pad = req.args.get("pad").and_then(Value::as_u64).unwrap_or(0) as usize;
        ProcessorReply::Ok(ProcessorResult {
            events: (0..n)
                .map(|i| NewEvent {
                    payload: json!({"step": req.task_type, "i": i, "pad": "x".repeat(pad)}),
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

/// One message as a consumer saw it.
#[derive(Debug, Clone)]
struct Seen {
    id: String,
    key: String,
    seq: i64,
    body: Value,
}

fn seen(id: String, key: String, body: Value) -> Seen {
    assert!(!id.is_empty(), "a message without an id: {body}");
    assert_eq!(
        body["message_id"],
        id.as_str(),
        "the id header is the body's"
    );
    assert_eq!(body["key"], key.as_str(), "the key header is the body's");
    Seen {
        id,
        key: body["key"].as_str().unwrap().to_string(),
        seq: body["seq"].as_i64().unwrap(),
        body,
    }
}

/// Reads a JetStream stream through a durable consumer (examples/consume_nats.rs).
struct NatsReader {
    url: String,
    stream: String,
    got: Vec<Seen>,
}

impl NatsReader {
    /// A reader of stream `DOCKET` on the server at `url`, from its first message.
    fn new(url: impl Into<String>) -> NatsReader {
        NatsReader {
            url: url.into(),
            stream: "DOCKET".into(),
            got: vec![],
        }
    }

    async fn read(&mut self) {
        let Ok(c) = async_nats::connect(self.url.as_str()).await else {
            return;
        };
        let js = async_nats::jetstream::new(c);
        while let Ok(batch) = consume_nats::next_batch(&js, &self.stream, "test", 500).await {
            if batch.is_empty() {
                return;
            }
            self.got
                .extend(batch.into_iter().map(|m| seen(m.id, m.key, m.body)));
        }
    }
}

/// A durable queue of the test's own, bound to its exchange for every routing key.
struct RabbitReader {
    queue: String,
    got: Vec<Seen>,
}

async fn rabbit_channel() -> Option<(lapin::Connection, lapin::Channel)> {
    let props = lapin::ConnectionProperties::default()
        .with_executor(tokio_executor_trait::Tokio::current())
        .with_reactor(tokio_reactor_trait::Tokio::current());
    let c = lapin::Connection::connect(RABBIT, props).await.ok()?;
    let ch = c.create_channel().await.ok()?;
    Some((c, ch))
}

impl RabbitReader {
    async fn new(exchange: &str) -> RabbitReader {
        let queue = format!("{exchange}.all");
        consume_rabbitmq::bind(RABBIT, exchange, &queue)
            .await
            .expect("RabbitMQ on 127.0.0.1:5672");
        RabbitReader { queue, got: vec![] }
    }

    /// Reads through examples/consume_rabbitmq.rs (a new connection each time: the broker
    /// may have restarted).
    async fn read(&mut self) {
        let Some((c, ch)) = rabbit_channel().await else {
            return;
        };
        while let Ok(batch) = consume_rabbitmq::next_batch(&ch, &self.queue, 500).await {
            if batch.is_empty() {
                break;
            }
            self.got
                .extend(batch.into_iter().map(|m| seen(m.id, m.key, m.body)));
        }
        let _ = c.close(0, "read").await;
    }

    async fn delete(&self, exchange: &str) {
        if let Some((_c, ch)) = rabbit_channel().await {
            let _ = ch
                .queue_delete(&self.queue, QueueDeleteOptions::default())
                .await;
            let _ = ch
                .exchange_delete(exchange, lapin::options::ExchangeDeleteOptions::default())
                .await;
        }
    }
}

/// Checks what a consumer saw against the outbox: every notification once at least; after
/// dropping repeats of an id, each key's seqs ascend; a repeat has the same body.
fn check(name: &str, got: &[Seen], expected: &[docket_core::process::Notification]) {
    let want: HashMap<String, i64> = expected
        .iter()
        .map(|n| (format!("{}/{}/{}", n.namespace, n.process_id, n.seq), n.seq))
        .collect();
    let mut first: HashMap<&str, &Seen> = HashMap::new();
    let mut last_of_key: HashMap<&str, i64> = HashMap::new();
    let mut repeats = 0;
    for s in got {
        if let Some(f) = first.get(s.id.as_str()) {
            assert_eq!(f.body, s.body, "{name}: a repeat of {} differs", s.id);
            repeats += 1;
            continue;
        }
        first.insert(&s.id, s);
        assert_eq!(want.get(&s.id), Some(&s.seq), "{name}: unexpected {}", s.id);
        let prev = last_of_key.insert(&s.key, s.seq);
        assert!(
            !matches!(prev, Some(p) if p >= s.seq),
            "{name}: {} out of order after seq {prev:?}",
            s.id
        );
    }
    let missing: Vec<_> = want
        .keys()
        .filter(|k| !first.contains_key(k.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "{name}: {} of {} missing, e.g. {:?}",
        missing.len(),
        want.len(),
        missing.first()
    );
    eprintln!("{name}: {} messages, {} repeats", want.len(), repeats);
}

async fn store_of(backend: &str) -> TestStore {
    match backend {
        "pg" => TestStore::postgres().await,
        "mysql" => TestStore::mysql().await,
        _ => TestStore::sqlite().await,
    }
}

/// A node: engine + process service with the sinks, the in-process processor, namespace `ns`.
async fn node(
    store: Arc<dyn Store>,
    name: &str,
    sinks: Vec<SinkSpec>,
    stop: &CancellationToken,
) -> ProcessService {
    let mut cfg = EngineConfig::new(name, store.backend());
    cfg.rescue_interval = Duration::from_millis(200);
    let engine = Engine::new(store, Arc::new(SystemClock), cfg);
    engine.start(stop.clone()).await.unwrap();
    let svc = ProcessService::new(engine, stop.clone()).with_sinks(sinks);
    svc.register_processor("emit", Arc::new(Emit));
    svc.start().await.unwrap();
    svc
}

fn nats_sink(name: &str, url: &str) -> SinkSpec {
    SinkConfig {
        name: name.into(),
        kind: "nats".into(),
        url: url.into(),
        namespaces: vec!["*".into()],
        queues: vec![],
        subject_prefix: None,
        stream: Some("DOCKET".into()),
        exchange: None,
        ..Default::default()
    }
    .build()
    .unwrap()
}

fn rabbit_sink(name: &str, exchange: &str, url: &str) -> SinkSpec {
    SinkConfig {
        name: name.into(),
        kind: "rabbitmq".into(),
        url: url.into(),
        namespaces: vec!["ns".into()],
        queues: vec![],
        subject_prefix: None,
        stream: None,
        exchange: Some(exchange.into()),
        ..Default::default()
    }
    .build()
    .unwrap()
}

/// Which nodes publish to each sink at this moment, across a test's nodes: a publish call that
/// starts while another node's call to the same sink is in flight is a second holder at work.
#[derive(Default)]
struct Publishers {
    /// Sink → node → calls in flight.
    now: Mutex<HashMap<String, HashMap<String, usize>>>,
    /// (sink, node that started, node already publishing).
    overlaps: Mutex<Vec<(String, String, String)>>,
    /// Publish calls made.
    calls: AtomicUsize,
}

/// A publish call in flight; it ends when dropped (also when its node dies mid-call).
struct InFlight<'a> {
    log: &'a Publishers,
    sink: &'a str,
    node: &'a str,
}

impl Publishers {
    fn start<'a>(&'a self, sink: &'a str, node: &'a str) -> InFlight<'a> {
        self.calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut now = self.now.lock().unwrap();
        let nodes = now.entry(sink.to_string()).or_default();
        for (other, n) in nodes.iter() {
            if other != node && *n > 0 {
                let o = (sink.to_string(), node.to_string(), other.clone());
                self.overlaps.lock().unwrap().push(o);
            }
        }
        *nodes.entry(node.to_string()).or_default() += 1;
        InFlight {
            log: self,
            sink,
            node,
        }
    }

    /// Checks that no two nodes ever published to one sink at once, and that there was
    /// publishing to check.
    fn check(&self) {
        let overlaps = self.overlaps.lock().unwrap();
        assert!(
            overlaps.is_empty(),
            "two nodes published to one sink at once (sink, starting, already publishing): {:?}",
            &overlaps[..overlaps.len().min(5)]
        );
        assert!(
            self.calls.load(Ordering::Relaxed) > 0,
            "nothing was published"
        );
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut now = self.log.now.lock().unwrap();
        if let Some(n) = now.get_mut(self.sink).and_then(|m| m.get_mut(self.node)) {
            *n -= 1;
        }
    }
}

/// A sink that reports each publish call of node `node` to `log`.
struct Watched {
    sink: String,
    node: String,
    inner: Arc<dyn Sink>,
    log: Arc<Publishers>,
}

#[async_trait::async_trait]
impl Sink for Watched {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    async fn publish(&self, msgs: &[Message]) -> Vec<Result<(), String>> {
        let _in_flight = self.log.start(&self.sink, &self.node);
        self.inner.publish(msgs).await
    }
}

/// `spec` with its publish calls on node `node` reported to `log`.
fn watched(mut spec: SinkSpec, node: &str, log: &Arc<Publishers>) -> SinkSpec {
    spec.sink = Arc::new(Watched {
        sink: spec.name.clone(),
        node: node.to_string(),
        inner: spec.sink,
        log: log.clone(),
    });
    spec
}

/// Samples the nodes' sink status every 20 ms until `stop`; the most nodes that believed they
/// held one sink's cursor at once, so far.
fn watch_holders(nodes: Vec<ProcessService>, stop: CancellationToken) -> Arc<AtomicUsize> {
    let most = Arc::new(AtomicUsize::new(0));
    let seen = most.clone();
    tokio::spawn(async move {
        while !stop.is_cancelled() {
            let mut per: HashMap<String, usize> = HashMap::new();
            for s in nodes.iter().flat_map(|n| n.sink_status()) {
                if s.holder {
                    *per.entry(format!("{}/{}", s.sink, s.namespace))
                        .or_default() += 1;
                }
            }
            for n in per.into_values() {
                seen.fetch_max(n, Ordering::Relaxed);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    most
}

fn req(events: u64) -> Request {
    Request {
        args: json!({"events": events}),
        ..Default::default()
    }
}

async fn all_notifications(store: &dyn Store) -> Vec<docket_core::process::Notification> {
    let mut out = vec![];
    loop {
        let page = store
            .notification_list(NotificationListParams {
                namespace: Some("ns"),
                after: out
                    .last()
                    .map_or(0, |n: &docket_core::process::Notification| n.seq),
                limit: 1000,
            })
            .await
            .unwrap();
        if page.is_empty() {
            return out;
        }
        out.extend(page);
    }
}

/// Steps `n` processes on two nodes: init (2 events) on the first, call (3 events) on the
/// second, `par` at a time; returns when every step answered.
async fn burst(a: &ProcessService, b: &ProcessService, prefix: &str, n: usize, par: usize) {
    use futures::StreamExt;
    futures::stream::iter(0..n)
        .for_each_concurrent(par, |i| async move {
            let id = format!("{prefix}{i}");
            a.init("ns", &id, req(2)).await.unwrap();
            b.call("ns", &id, req(3)).await.unwrap();
        })
        .await;
}

async fn put_ns(svc: &ProcessService) {
    let cfg = serde_json::from_value(json!({"processor": {"url": "inproc:emit"}})).unwrap();
    svc.namespace_put("ns", cfg).await.unwrap();
}

/// Reads until every expected id was seen or `secs` passed.
async fn wait_nats(r: &mut NatsReader, want: usize, secs: u64) {
    let t0 = Instant::now();
    while distinct(&r.got) < want && t0.elapsed() < Duration::from_secs(secs) {
        r.read().await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn wait_rabbit(r: &mut RabbitReader, want: usize, secs: u64) {
    let t0 = Instant::now();
    while distinct(&r.got) < want && t0.elapsed() < Duration::from_secs(secs) {
        r.read().await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn distinct(got: &[Seen]) -> usize {
    got.iter()
        .map(|s| s.id.as_str())
        .collect::<HashSet<_>>()
        .len()
}

/// 1,000 processes × 5 events (+ 1 `created` each) through two nodes to both brokers. At no
/// moment did both nodes publish to one sink, nor (sampled every 20 ms) both hold its cursor.
async fn thousand_processes_on_two_nodes(backend: &str) {
    let _r = RABBIT_LOCK.read().await;
    let db = store_of(backend).await;
    let nats = NatsServer::start();
    let exchange = format!("docket-test-{}", uuid());
    let mut rabbit = RabbitReader::new(&exchange).await;
    let log = Arc::new(Publishers::default());
    let sinks = |node: &str| {
        vec![
            watched(nats_sink("js", &nats.url()), node, &log),
            watched(rabbit_sink("amqp", &exchange, RABBIT), node, &log),
        ]
    };
    let stop = CancellationToken::new();
    let a = node(db.store.clone(), "a", sinks("a"), &stop).await;
    let b = node(db.another_node().await, "b", sinks("b"), &stop).await;
    let sampling = CancellationToken::new();
    let holders = watch_holders(vec![a.clone(), b.clone()], sampling.clone());
    put_ns(&a).await;
    let t0 = Instant::now();
    burst(&a, &b, "p", 1000, 32).await;
    let stepped = t0.elapsed();
    // Checked now as well as at the end: a second publisher would also flood the brokers.
    log.check();
    let most = holders.load(Ordering::Relaxed);
    assert!(most <= 1, "{most} nodes held one sink's cursor at once");
    let expected = all_notifications(&*db.store).await;
    assert_eq!(expected.len(), 6000, "5 events + created per process");
    let mut js = NatsReader::new(nats.url());
    wait_nats(&mut js, expected.len(), 120).await;
    wait_rabbit(&mut rabbit, expected.len(), 120).await;
    eprintln!(
        "{backend}: stepped in {stepped:?}, both sinks done {:?} after",
        t0.elapsed() - stepped
    );
    check(&format!("{backend}/nats"), &js.got, &expected);
    check(&format!("{backend}/rabbitmq"), &rabbit.got, &expected);
    sampling.cancel();
    let most = holders.load(Ordering::Relaxed);
    assert_eq!(most, 1, "nodes holding one sink's cursor at once");
    log.check();
    // The two nodes shared the work of each cursor's lease: one of them published per sink.
    let holders: Vec<_> = a
        .sink_status()
        .into_iter()
        .chain(b.sink_status())
        .filter(|s| s.holder)
        .map(|s| s.sink)
        .collect();
    assert_eq!(holders.len(), 2, "one holder per sink: {holders:?}");
    stop.cancel();
    rabbit.delete(&exchange).await;
}

fn uuid() -> String {
    format!(
        "{:x}{:x}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thousand_processes_on_two_nodes_postgres() {
    thousand_processes_on_two_nodes("pg").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thousand_processes_on_two_nodes_sqlite() {
    thousand_processes_on_two_nodes("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thousand_processes_on_two_nodes_mysql() {
    thousand_processes_on_two_nodes("mysql").await;
}

/// NATS killed in the middle of a burst (600 processes), and started again once 200 more
/// notifications were written: nothing lost, repeats only with
/// the same message id, each process in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nats_restarted_in_a_burst() {
    let db = store_of("pg").await;
    let mut nats = NatsServer::start();
    let stop = CancellationToken::new();
    let a = node(
        db.store.clone(),
        "a",
        vec![nats_sink("js", &nats.url())],
        &stop,
    )
    .await;
    let b = node(
        db.another_node().await,
        "b",
        vec![nats_sink("js", &nats.url())],
        &stop,
    )
    .await;
    put_ns(&a).await;
    let (a2, b2) = (a.clone(), b.clone());
    let run = tokio::spawn(async move { burst(&a2, &b2, "r", 600, 16).await });
    let mut js = NatsReader::new(nats.url());
    // Down once a part was written (and published: the sink keeps up), for 200 more.
    grows_by(&*db.store, 300).await;
    nats.kill();
    grows_by(&*db.store, 200).await;
    nats.start_again();
    run.await.unwrap();
    let expected = all_notifications(&*db.store).await;
    assert_eq!(expected.len(), 3600);
    wait_nats(&mut js, expected.len(), 120).await;
    check("nats restarted", &js.got, &expected);
    let failures = failed_passes(&[&a, &b]);
    eprintln!("nats restarted: {failures} failed passes");
    stop.cancel();
}

/// Failed publishing passes on these nodes, all sinks.
fn failed_passes(nodes: &[&ProcessService]) -> u64 {
    nodes
        .iter()
        .flat_map(|n| n.sink_status())
        .map(|s| s.failures)
        .sum()
}

/// Waits (up to 60 s) until `n` more notifications were written: the broker is down while
/// the burst goes on.
async fn grows_by(store: &dyn Store, n: i64) {
    let from = store.notification_last_seq().await.unwrap();
    let t0 = Instant::now();
    while store.notification_last_seq().await.unwrap() < from + n {
        assert!(t0.elapsed() < Duration::from_secs(60), "the burst stopped");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts RabbitMQ's app again if a test stopped it and then failed.
struct StartRabbit;

impl Drop for StartRabbit {
    fn drop(&mut self) {
        let _ = std::process::Command::new("rabbitmqctl")
            .args(["start_app"])
            .output();
    }
}

/// RabbitMQ stopped (`rabbitmqctl stop_app`) in the middle of a burst and started again once
/// 200 more notifications were written: nothing lost, repeats only with the same message id, each process in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rabbitmq_restarted_in_a_burst() {
    let _w = RABBIT_LOCK.write().await;
    let db = store_of("sqlite").await;
    let exchange = format!("docket-test-{}", uuid());
    let mut rabbit = RabbitReader::new(&exchange).await;
    let stop = CancellationToken::new();
    let sink = || vec![rabbit_sink("amqp", &exchange, RABBIT)];
    let a = node(db.store.clone(), "a", sink(), &stop).await;
    let b = node(db.another_node().await, "b", sink(), &stop).await;
    put_ns(&a).await;
    let (a2, b2) = (a.clone(), b.clone());
    let run = tokio::spawn(async move { burst(&a2, &b2, "r", 600, 16).await });
    grows_by(&*db.store, 300).await;
    let guard = StartRabbit;
    let out = std::process::Command::new("rabbitmqctl")
        .arg("stop_app")
        .output()
        .expect("rabbitmqctl");
    assert!(out.status.success(), "stop_app: {out:?}");
    grows_by(&*db.store, 200).await;
    drop(guard);
    run.await.unwrap();
    let expected = all_notifications(&*db.store).await;
    assert_eq!(expected.len(), 3600);
    wait_rabbit(&mut rabbit, expected.len(), 120).await;
    check("rabbitmq restarted", &rabbit.got, &expected);
    let failures = failed_passes(&[&a, &b]);
    assert!(failures > 0, "the sink never saw the broker gone");
    stop.cancel();
    rabbit.delete(&exchange).await;
}

/// Sinks whose broker cannot be reached: every process call answers as without sinks; the
/// notifications wait (backlog), the failures are counted and shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sink_with_a_wrong_address_fails_no_call() {
    for backend in ["pg", "sqlite", "mysql"] {
        let db = store_of(backend).await;
        let stop = CancellationToken::new();
        let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = dead.local_addr().unwrap().port();
        drop(dead);
        let sinks = vec![
            nats_sink("js", &format!("nats://127.0.0.1:{port}")),
            rabbit_sink(
                "amqp",
                "x",
                &format!("amqp://guest:guest@127.0.0.1:{port}/%2f"),
            ),
        ];
        let a = node(db.store.clone(), "a", sinks, &stop).await;
        put_ns(&a).await;
        for i in 0..20 {
            let t0 = Instant::now();
            a.init("ns", &format!("w{i}"), req(1)).await.unwrap();
            a.call("ns", &format!("w{i}"), req(1)).await.unwrap();
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "{backend}: a call waited for a sink"
            );
        }
        let t0 = Instant::now();
        loop {
            let st = a.sink_status();
            let failing = st
                .iter()
                .filter(|s| s.failures > 0 && s.last_error.is_some() && s.delivered_seq == 0)
                .count();
            let waiting = st.iter().filter(|s| s.backlog == 60).count();
            if failing == 2 && waiting == 2 {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "{backend}: sink status {st:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        stop.cancel();
    }
}

/// A message the broker refuses (bigger than its `max_payload`) holds the sink's cursor there —
/// nothing after it is skipped, the failures are counted and shown — and once the broker takes
/// it (the limit raised), delivery goes on from it, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_message_holds_the_sink_until_the_broker_takes_it() {
    let db = store_of("sqlite").await;
    let mut nats = NatsServer::start_with("max_payload: 2048\n");
    let stop = CancellationToken::new();
    let a = node(
        db.store.clone(),
        "a",
        vec![nats_sink("js", &nats.url())],
        &stop,
    )
    .await;
    put_ns(&a).await;
    let big = Request {
        args: json!({"events": 1, "pad": 4096}),
        ..Default::default()
    };
    a.init("ns", "big", big).await.unwrap();
    for i in 0..5 {
        a.init("ns", &format!("small{i}"), req(1)).await.unwrap();
    }
    let expected = all_notifications(&*db.store).await;
    let stuck = expected
        .iter()
        .find(|n| n.process_id == "big" && n.kind == "event")
        .unwrap()
        .seq;
    let t0 = Instant::now();
    loop {
        let st = a.sink_status();
        let s = &st[0];
        assert!(
            s.delivered_seq < stuck,
            "passed a message the broker refused: {s:?}"
        );
        if s.failures >= 2 && s.last_error.is_some() {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "no failure seen: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    nats.kill();
    nats.start_again_with("");
    let mut js = NatsReader::new(nats.url());
    wait_nats(&mut js, expected.len(), 60).await;
    check("refused, then taken", &js.got, &expected);
    stop.cancel();
}

/// Waits (up to `secs`) until `svc` holds sink `sink`'s cursor.
async fn holds(svc: &ProcessService, sink: &str, secs: u64) -> Duration {
    let t0 = Instant::now();
    loop {
        if svc.sink_status().iter().any(|s| s.sink == sink && s.holder) {
            return t0.elapsed();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(secs),
            "never took the cursor: {:?}",
            svc.sink_status()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The cursor changes hands: a node that died (its runtime dropped, nothing released) is
/// replaced once its 30 s lease ran out; a node that stops hands it over at once. Whatever the
/// holder, every notification arrives, in order, and no two nodes ever published at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_cursor_changes_hands_when_its_node_stops_or_dies() {
    let db = store_of("pg").await;
    let nats = NatsServer::start();
    let url = nats.url();
    let log = Arc::new(Publishers::default());
    // Node a on a runtime of its own, so it can die without running its shutdown.
    let (store_a, url_a, log_a) = (db.another_node().await, url.clone(), log.clone());
    let (tx, rx) = std::sync::mpsc::channel();
    let (die, die_rx) = std::sync::mpsc::channel::<()>();
    let a_thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let stop = CancellationToken::new();
            let sink = watched(nats_sink("js", &url_a), "a", &log_a);
            let a = node(store_a, "a", vec![sink], &stop).await;
            put_ns(&a).await;
            holds(&a, "js", 20).await;
            a.init("ns", "before", req(2)).await.unwrap();
            tx.send(()).unwrap();
            // Until the test says die; then the runtime is dropped with its tasks, and `stop`
            // is never cancelled (nothing is handed over).
            tokio::task::spawn_blocking(move || die_rx.recv())
                .await
                .unwrap()
                .ok();
        });
        drop(rt);
    });
    tokio::task::spawn_blocking(move || rx.recv().unwrap())
        .await
        .unwrap();
    let stop_b = CancellationToken::new();
    let sink = watched(nats_sink("js", &url), "b", &log);
    let b = node(db.store.clone(), "b", vec![sink], &stop_b).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        !b.sink_status().iter().any(|s| s.holder),
        "b took a live node's cursor"
    );
    log.check();
    // a dies: b takes over after the lease (30 s) and its next ask (2 s).
    die.send(()).unwrap();
    tokio::task::spawn_blocking(move || a_thread.join().unwrap())
        .await
        .unwrap();
    b.init("ns", "during", req(2)).await.unwrap();
    let took = holds(&b, "js", 45).await;
    eprintln!("b took the dead node's cursor after {took:?}");
    // b stops: c takes over at once.
    let stop_c = CancellationToken::new();
    let sink = watched(nats_sink("js", &url), "c", &log);
    let c = node(db.another_node().await, "c", vec![sink], &stop_c).await;
    stop_b.cancel();
    let took = holds(&c, "js", 10).await;
    assert!(took < Duration::from_secs(5), "handed over in {took:?}");
    c.init("ns", "after", req(2)).await.unwrap();
    let expected = all_notifications(&*db.store).await;
    let mut js = NatsReader::new(url.clone());
    wait_nats(&mut js, expected.len(), 60).await;
    check("changing hands", &js.got, &expected);
    log.check();
    stop_c.cancel();
}

/// A sink added to a namespace with a history starts from the oldest notification still kept:
/// what was written before it existed is published too, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_sink_starts_from_the_oldest_kept_notification() {
    let db = store_of("sqlite").await;
    let nats = NatsServer::start();
    let before = CancellationToken::new();
    let a = node(db.store.clone(), "a", vec![], &before).await;
    put_ns(&a).await;
    for i in 0..10 {
        a.init("ns", &format!("old{i}"), req(2)).await.unwrap();
    }
    before.cancel();
    let stop = CancellationToken::new();
    let b = node(
        db.another_node().await,
        "b",
        vec![nats_sink("js", &nats.url())],
        &stop,
    )
    .await;
    b.init("ns", "new", req(2)).await.unwrap();
    let expected = all_notifications(&*db.store).await;
    assert_eq!(expected.len(), 33);
    let mut js = NatsReader::new(nats.url());
    wait_nats(&mut js, expected.len(), 60).await;
    check("a new sink", &js.got, &expected);
    stop.cancel();
}

/// Task events of the queues a sink asks for reach it — on NATS for one queue, on RabbitMQ for
/// another (a name with `.`, ` ` and `*`, which becomes one subject token), on Kafka for a third
/// (topic `docket.tasks.ev-k`) — each task's in
/// order: enqueued, started, completed; or enqueued, started, retried, started, completed; or
/// enqueued, cancelled. A queue no sink asks for publishes nothing.
async fn task_events_reach_the_brokers(backend: &str) {
    let _r = RABBIT_LOCK.read().await;
    let db = store_of(backend).await;
    let nats = NatsServer::start();
    let exchange = format!("docket-test-{}", uuid());
    let mut rabbit = RabbitReader::new(&exchange).await;
    let kafka = TansuServer::start();
    let (qn, qr, qk) = ("ev", "ev.2 *", "ev-k");
    kafka_topics(&kafka.brokers(), &["docket.tasks.ev-k"], 2).await;
    let js_cfg = SinkConfig {
        name: "js".into(),
        kind: "nats".into(),
        url: nats.url(),
        namespaces: vec![],
        queues: vec![qn.into()],
        subject_prefix: None,
        stream: Some("DOCKET".into()),
        exchange: None,
        ..Default::default()
    };
    let amqp_cfg = SinkConfig {
        name: "amqp".into(),
        kind: "rabbitmq".into(),
        url: RABBIT.into(),
        namespaces: vec![],
        queues: vec![qr.into()],
        subject_prefix: None,
        stream: None,
        exchange: Some(exchange.clone()),
        ..Default::default()
    };
    let kafka_cfg = SinkConfig {
        name: "kafka".into(),
        kind: "kafka".into(),
        url: kafka.url(),
        queues: vec![qk.into()],
        ..Default::default()
    };
    let specs = docket_sinks::build_all(&[js_cfg, amqp_cfg, kafka_cfg]).unwrap();
    let stop = CancellationToken::new();
    let store = db.store.clone();
    let mut cfg = EngineConfig::new("a", store.backend());
    cfg.rescue_interval = Duration::from_millis(200);
    let engine = Engine::new(store.clone(), Arc::new(SystemClock), cfg);
    engine.start(stop.clone()).await.unwrap();
    let svc = ProcessService::new(engine.clone(), stop.clone()).with_sinks(specs);
    svc.start().await.unwrap();
    // The loops arm the triggers when they first take their lease.
    let t0 = Instant::now();
    while svc.sink_status().iter().filter(|s| s.holder).count() < 3 {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "{:?}",
            svc.sink_status()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut want: HashMap<i64, Vec<&str>> = HashMap::new();
    for q in [qn, qr, qk, "plain"] {
        let tasks: Vec<_> = (0..30)
            .map(|i| docket_core::NewTask {
                queue: Some(q.into()),
                ..docket_core::NewTask::new("k", json!(i))
            })
            .collect();
        let tasks = engine.enqueue_many(tasks).await.unwrap();
        // 10 cancelled before they run, 10 failing once, 10 completing.
        for t in &tasks[..10] {
            store
                .task_cancel(docket_store::TaskCancelParams {
                    id: t.id,
                    now: chrono::Utc::now(),
                })
                .await
                .unwrap();
            want.insert(t.id, vec!["enqueued", "cancelled"]);
        }
        let never = CancellationToken::new();
        let c = engine
            .claim(&Claim::new(q, "w", 100), &never)
            .await
            .unwrap();
        assert_eq!(c.len(), 20);
        let (fail, ok): (Vec<_>, Vec<_>) = c.iter().partition(|t| t.payload.as_i64() < Some(20));
        let fails: Vec<_> = fail
            .iter()
            .map(|t| docket_store::TaskFail {
                id: t.id,
                token: t.lease.as_ref().unwrap().token.clone(),
                error: "again".into(),
                retry_in: Some(Duration::ZERO),
                permanent: false,
            })
            .collect();
        engine.fail_many(&fails, None).await.unwrap();
        let done = |ts: &[&docket_core::Task]| -> Vec<docket_store::TaskComplete> {
            ts.iter()
                .map(|t| docket_store::TaskComplete {
                    id: t.id,
                    token: t.lease.as_ref().unwrap().token.clone(),
                    result: json!(null),
                    next: None,
                })
                .collect()
        };
        engine.complete_many(&done(&ok)).await.unwrap();
        let mut again = vec![];
        let t0 = Instant::now();
        while again.len() < 10 {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "retries never came back"
            );
            again.extend(
                engine
                    .claim(
                        &Claim::new(q, "w", 100).wait(Duration::from_millis(500)),
                        &never,
                    )
                    .await
                    .unwrap(),
            );
        }
        engine
            .complete_many(&done(&again.iter().collect::<Vec<_>>()))
            .await
            .unwrap();
        for t in &fail {
            want.insert(
                t.id,
                vec!["enqueued", "started", "retried", "started", "completed"],
            );
        }
        for t in &ok {
            want.insert(t.id, vec!["enqueued", "started", "completed"]);
        }
        if q == "plain" {
            for t in &tasks {
                want.remove(&t.id);
            }
        }
    }
    let events = |got: &[Seen]| -> HashMap<i64, Vec<String>> {
        let mut seen = HashSet::new();
        let mut by: HashMap<i64, Vec<String>> = HashMap::new();
        for s in got {
            if seen.insert(s.id.clone()) {
                let id = s.body["task_id"].as_i64().unwrap();
                by.entry(id)
                    .or_default()
                    .push(s.body["event"].as_str().unwrap().to_string());
            }
        }
        by
    };
    let mut js = NatsReader::new(nats.url());
    let per_queue: usize = want.values().map(Vec::len).sum::<usize>() / 3;
    wait_nats(&mut js, per_queue, 60).await;
    wait_rabbit(&mut rabbit, per_queue, 60).await;
    let mut k = KafkaReader::new(&kafka.brokers(), &["docket.tasks.ev-k"]);
    k.wait(per_queue, 60).await;
    for (name, got, queue) in [
        ("nats", &js.got, qn),
        ("rabbitmq", &rabbit.got, qr),
        ("kafka", &k.got, qk),
    ] {
        let by = events(got);
        assert!(
            got.iter().all(|s| s.body["queue"] == queue),
            "{name}: another queue's event"
        );
        let mut n = 0;
        for (id, w) in &want {
            let Some(g) = by.get(id) else { continue };
            assert_eq!(g, w, "{backend}/{name}: task {id}");
            n += 1;
        }
        assert_eq!(n, 30, "{backend}/{name}: tasks seen {by:?}");
    }
    assert!(
        db.store
            .task_event_list(docket_store::TaskEventListParams {
                queue: "plain",
                limit: 10
            })
            .await
            .unwrap()
            .is_empty(),
        "a queue no sink asks for writes no events"
    );
    stop.cancel();
    rabbit.delete(&exchange).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn task_events_reach_the_brokers_postgres() {
    task_events_reach_the_brokers("pg").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn task_events_reach_the_brokers_sqlite() {
    task_events_reach_the_brokers("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn task_events_reach_the_brokers_mysql() {
    task_events_reach_the_brokers("mysql").await;
}

/// A durable function's run reaches a sink through its task's events (issue 41), each message
/// naming the run and what happened to it: started, running, suspended (a sleep), running,
/// suspended (a wait), running, completed; a run whose function fails ends `failed`, one
/// cancelled while it waits `cancelled`.
async fn workflow_runs_reach_the_broker(backend: &str) {
    use docket_engine::durable_fn::{WorkflowContext, WorkflowError};
    use docket_engine::worker::{WorkerConfig, WorkerPool};
    let db = store_of(backend).await;
    let nats = NatsServer::start();
    let cfg = SinkConfig {
        name: "js".into(),
        kind: "nats".into(),
        url: nats.url(),
        namespaces: vec![],
        queues: vec!["workflows".into()],
        subject_prefix: None,
        stream: Some("DOCKET".into()),
        exchange: None,
        ..Default::default()
    };
    let specs = docket_sinks::build_all(&[cfg]).unwrap();
    let stop = CancellationToken::new();
    let store = db.store.clone();
    let mut ecfg = EngineConfig::new("a", store.backend());
    ecfg.rescue_interval = Duration::from_millis(200);
    let engine = Engine::new(store.clone(), Arc::new(SystemClock), ecfg);
    engine.start(stop.clone()).await.unwrap();
    let svc = ProcessService::new(engine.clone(), stop.clone()).with_sinks(specs);
    svc.start().await.unwrap();
    let t0 = Instant::now();
    while !svc.sink_status().iter().any(|s| s.holder) {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "{:?}",
            svc.sink_status()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let flow = |ctx: WorkflowContext, input: Value| async move {
        ctx.step("a", || async { Ok::<_, String>(1) }).await?;
        if input == "fail" {
            return Err(WorkflowError::msg("no"));
        }
        ctx.sleep(Duration::from_millis(300)).await?;
        ctx.wait_for_event("go", None).await?;
        Ok(json!("ok"))
    };
    let worker = tokio::spawn(
        WorkerPool::new(engine.clone(), WorkerConfig::new("workflows"))
            .workflow("flow", flow)
            .run(stop.clone()),
    );
    let start = |id: &str, input: Value| docket_core::durable::StartRequest {
        workflow: "flow".into(),
        input,
        id: Some(id.into()),
        ..Default::default()
    };
    for (id, input) in [
        ("ok", json!(null)),
        ("bad", json!("fail")),
        ("gone", json!(null)),
    ] {
        engine.run_start(start(id, input)).await.unwrap();
    }
    let waiting = |id: &'static str| {
        let engine = engine.clone();
        async move {
            let t0 = Instant::now();
            loop {
                let r = engine.run_get(id).await.unwrap().unwrap();
                if r.state == docket_core::durable::RunState::Waiting {
                    return;
                }
                assert!(t0.elapsed() < Duration::from_secs(60), "{id}: {r:?}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    waiting("ok").await;
    waiting("gone").await;
    let go = docket_core::durable::EventRequest {
        name: "go".into(),
        payload: json!(null),
    };
    engine.run_send("ok", go).await.unwrap();
    engine.run_cancel("gone").await.unwrap();
    for id in ["ok", "bad"] {
        let r = engine
            .run_result(id, Duration::from_secs(60))
            .await
            .unwrap()
            .unwrap();
        assert!(r.state.is_finished(), "{r:?}");
    }
    let want: HashMap<&str, Vec<&str>> = HashMap::from([
        (
            "ok",
            vec![
                "started",
                "running",
                "suspended",
                "running",
                "suspended",
                "running",
                "completed",
            ],
        ),
        ("bad", vec!["started", "running", "failed"]),
        (
            "gone",
            vec![
                "started",
                "running",
                "suspended",
                "running",
                "suspended",
                "cancelled",
            ],
        ),
    ]);
    let mut js = NatsReader::new(nats.url());
    wait_nats(&mut js, want.values().map(Vec::len).sum(), 60).await;
    let mut seen = HashSet::new();
    let mut by: HashMap<String, Vec<String>> = HashMap::new();
    for s in &js.got {
        if seen.insert(s.id.clone()) {
            assert_eq!(s.body["workflow"], "flow", "{}", s.body);
            by.entry(s.body["workflow_run"].as_str().unwrap().to_string())
                .or_default()
                .push(s.body["run_event"].as_str().unwrap().to_string());
        }
    }
    for (id, w) in &want {
        assert_eq!(
            by.get(*id),
            Some(&w.iter().map(|s| s.to_string()).collect()),
            "{backend}: run {id}"
        );
    }
    stop.cancel();
    worker.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workflow_runs_reach_the_broker_postgres() {
    workflow_runs_reach_the_broker("pg").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workflow_runs_reach_the_broker_sqlite() {
    workflow_runs_reach_the_broker("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workflow_runs_reach_the_broker_mysql() {
    workflow_runs_reach_the_broker("mysql").await;
}

// ---- Kafka (a private tansu broker per test) ----

/// Topics `names` made with `partitions` partitions each, through the Kafka admin API.
async fn kafka_topics(brokers: &str, names: &[&str], partitions: i32) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let admin: AdminClient<rdkafka::client::DefaultClientContext> =
        rdkafka::config::ClientConfig::new()
            .set("bootstrap.servers", brokers)
            .create()
            .unwrap();
    let topics: Vec<_> = names
        .iter()
        .map(|n| NewTopic::new(n, partitions, TopicReplication::Fixed(1)))
        .collect();
    for r in admin
        .create_topics(&topics, &AdminOptions::new())
        .await
        .unwrap()
    {
        r.unwrap_or_else(|(t, e)| panic!("creating topic {t}: {e}"));
    }
}

fn kafka_sink(name: &str, url: &str, tune: impl FnOnce(&mut SinkConfig)) -> SinkSpec {
    let mut c = SinkConfig {
        name: name.into(),
        kind: "kafka".into(),
        url: url.into(),
        namespaces: vec!["ns".into()],
        ..Default::default()
    };
    tune(&mut c);
    c.build().unwrap()
}

/// Reads Kafka through a consumer group (examples/consume_kafka.rs) on a blocking thread.
struct KafkaReader {
    reader: Arc<consume_kafka::Reader>,
    got: Vec<Seen>,
    /// (topic, partition, key) of every message read.
    placed: Vec<(String, i32, String)>,
}

impl KafkaReader {
    fn new(brokers: &str, topics: &[&str]) -> KafkaReader {
        let group = format!("test-{}", uuid());
        KafkaReader {
            reader: Arc::new(consume_kafka::Reader::new(brokers, &group, topics).unwrap()),
            got: vec![],
            placed: vec![],
        }
    }

    async fn read(&mut self) {
        let r = self.reader.clone();
        let batch =
            tokio::task::spawn_blocking(move || r.next_batch(2000, Duration::from_millis(300)))
                .await
                .unwrap();
        // A broker being restarted answers with errors for a while: read again later.
        for m in batch.unwrap_or_default() {
            self.placed.push((m.topic, m.partition, m.key.clone()));
            self.got.push(seen(m.id, m.key, m.body));
        }
    }

    async fn wait(&mut self, want: usize, secs: u64) {
        let t0 = Instant::now();
        while distinct(&self.got) < want && t0.elapsed() < Duration::from_secs(secs) {
            self.read().await;
        }
    }

    /// [`check`] per topic: Kafka keeps order within a partition, and a process's events and
    /// its lifecycle are two topics (as progressor writes them), read interleaved.
    fn check(&self, name: &str, expected: &[docket_core::process::Notification]) {
        let is_event = |s: &Seen| s.body["kind"] == "event";
        for (part, events) in [("events", true), ("lifecycle", false)] {
            let got: Vec<Seen> = self
                .got
                .iter()
                .filter(|s| is_event(s) == events)
                .cloned()
                .collect();
            let want: Vec<_> = expected
                .iter()
                .filter(|n| (n.kind == "event") == events)
                .cloned()
                .collect();
            check(&format!("{name} {part}"), &got, &want);
        }
    }
}

/// 1,000 processes × 5 events (+ `created`) through two nodes to Kafka on PostgreSQL: every
/// notification read back by a consumer group, each process's in order, events and lifecycle in
/// their own topics, and each key in the partition progressor's `erlang:phash2(Key) rem 3`
/// names (that function is checked against a real `erl` in `phash2_is_erlangs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kafka_thousand_processes_on_two_nodes() {
    let db = store_of("pg").await;
    let kafka = TansuServer::start();
    let (events, lifecycle) = ("docket.events.ns", "docket.lifecycle.ns");
    kafka_topics(&kafka.brokers(), &[events, lifecycle], 3).await;
    let stop = CancellationToken::new();
    let log = Arc::new(Publishers::default());
    let sink = |node: &str| vec![watched(kafka_sink("k", &kafka.url(), |_| {}), node, &log)];
    let a = node(db.store.clone(), "a", sink("a"), &stop).await;
    let b = node(db.another_node().await, "b", sink("b"), &stop).await;
    put_ns(&a).await;
    let t0 = Instant::now();
    burst(&a, &b, "p", 1000, 32).await;
    let stepped = t0.elapsed();
    log.check();
    let expected = all_notifications(&*db.store).await;
    assert_eq!(expected.len(), 6000);
    let mut k = KafkaReader::new(&kafka.brokers(), &[events, lifecycle]);
    k.wait(expected.len(), 120).await;
    eprintln!(
        "kafka: stepped in {stepped:?}, read back {:?} after",
        t0.elapsed() - stepped
    );
    k.check("kafka", &expected);
    let mut partitions = HashSet::new();
    for ((topic, partition, key), s) in k.placed.iter().zip(&k.got) {
        let want = if s.body["kind"] == "event" {
            events
        } else {
            lifecycle
        };
        assert_eq!(topic, want, "{}", s.id);
        assert_eq!(
            *partition,
            docket_sinks::kafka::partition_of(key, 3),
            "{key}"
        );
        partitions.insert(*partition);
    }
    assert_eq!(partitions.len(), 3, "keys spread over the partitions");
    stop.cancel();
}

/// The broker killed (SIGKILL) in the middle of a burst of 600 processes on MariaDB and started
/// again on its store once 200 more notifications were written and 12 s passed (so deliveries
/// failed, not only waited): nothing lost, each process in order, repeats only with their id.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kafka_restarted_in_a_burst() {
    let db = store_of("mysql").await;
    let mut kafka = TansuServer::start();
    let (events, lifecycle) = ("docket.events.ns", "docket.lifecycle.ns");
    kafka_topics(&kafka.brokers(), &[events, lifecycle], 2).await;
    let stop = CancellationToken::new();
    let sink = || {
        vec![kafka_sink("k", &kafka.url(), |c| {
            c.idempotence = Some(false)
        })]
    };
    let a = node(db.store.clone(), "a", sink(), &stop).await;
    let b = node(db.another_node().await, "b", sink(), &stop).await;
    put_ns(&a).await;
    let (a2, b2) = (a.clone(), b.clone());
    let run = tokio::spawn(async move { burst(&a2, &b2, "r", 600, 16).await });
    grows_by(&*db.store, 300).await;
    kafka.kill();
    let down = Instant::now();
    grows_by(&*db.store, 200).await;
    // Down past librdkafka's message timeout (10 s): its own retries give up, and the
    // engine's sink sees the failures and publishes again.
    tokio::time::sleep(Duration::from_secs(12).saturating_sub(down.elapsed())).await;
    let held = [&a, &b]
        .iter()
        .flat_map(|n| n.sink_status())
        .map(|s| s.delivered_seq)
        .max()
        .unwrap_or(0);
    let written = db.store.notification_last_seq().await.unwrap();
    assert!(
        held < written,
        "delivered {held} of {written} with the broker down"
    );
    kafka.start_again();
    run.await.unwrap();
    let expected = all_notifications(&*db.store).await;
    assert_eq!(expected.len(), 3600);
    let mut k = KafkaReader::new(&kafka.brokers(), &[events, lifecycle]);
    k.wait(expected.len(), 180).await;
    if distinct(&k.got) < expected.len() {
        eprintln!("tansu's log:\n{}", kafka.log());
    }
    k.check("kafka restarted", &expected);
    let failures = failed_passes(&[&a, &b]);
    assert!(failures > 0, "the sink never saw the broker gone");
    stop.cancel();
}

/// progressor's own topic names (`topics`), Kafka's default partitioner (`murmur2`), and task
/// events of a queue, on SQLite: every message in its named topic, each key in one partition.
/// A topic that does not exist yet holds its messages until it is made.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kafka_named_topics_and_kafkas_partitioner() {
    let db = store_of("sqlite").await;
    let kafka = TansuServer::start();
    let (events, lifecycle) = ("default_topic", "default_lifecycle_topic");
    let spec = kafka_sink("k", &kafka.url(), |c| {
        c.partitioner = Some("murmur2".into());
        c.topics.insert(
            "ns".into(),
            docket_sinks::kafka::NamespaceTopics {
                topic: events.into(),
                lifecycle_topic: lifecycle.into(),
                namespace: None,
            },
        );
    });
    let stop = CancellationToken::new();
    let a = node(db.store.clone(), "a", vec![spec], &stop).await;
    put_ns(&a).await;
    for i in 0..50 {
        a.init("ns", &format!("m{i}"), req(2)).await.unwrap();
    }
    // No topic yet: nothing is delivered, and nothing is skipped.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        a.sink_status().iter().all(|s| s.delivered_seq == 0),
        "{:?}",
        a.sink_status()
    );
    kafka_topics(&kafka.brokers(), &[events, lifecycle], 4).await;
    let expected = all_notifications(&*db.store).await;
    assert_eq!(expected.len(), 150);
    let mut k = KafkaReader::new(&kafka.brokers(), &[events, lifecycle]);
    k.wait(expected.len(), 120).await;
    k.check("kafka murmur2", &expected);
    let mut part_of_key: HashMap<&str, i32> = HashMap::new();
    for ((topic, partition, key), s) in k.placed.iter().zip(&k.got) {
        let want = if s.body["kind"] == "event" {
            events
        } else {
            lifecycle
        };
        assert_eq!(topic, want);
        if topic == events {
            let p = part_of_key.entry(key).or_insert(*partition);
            assert_eq!(p, partition, "{key}: one partition per key");
        }
    }
    let used: HashSet<_> = part_of_key.values().collect();
    assert!(used.len() > 1, "50 keys in one partition: {used:?}");
    stop.cancel();
}

/// `partition_of` is progressor's `erlang:phash2(Key) rem N`, computed by a real Erlang node
/// for keys of every length up to 40 bytes, UTF-8, a NUL byte and 1,000 bytes.
#[test]
fn phash2_is_erlangs() {
    let mut keys: Vec<String> = (0..=40).map(|n| "k".repeat(n)).collect();
    keys.extend(
        [
            "ns id",
            "orders 42",
            "заказы 7",
            "订单 9",
            "a\u{0}b",
            "default/default x",
        ]
        .map(String::from),
    );
    keys.push(
        (0..1000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect(),
    );
    let list: Vec<String> = keys
        .iter()
        .map(|k| {
            let bytes: Vec<String> = k.bytes().map(|b| b.to_string()).collect();
            format!("<<{}>>", bytes.join(","))
        })
        .collect();
    let expr = format!(
        "[io:format(\"~p~n\", [erlang:phash2(B)]) || B <- [{}]], halt().",
        list.join(",")
    );
    let got: Vec<u32> = erl_lines(&expr)
        .iter()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(got.len(), keys.len());
    for (k, want) in keys.iter().zip(got) {
        assert_eq!(
            docket_sinks::kafka::phash2_binary(k.as_bytes()),
            want,
            "{k:?}"
        );
        for n in [1, 3, 7, 64] {
            assert_eq!(
                docket_sinks::kafka::partition_of(k, n),
                i32::try_from(want % n as u32).unwrap()
            );
        }
    }
}

/// The Python interpreter with Apache Thrift's library (`scripts/test.sh` makes a venv with
/// PyPI's `thrift` under target/py-thrift and sets `DOCKET_TEST_THRIFT_PYTHON`).
fn thrift_python() -> String {
    std::env::var("DOCKET_TEST_THRIFT_PYTHON").unwrap_or_else(|_| {
        format!(
            "{}/../../target/py-thrift/bin/python",
            env!("CARGO_MANIFEST_DIR")
        )
    })
}

/// `(kind, bytes)` read by Thrift's Python library (tests/mg_proto_check.py): each decoded as
/// JSON, after checking that writing it again gives the same bytes.
fn thrift_read(msgs: &[(&str, Vec<u8>)]) -> Vec<Value> {
    use std::io::Write;
    let mut child = std::process::Command::new(thrift_python())
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/mg_proto_check.py"
        ))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python with thrift (scripts/test.sh makes target/py-thrift)");
    let mut input = String::new();
    for (kind, bytes) in msgs {
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        input.push_str(&json!({"kind": kind, "hex": hex}).to_string());
        input.push('\n');
    }
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The lines a real Erlang node prints evaluating `expr` (which ends with `halt().`).
fn erl_lines(expr: &str) -> Vec<String> {
    let out = std::process::Command::new("erl")
        .args(["-noshell", "-eval", expr])
        .output()
        .expect("erl (Erlang/OTP; scripts/test.sh installs erlang-nox)");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// `term_to_binary` of each Erlang term, by a real Erlang node.
fn erlang_terms(terms: &[&str]) -> Vec<Vec<u8>> {
    let expr = format!(
        "[io:format(\"~s~n\", [binary:encode_hex(term_to_binary(T))]) || T <- [{}]], halt().",
        terms.join(",")
    );
    erl_lines(&expr)
        .iter()
        .map(|l| {
            (0..l.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&l[i..i + 2], 16).unwrap())
                .collect()
        })
        .collect()
}

/// progressor's encoding (`format = "mg_proto"`): docket's messages, written as machinegun-proto
/// `SinkEvent`s and `LifecycleEvent`s, are read by Apache Thrift's own library, which writes the
/// same bytes again; payloads an Erlang node made with `term_to_binary` (as progressor's echo
/// processor does) arrive as the `mg_msgpack` values `binary_to_term` gives, JSON payloads as
/// the matching values, map keys in order; lifecycle changes carry progressor's statuses.
#[test]
fn mg_proto_is_what_thrift_reads_and_writes() {
    use base64::Engine as _;
    let terms = erlang_terms(&[
        "{bin, <<1,2,3,255>>}",
        "{obj, #{{str, <<\"b\">>} => {i, 1}, {str, <<\"a\">>} => {arr, [{nl, {mg_msgpack_Nil}}, \
         {b, true}, {flt, 1.5}, {i, -5}, {i, 1 bsl 40}]}, {str, <<\"c\">>} => {str, <<\"привет\"/utf8>>}}}",
    ]);
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let event = |payload: Value, metadata: Value| {
        json!({"kind": "event", "namespace": "orders", "process_id": "o-1", "event_id": 7,
               "timestamp": "2026-11-29T10:00:00.123456Z", "created_at": "2026-11-29T10:00:01Z",
               "metadata": metadata, "payload": payload})
    };
    let life = |kind: &str, reason: Value| {
        json!({"kind": kind, "namespace": "orders", "process_id": "o-1",
               "created_at": "2026-11-29T10:00:01.9Z", "reason": reason})
    };
    let bodies = [
        event(
            json!({"$bin": b64(&terms[0])}),
            json!({"format_version": 1}),
        ),
        event(json!({"$bin": b64(&terms[1])}), json!({})),
        event(
            json!({"z": [1, 2.5, null, true, "x"], "a": {}}),
            json!({"format_version": 2}),
        ),
        life("created", Value::Null),
        life("failed", json!("boom")),
        life("repaired", Value::Null),
        life("removed", Value::Null),
    ];
    let encoded: Vec<(&str, Vec<u8>)> = bodies
        .iter()
        .map(|b| {
            let kind = if b["kind"] == "event" {
                "event"
            } else {
                "lifecycle"
            };
            (kind, docket_sinks::mg_proto::encode(b).unwrap())
        })
        .collect();
    let got = thrift_read(&encoded);
    let str_ = |s: &str| json!({"str": s});
    let ev = |data: Value, version: Option<i64>| {
        let mut e = json!({"source_ns": "orders", "source_id": "o-1", "event_id": 7,
                           "created_at": "2026-11-29T10:00:00Z", "data": data});
        if let Some(v) = version {
            e["format_version"] = json!(v);
        }
        json!({"event": e})
    };
    assert_eq!(got[0], ev(json!({"bin": {"hex": "010203ff"}}), Some(1)));
    assert_eq!(
        got[1],
        ev(
            json!({"obj": [
                [str_("a"), {"arr": [{"nl": {}}, {"b": true}, {"flt": 1.5}, {"i": -5}, {"i": 1_i64 << 40}]}],
                [str_("b"), {"i": 1}],
                [str_("c"), str_("привет")],
            ]}),
            None
        )
    );
    assert_eq!(
        got[2],
        ev(
            json!({"obj": [
                [str_("a"), {"obj": []}],
                [str_("z"), {"arr": [{"i": 1}, {"flt": 2.5}, {"nl": {}}, {"b": true}, str_("x")]}],
            ]}),
            Some(2)
        )
    );
    let lc = |data: Value| {
        json!({"machine_ns": "orders", "machine_id": "o-1", "created_at": "2026-11-29T10:00:01Z",
               "data": {"machine": data}})
    };
    assert_eq!(got[3], lc(json!({"created": {}})));
    assert_eq!(
        got[4],
        lc(json!({"status_changed": {"new_status": {"failed": {"reason": "boom"}}}}))
    );
    assert_eq!(
        got[5],
        lc(json!({"status_changed": {"new_status": {"working": {}}}}))
    );
    assert_eq!(got[6], lc(json!({"removed": {}})));
    // What cannot be encoded is refused with its reason, not sent half-made.
    let bad = |p: Value| docket_sinks::mg_proto::encode(&event(p, json!({}))).unwrap_err();
    assert!(bad(json!({"$bin": "!!"})).contains("not base64"));
    assert!(bad(json!({"$bin": b64(b"\x83\xff\x00")})).contains("not an Erlang term"));
    let not_msgpack = erlang_terms(&["{tuple, three, elements}"]);
    assert!(bad(json!({"$bin": b64(&not_msgpack[0])})).contains("not an mg_msgpack value"));
    let task = json!({"kind": "emails", "event": "completed"});
    assert!(docket_sinks::mg_proto::encode(&task).is_err());
}

/// `format = "mg_proto"` through a real broker: 20 processes with 2 events each on SQLite; the
/// raw messages read from Kafka decode with Thrift's own library as 40 `SinkEvent`s (each
/// process's event ids ascending, its payload the JSON the processor returned as `mg_msgpack`)
/// and 20 `LifecycleEvent`s `created`. Namespace `ns` carries progressor's name `default/ns`
/// (`topics.ns.namespace`): every key is `"default/ns <id>"`, in the partition phash2 gives it,
/// and `source_ns` / `machine_ns` are `default/ns`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kafka_mg_proto_messages_read_by_thrift() {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::Message as _;
    let db = store_of("sqlite").await;
    let kafka = TansuServer::start();
    let (events, lifecycle) = ("docket.events.ns", "docket.lifecycle.ns");
    kafka_topics(&kafka.brokers(), &[events, lifecycle], 2).await;
    let stop = CancellationToken::new();
    let spec = kafka_sink("k", &kafka.url(), |c| {
        c.format = Some("mg_proto".into());
        c.topics.insert(
            "ns".into(),
            docket_sinks::kafka::NamespaceTopics {
                topic: events.into(),
                lifecycle_topic: lifecycle.into(),
                namespace: Some("default/ns".into()),
            },
        );
    });
    let a = node(db.store.clone(), "a", vec![spec], &stop).await;
    put_ns(&a).await;
    for i in 0..20 {
        a.init("ns", &format!("t{i}"), req(2)).await.unwrap();
    }
    let brokers = kafka.brokers();
    let raw = tokio::task::spawn_blocking(move || {
        let c: BaseConsumer = rdkafka::config::ClientConfig::new()
            .set("bootstrap.servers", &brokers)
            .set("group.id", format!("raw-{}", uuid()))
            .set("auto.offset.reset", "earliest")
            .create()
            .unwrap();
        c.subscribe(&[events, lifecycle]).unwrap();
        let mut got = vec![];
        let t0 = Instant::now();
        while got.len() < 60 && t0.elapsed() < Duration::from_secs(120) {
            if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
                got.push((
                    m.topic().to_string(),
                    String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned(),
                    m.payload().unwrap_or_default().to_vec(),
                    m.partition(),
                ));
            }
        }
        got
    })
    .await
    .unwrap();
    assert_eq!(raw.len(), 60, "messages read");
    let msgs: Vec<(&str, Vec<u8>)> = raw
        .iter()
        .map(|(t, _, b, _)| {
            let kind = if t == events { "event" } else { "lifecycle" };
            (kind, b.clone())
        })
        .collect();
    let decoded = thrift_read(&msgs);
    let mut last: HashMap<String, i64> = HashMap::new();
    let mut created = 0;
    for ((topic, key, _, partition), d) in raw.iter().zip(&decoded) {
        // progressor's namespace name (`topics.ns.namespace`): its key, so its partition.
        assert_eq!(
            *partition,
            docket_sinks::kafka::partition_of(key, 2),
            "{key}"
        );
        if topic == events {
            let e = &d["event"];
            assert_eq!(e["source_ns"], "default/ns");
            let id = e["source_id"].as_str().unwrap().to_string();
            assert_eq!(key, &format!("default/ns {id}"));
            let n = e["event_id"].as_i64().unwrap();
            assert!(last.insert(id, n).unwrap_or(0) < n, "event ids ascend");
            let fields: Vec<&str> = e["data"]["obj"]
                .as_array()
                .unwrap()
                .iter()
                .map(|kv| kv[0]["str"].as_str().unwrap())
                .collect();
            assert_eq!(fields, ["i", "pad", "step"], "{d}");
        } else {
            assert_eq!(d["data"]["machine"], json!({"created": {}}), "{d}");
            assert_eq!(d["machine_ns"], "default/ns");
            assert_eq!(
                key,
                &format!("default/ns {}", d["machine_id"].as_str().unwrap())
            );
            created += 1;
        }
    }
    assert_eq!((last.len(), created), (20, 20));
    stop.cancel();
}
