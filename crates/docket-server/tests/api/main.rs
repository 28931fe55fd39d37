//! The HTTP API against real PostgreSQL (own schema per test), MariaDB/MySQL (own database per
//! test) and real SQLite files.

use docket_core::SystemClock;
use docket_engine::{Engine, EngineConfig};
use docket_server::AppState;
use docket_store::{connect, ConnectOptions, Store};
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

struct Node {
    base: String,
    http: reqwest::Client,
    store: Arc<dyn Store>,
    stop: CancellationToken,
    _dir: Option<tempfile::TempDir>,
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

fn pg_url() -> String {
    std::env::var("DOCKET_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

async fn start(
    store: Arc<dyn Store>,
    name: &str,
    poll: Duration,
    dir: Option<tempfile::TempDir>,
) -> Node {
    start_clocked(store, name, poll, dir, Arc::new(SystemClock)).await
}

async fn start_clocked(
    store: Arc<dyn Store>,
    name: &str,
    poll: Duration,
    dir: Option<tempfile::TempDir>,
    clock: Arc<dyn docket_core::Clock>,
) -> Node {
    store.migrate().await.unwrap();
    let mut cfg = EngineConfig::new(name, store.backend());
    cfg.rescue_interval = Duration::from_millis(100);
    cfg.poll_interval = poll;
    let engine = Engine::new(store.clone(), clock, cfg);
    let stop = CancellationToken::new();
    engine.start(stop.clone()).await.unwrap();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(docket_server::serve(l, AppState::new(engine, stop.clone())));
    Node {
        base,
        http: reqwest::Client::new(),
        store,
        stop,
        _dir: dir,
    }
}

async fn pg_store(schema: &str) -> Arc<dyn Store> {
    connect(&ConnectOptions {
        url: pg_url(),
        schema: Some(schema.into()),
        max_connections: Some(8),
        strict_commit: false,
    })
    .await
    .expect("PostgreSQL is running (scripts/test.sh starts it)")
}

async fn pg() -> Node {
    let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
    start(pg_store(&schema).await, "n1", Duration::from_secs(1), None).await
}

async fn mysql() -> Node {
    // The database outlives the TestStore value (scripts/test.sh drops what runs leave).
    let t = docket_store::testing::TestStore::mysql().await;
    start(t.store.clone(), "n1", Duration::from_millis(200), None).await
}

async fn sqlite() -> Node {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let store = connect(&ConnectOptions::new(url)).await.unwrap();
    start(store, "n1", Duration::from_millis(200), Some(dir)).await
}

impl Node {
    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut r = self.http.request(m, format!("{}{}", self.base, path));
        if let Some(b) = body {
            r = r.json(&b);
        }
        let resp = r.send().await.unwrap();
        let st = resp.status();
        (st, resp.json().await.unwrap_or(Value::Null))
    }

    async fn raw(&self, method: &str, path: &str, body: &str) -> (StatusCode, Value) {
        let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let resp = self
            .http
            .request(m, format!("{}{}", self.base, path))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let st = resp.status();
        (st, resp.json().await.unwrap_or(Value::Null))
    }

    async fn claim(&self, queue: &str, body: Value) -> Vec<Value> {
        let (st, v) = self
            .call("POST", &format!("/v1/queues/{queue}/claim"), Some(body))
            .await;
        assert_eq!(st, StatusCode::OK, "{v}");
        v["tasks"].as_array().unwrap().clone()
    }

    async fn patch(&self, id: i64, body: Value) -> (StatusCode, Value) {
        self.call("PATCH", &format!("/v1/tasks/{id}"), Some(body))
            .await
    }

    /// The text of a page (the dashboard's, `/metrics`).
    async fn page(&self, path: &str) -> String {
        self.http
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    async fn task(&self, id: i64) -> Value {
        let (st, v) = self.call("GET", &format!("/v1/tasks/{id}"), None).await;
        assert_eq!(st, StatusCode::OK, "{v}");
        v
    }
}

fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("<none>")
}

macro_rules! both {
    ($($name:ident),* $(,)?) => {
        mod pg { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name(super::pg().await).await; } )* }
        mod sqlite { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name(super::sqlite().await).await; } )* }
        mod mysql { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name(super::mysql().await).await; } )* }
    };
}

mod batches;
mod bulk;
mod claims;
mod input;
mod processes;
mod rate_limits;
mod server;
mod tasks;
mod workflow_runs;
mod workflows;
