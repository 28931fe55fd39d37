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

    async fn task(&self, id: i64) -> Value {
        let (st, v) = self.call("GET", &format!("/v1/tasks/{id}"), None).await;
        assert_eq!(st, StatusCode::OK, "{v}");
        v
    }
}

fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("<none>")
}

async fn lifecycle(n: Node) {
    let (st, t) = n
        .call(
            "POST",
            "/v1/tasks",
            Some(json!({"kind": "email", "payload": {"to": "a@b.c"}, "priority": 3})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{t}");
    assert_eq!(t["state"], "available");
    assert_eq!(t["inserted"], true);
    assert_eq!(t["timeout"], "1m");
    let id = t["id"].as_i64().unwrap();
    let (st, many) = n
        .call("POST", "/v1/tasks", Some(json!({"tasks": [
            {"kind": "a", "unique_key": "u1"}, {"kind": "b", "run_in": "1h"}, {"kind": "a2", "unique_key": "u1"}]})))
        .await;
    assert_eq!(st, StatusCode::CREATED, "{many}");
    let many = many["tasks"].as_array().unwrap();
    assert_eq!(many.len(), 3);
    assert_eq!(many[1]["state"], "scheduled");
    assert_eq!(many[2]["inserted"], false);
    assert_eq!(many[2]["id"], many[0]["id"]);
    let got = n
        .claim(
            "default",
            json!({"worker": "w", "limit": 10, "lease": "30s"}),
        )
        .await;
    assert_eq!(got.len(), 2);
    assert_eq!(got[0]["id"], id, "priority 3 first");
    let lease = got[0]["lease"]["token"].as_str().unwrap().to_string();
    let other = got[1]["lease"]["token"].as_str().unwrap().to_string();
    let (st, hb) = n
        .call(
            "POST",
            &format!("/v1/tasks/{id}/heartbeat"),
            Some(json!({"lease": lease, "progress": {"pct": 10}})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{hb}");
    assert_eq!(hb["progress"], json!({"pct": 10}));
    // Stale token: 409 lease_lost, and nothing changes.
    let (st, e) = n
        .call(
            "POST",
            &format!("/v1/tasks/{id}/complete"),
            Some(json!({"lease": other, "result": "x"})),
        )
        .await;
    assert_eq!((st, code(&e)), (StatusCode::CONFLICT, "lease_lost"));
    let (st, e) = n
        .call(
            "POST",
            &format!("/v1/tasks/{id}/heartbeat"),
            Some(json!({"lease": "bogus"})),
        )
        .await;
    assert_eq!((st, code(&e)), (StatusCode::CONFLICT, "lease_lost"));
    assert_eq!(n.task(id).await["state"], "running");
    let (st, ok) = n
        .call(
            "POST",
            &format!("/v1/tasks/{id}/complete"),
            Some(json!({"lease": lease, "result": {"sent": true}})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{ok}");
    assert_eq!(ok["state"], "completed");
    let t = n.task(id).await;
    assert_eq!(t["result"], json!({"sent": true}));
    assert!(t["finished_at"].is_string());
    // Fail with a requested delay, then fail permanently.
    let other_id = got[1]["id"].as_i64().unwrap();
    let (st, f) = n
        .call(
            "POST",
            &format!("/v1/tasks/{other_id}/fail"),
            Some(json!({"lease": other, "error": "smtp down", "retry_in": "1h"})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{f}");
    assert_eq!(f["state"], "retryable");
    let t = n.task(other_id).await;
    assert_eq!(t["errors"][0]["message"], "smtp down");
    // The list filters and pages.
    let (_, l) = n.call("GET", "/v1/tasks?state=completed", None).await;
    assert_eq!(l["tasks"].as_array().unwrap().len(), 1);
    // Several states at once; a filter naming no known state matches nothing.
    let (_, l) = n
        .call("GET", "/v1/tasks?state=completed,retryable", None)
        .await;
    let mut states: Vec<&str> = l["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["state"].as_str().unwrap())
        .collect();
    states.sort();
    assert_eq!(states, vec!["completed", "retryable"], "{l}");
    let (st, l) = n.call("GET", "/v1/tasks?state=pending", None).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(l["tasks"], json!([]), "{l}");
    // ... but the other parameters are still checked.
    let (st, l) = n
        .call("GET", "/v1/tasks?state=pending&order=sideways", None)
        .await;
    assert_eq!((st, code(&l)), (StatusCode::BAD_REQUEST, "invalid_request"));
    let (_, l) = n.call("GET", "/v1/tasks?limit=2", None).await;
    assert_eq!(l["tasks"].as_array().unwrap().len(), 2);
    let after = l["next_after"].as_i64().unwrap();
    let (_, l2) = n
        .call("GET", &format!("/v1/tasks?limit=2&after={after}"), None)
        .await;
    assert_eq!(l2["tasks"].as_array().unwrap().len(), 1);
    let (_, q) = n.call("GET", "/v1/queues", None).await;
    assert_eq!(q["queues"][0]["counts"]["completed"], 1);
    assert_eq!(q["queues"][0]["counts"]["scheduled"], 1);
    let (st, h) = n.call("GET", "/healthz", None).await;
    assert_eq!((st, h["status"].as_str()), (StatusCode::OK, Some("ok")));
}

async fn batch_complete_and_fail(n: Node) {
    let specs: Vec<Value> = (0..300)
        .map(|i| json!({"kind": "k", "payload": i, "max_attempts": 1}))
        .collect();
    let (st, _) = n
        .call("POST", "/v1/tasks", Some(json!({"tasks": specs})))
        .await;
    assert_eq!(st, StatusCode::CREATED);
    let got = n
        .claim("default", json!({"worker": "w", "limit": 300}))
        .await;
    assert_eq!(got.len(), 300);
    let items: Vec<Value> = got[..250]
        .iter()
        .map(|t| json!({"id": t["id"], "lease": t["lease"]["token"], "result": t["payload"]}))
        .collect();
    let mut with_stale = items.clone();
    with_stale.push(json!({"id": got[299]["id"], "lease": "stale"}));
    let (st, r) = n
        .call(
            "POST",
            "/v1/tasks/complete",
            Some(json!({"items": with_stale})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{r}");
    let r = r["results"].as_array().unwrap();
    assert_eq!(r.len(), 251);
    assert!(r[..250]
        .iter()
        .all(|x| x["outcome"] == "ok" && x["state"] == "completed"));
    assert_eq!(r[250]["outcome"], "lease_lost");
    let fails: Vec<Value> = got[250..]
        .iter()
        .map(|t| json!({"id": t["id"], "lease": t["lease"]["token"], "error": "nope"}))
        .collect();
    let (st, r) = n
        .call("POST", "/v1/tasks/fail", Some(json!({"items": fails})))
        .await;
    assert_eq!(st, StatusCode::OK, "{r}");
    assert!(r["results"]
        .as_array()
        .unwrap()
        .iter()
        .all(|x| x["state"] == "discarded"));
    let (_, q) = n.call("GET", "/v1/queues/default", None).await;
    assert_eq!(q["counts"]["completed"], 250);
    assert_eq!(q["counts"]["discarded"], 50);
}

async fn bad_input_gets_4xx_and_loses_nothing(n: Node) {
    let cases: Vec<(&str, &str, &str, StatusCode, &str)> = vec![
        (
            "POST",
            "/v1/tasks",
            "{not json",
            StatusCode::BAD_REQUEST,
            "invalid_json",
        ),
        (
            "POST",
            "/v1/tasks",
            "[1,2]",
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            "POST",
            "/v1/tasks",
            r#"{"kind":"a","colour":"red"}"#,
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            "POST",
            "/v1/tasks",
            r#"{"kind":"a","run_in":"soon"}"#,
            StatusCode::BAD_REQUEST,
            "invalid_duration",
        ),
        (
            "POST",
            "/v1/tasks",
            r#"{"kind":"a","max_attempts":0}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_task",
        ),
        (
            "POST",
            "/v1/tasks",
            r#"{"kind":""}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_task",
        ),
        (
            "POST",
            "/v1/tasks",
            r#"{"tasks":[]}"#,
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            "POST",
            "/v1/tasks",
            r#"{"tasks":[{"kind":"ok"},{"kind":"bad","priority":"high"}]}"#,
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            "POST",
            "/v1/tasks",
            r#"{"tasks":[{"kind":"ok"},{"kind":"bad","max_attempts":-1}]}"#,
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_task",
        ),
        (
            "POST",
            "/v1/queues/default/claim",
            r#"{"worker":"w","limit":-1}"#,
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            "POST",
            "/v1/queues/default/claim",
            r#"{"worker":"w","lease":"5 parsecs"}"#,
            StatusCode::BAD_REQUEST,
            "invalid_duration",
        ),
        (
            "POST",
            "/v1/queues/default/claim",
            r#"{"worker":"w","wait":"10m"}"#,
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            "POST",
            "/v1/queues/default/claim",
            r#"{"limit":1}"#,
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            "GET",
            "/v1/tasks/abc",
            "",
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            "GET",
            "/v1/tasks/-3",
            "",
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            "GET",
            "/v1/tasks/123456",
            "",
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            "POST",
            "/v1/tasks/123456/cancel",
            "",
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            "POST",
            "/v1/tasks/123456/complete",
            r#"{"lease":"x"}"#,
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            "POST",
            "/v1/tasks/complete",
            r#"{"items":[{"lease":"x"}]}"#,
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            "PUT",
            "/v1/queues/q",
            r#"{"concurrency_limit":0}"#,
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            "PUT",
            "/v1/queues/q",
            r#"{"backoff":{"jitter":3}}"#,
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            "GET",
            "/v1/tasks?limit=-5",
            "",
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            "GET",
            "/v1/nope",
            "",
            StatusCode::NOT_FOUND,
            "route_not_found",
        ),
        (
            "DELETE",
            "/v1/tasks",
            "",
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
    ];
    for (m, p, body, status, c) in cases {
        let (st, v) = n.raw(m, p, body).await;
        assert_eq!((st, code(&v)), (status, c), "{m} {p} {body} -> {v}");
        assert!(v["error"]["message"]
            .as_str()
            .is_some_and(|s| !s.is_empty()));
    }
    // A payload over 1 MiB: 413, and a body over 32 MiB: 413.
    let big = "x".repeat(1024 * 1024 + 10);
    let (st, v) = n
        .call(
            "POST",
            "/v1/tasks",
            Some(json!({"kind": "big", "payload": big})),
        )
        .await;
    assert_eq!(
        (st, code(&v)),
        (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large")
    );
    let huge = format!(
        r#"{{"kind":"huge","payload":"{}"}}"#,
        "y".repeat(33 * 1024 * 1024)
    );
    let (st, v) = n.raw("POST", "/v1/tasks", &huge).await;
    assert_eq!(
        (st, code(&v)),
        (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large")
    );
    // Nothing of the refused batches was written.
    let (_, l) = n.call("GET", "/v1/tasks", None).await;
    assert_eq!(l["tasks"].as_array().unwrap().len(), 0, "{l}");
}

async fn long_poll_wakes_on_insert(n: Node) {
    let base = n.base.clone();
    let http = n.http.clone();
    let t0 = Instant::now();
    let waiter = tokio::spawn(async move {
        let r: Value = http
            .post(format!("{base}/v1/queues/lp/claim"))
            .json(&json!({"worker": "w", "wait": "20s"}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        (r, t0.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (st, _) = n
        .call(
            "POST",
            "/v1/tasks",
            Some(json!({"kind": "k", "queue": "lp"})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED);
    let (r, took) = waiter.await.unwrap();
    assert_eq!(r["tasks"].as_array().unwrap().len(), 1, "{r}");
    assert!(
        took < Duration::from_secs(10),
        "woke after {took:?}, not at the 20s timeout"
    );
    // An empty wait returns empty after the wait.
    let t = Instant::now();
    let none = n.claim("lp", json!({"worker": "w", "wait": "300ms"})).await;
    assert!(none.is_empty());
    assert!(t.elapsed() >= Duration::from_millis(250));
}

async fn cancel_retry_and_queues(n: Node) {
    let (_, t) = n
        .call("POST", "/v1/tasks", Some(json!({"kind": "k"})))
        .await;
    let id = t["id"].as_i64().unwrap();
    let got = n.claim("default", json!({"worker": "w"})).await;
    let lease = got[0]["lease"]["token"].clone();
    let (st, c) = n
        .call("POST", &format!("/v1/tasks/{id}/cancel"), None)
        .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(c["state"], "running");
    assert!(c["cancel_requested_at"].is_string());
    let (st, e) = n
        .call(
            "POST",
            &format!("/v1/tasks/{id}/heartbeat"),
            Some(json!({"lease": lease})),
        )
        .await;
    assert_eq!((st, code(&e)), (StatusCode::CONFLICT, "cancelled"));
    assert_eq!(n.task(id).await["state"], "cancelled");
    let (st, r) = n.call("POST", &format!("/v1/tasks/{id}/retry"), None).await;
    assert_eq!(
        (st, r["state"].as_str()),
        (StatusCode::OK, Some("available"))
    );
    let (st, e) = n.call("POST", &format!("/v1/tasks/{id}/retry"), None).await;
    assert_eq!((st, code(&e)), (StatusCode::CONFLICT, "invalid_state"));
    // Queue settings and pause/resume.
    let (st, q) = n
        .call(
            "PUT",
            "/v1/queues/default",
            Some(json!({"max_attempts": 3, "timeout": "5s", "backoff": {"initial": "2s"}})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{q}");
    assert_eq!(q["settings"]["timeout"], "5s");
    let (_, t) = n
        .call("POST", "/v1/tasks", Some(json!({"kind": "defaults"})))
        .await;
    assert_eq!(
        (t["max_attempts"].as_i64(), t["timeout"].as_str()),
        (Some(3), Some("5s"))
    );
    assert_eq!(t["backoff"]["initial"], "2s");
    let (st, q) = n.call("POST", "/v1/queues/default/pause", None).await;
    assert_eq!(
        (st, q["settings"]["paused"].as_bool()),
        (StatusCode::OK, Some(true))
    );
    assert!(n
        .claim("default", json!({"worker": "w", "limit": 10}))
        .await
        .is_empty());
    let (_, q) = n.call("POST", "/v1/queues/default/resume", None).await;
    assert_eq!(q["settings"]["paused"], false);
    assert_eq!(
        q["settings"]["max_attempts"], 3,
        "pause/resume keep other settings"
    );
    assert_eq!(
        n.claim("default", json!({"worker": "w", "limit": 10}))
            .await
            .len(),
        2
    );
}

async fn expired_lease_is_rescued(n: Node) {
    let (_, t) = n
        .call("POST", "/v1/tasks", Some(json!({"kind": "k", "max_attempts": 2, "backoff": {"initial": "100ms", "jitter": 0.0}})))
        .await;
    let id = t["id"].as_i64().unwrap();
    let got = n
        .claim("default", json!({"worker": "dies", "lease": "300ms"}))
        .await;
    let stale = got[0]["lease"]["token"].clone();
    // The worker "dies": no heartbeat. The rescuer fails the attempt and the task runs again.
    let deadline = Instant::now() + Duration::from_secs(20);
    let second = loop {
        let got = n
            .claim("default", json!({"worker": "second", "wait": "1s"}))
            .await;
        if let Some(t) = got.into_iter().next() {
            break t;
        }
        assert!(Instant::now() < deadline, "task was never rescued");
    };
    assert_eq!(second["id"], id);
    assert_eq!(second["attempt"], 2);
    assert_eq!(second["errors"][0]["message"], "lease expired");
    assert_eq!(second["errors"][0]["worker"], "dies");
    let (st, e) = n
        .call(
            "POST",
            &format!("/v1/tasks/{id}/complete"),
            Some(json!({"lease": stale, "result": "late"})),
        )
        .await;
    assert_eq!((st, code(&e)), (StatusCode::CONFLICT, "lease_lost"));
    let (st, _) = n
        .call(
            "POST",
            &format!("/v1/tasks/{id}/complete"),
            Some(json!({"lease": second["lease"]["token"], "result": "ok"})),
        )
        .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(n.task(id).await["result"], "ok");
}

async fn openapi_matches_routes(n: Node) {
    let (st, doc) = n.call("GET", "/openapi.json", None).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().unwrap();
    assert!(paths.len() >= 17);
    for (path, ops) in paths {
        let concrete = path.replace("{id}", "1").replace("{queue}", "docq");
        if path == "/v1/events" || path == "/v1/changes" {
            // An endless stream: check the status line only.
            let resp = n
                .http
                .get(format!("{}{}", n.base, path))
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), StatusCode::OK, "{path}");
            continue;
        }
        for method in ops.as_object().unwrap().keys() {
            let (st, v) = n.raw(&method.to_uppercase(), &concrete, "{}").await;
            assert_ne!(
                code(&v),
                "route_not_found",
                "{method} {path} is documented but not routed"
            );
            assert_ne!(st, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
        }
    }
}

impl Node {
    /// Asks a bulk action and waits for it to finish; its final view.
    async fn bulk(&self, body: Value) -> Value {
        let (st, v) = self.call("POST", "/v1/tasks/bulk", Some(body)).await;
        assert_eq!(st, StatusCode::ACCEPTED, "{v}");
        let id = v["id"].as_i64().unwrap();
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let (st, j) = self
                .call("GET", &format!("/v1/tasks/bulk/{id}"), None)
                .await;
            assert_eq!(st, StatusCode::OK, "{j}");
            if j["state"] == "completed" {
                return j;
            }
            assert!(Instant::now() < deadline, "bulk action not done: {j}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn states(&self, q: &str) -> std::collections::BTreeMap<String, usize> {
        let mut out = std::collections::BTreeMap::new();
        let mut after = 0;
        loop {
            let (st, v) = self
                .call(
                    "GET",
                    &format!("/v1/tasks?queue={q}&limit=1000&after={after}"),
                    None,
                )
                .await;
            assert_eq!(st, StatusCode::OK, "{v}");
            let page = v["tasks"].as_array().unwrap();
            for t in page {
                *out.entry(t["state"].as_str().unwrap().to_string())
                    .or_default() += 1;
            }
            match v["next_after"].as_i64() {
                Some(a) => after = a,
                None => return out,
            }
        }
    }
}

/// Issue 27: cancel, retry, run now and delete over a whole filter, in batches past the first
/// (1,100 tasks: three batches of at most 500), counted first, refused when it makes no sense.
async fn bulk_actions_over_a_filter(n: Node) {
    let q = format!("b{}", uuid::Uuid::new_v4().simple());
    let tasks: Vec<Value> = (0..1100)
        .map(|i| json!({"queue": q, "kind": "k", "payload": {"i": i}}))
        .collect();
    let (st, v) = n
        .call("POST", "/v1/tasks", Some(json!({"tasks": tasks})))
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let (st, later) = n
        .call(
            "POST",
            "/v1/tasks",
            Some(json!({"queue": q, "kind": "later", "run_in": "1h"})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{later}");
    let cancel = json!({"action": "cancel", "filter": {"queue": q, "states": ["available"]}});
    let (st, c) = n
        .call(
            "POST",
            "/v1/tasks/bulk",
            Some(json!({"action": "cancel", "filter": {"queue": q, "states": ["available"]}, "dry_run": true})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{c}");
    assert_eq!(
        (c["total"].as_i64(), c["more"].as_bool()),
        (Some(1100), Some(false))
    );
    let j = n.bulk(cancel).await;
    assert_eq!(
        (
            j["total"].as_i64(),
            j["done"].as_i64(),
            j["skipped"].as_i64()
        ),
        (Some(1100), Some(1100), Some(0)),
        "{j}"
    );
    let st_ = n.states(&q).await;
    assert_eq!(
        (st_.get("cancelled"), st_.get("scheduled")),
        (Some(&1100), Some(&1)),
        "{st_:?}"
    );
    // A filter the kept counts cannot answer is counted by the list's own query.
    let (st, c) = n
        .call(
            "POST",
            "/v1/tasks/bulk",
            Some(json!({"action": "retry", "filter": {"queue": q, "kind": "k"}, "dry_run": true})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{c}");
    assert_eq!(c["total"].as_i64(), Some(1100), "{c}");
    let j = n
        .bulk(json!({"action": "retry", "filter": {"queue": q, "kind": "k"}}))
        .await;
    assert_eq!(j["done"].as_i64(), Some(1100), "{j}");
    assert_eq!(n.states(&q).await.get("available"), Some(&1100));
    let j = n
        .bulk(json!({"action": "run-now", "filter": {"queue": q}}))
        .await;
    assert_eq!(
        (j["total"].as_i64(), j["done"].as_i64()),
        (Some(1), Some(1)),
        "{j}"
    );
    assert_eq!(
        n.task(later["id"].as_i64().unwrap()).await["state"],
        "available"
    );
    n.bulk(json!({"action": "cancel", "filter": {"queue": q}}))
        .await;
    let j = n
        .bulk(json!({"action": "delete", "filter": {"queue": q, "states": ["cancelled"]}}))
        .await;
    assert_eq!(j["done"].as_i64(), Some(1101), "{j}");
    assert!(n.states(&q).await.is_empty());
    let (_, queue) = n.call("GET", &format!("/v1/queues/{q}"), None).await;
    assert_eq!(
        queue["counts"]["cancelled"], 0,
        "the counts follow a delete: {queue}"
    );
    // Refused, with nothing asked.
    for (body, want) in [
        (json!({"action": "nuke"}), StatusCode::BAD_REQUEST),
        (
            json!({"action": "retry", "filter": {"states": ["running"]}}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"action": "retry", "filter": {"queue": ""}}),
            StatusCode::BAD_REQUEST,
        ),
        (
            json!({"action": "retry", "filter": {"text": "x"}}),
            StatusCode::BAD_REQUEST,
        ),
    ] {
        let (st, v) = n.call("POST", "/v1/tasks/bulk", Some(body.clone())).await;
        assert_eq!(st, want, "{body} -> {v}");
        assert!(v["error"]["code"].is_string(), "{v}");
    }
    let (st, v) = n
        .call(
            "POST",
            "/v1/tasks",
            Some(json!({"queue": "docket:bulk", "kind": "bulk", "payload": {}})),
        )
        .await;
    assert_eq!(
        st,
        StatusCode::UNPROCESSABLE_ENTITY,
        "the bulk queue is docket's own: {v}"
    );
    let (st, v) = n
        .call(
            "PATCH",
            &format!("/v1/tasks/{}", j["id"]),
            Some(json!({"priority": 3})),
        )
        .await;
    assert_eq!(st, StatusCode::CONFLICT, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("bulk action"),
        "a bulk action's task is not edited: {v}"
    );
    let (_, fresh) = n
        .call("POST", "/v1/tasks", Some(json!({"queue": q, "kind": "k"})))
        .await;
    let (st, v) = n
        .call(
            "PATCH",
            &format!("/v1/tasks/{}", fresh["id"]),
            Some(json!({"queue": "docket:bulk"})),
        )
        .await;
    assert!(
        st.is_client_error(),
        "nor is a task moved into its queue: {v}"
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("docket's own"),
        "{v}"
    );
    let (st, _) = n
        .call("GET", &format!("/v1/tasks/bulk/{}", later["id"]), None)
        .await;
    assert_eq!(st, StatusCode::NOT_FOUND, "not a bulk action");
    let (_, audit) = n.call("GET", "/v1/audit", None).await;
    let actions: Vec<&str> = audit["entries"]
        .as_array()
        .map(|a| a.iter().filter_map(|e| e["action"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        actions.contains(&"tasks.bulk") && actions.contains(&"tasks.bulk.done"),
        "{audit}"
    );
}

/// Issue 37: a claim whose answer never reached its worker (a stop mid-claim) is handed back
/// by its claim_id — at once, its attempt not counted — also when the release overtakes the
/// claim; tasks held but not started go back by their leases. Then the stop the issue measured:
/// a client that gives up on a long-polled claim at a random moment around an enqueue and
/// releases it, 30 times — no task is left running.
async fn claims_handed_back_on_stop(n: Node) {
    let q = format!("r{}", uuid::Uuid::new_v4().simple());
    let add = |k: usize| {
        let (n, q) = (&n, q.clone());
        async move {
            let mut ids = vec![];
            for i in 0..k {
                let (st, v) = n
                    .call(
                        "POST",
                        "/v1/tasks",
                        Some(json!({"queue": q, "kind": "k", "payload": i})),
                    )
                    .await;
                assert_eq!(st, StatusCode::CREATED, "{v}");
                ids.push(v["id"].as_i64().unwrap());
            }
            ids
        }
    };
    let ids = add(3).await;
    let x = uuid::Uuid::new_v4().to_string();
    let got = n
        .claim(&q, json!({"worker": "w", "limit": 2, "claim_id": x}))
        .await;
    assert_eq!(got.len(), 2);
    let (st, v) = n
        .call("POST", &format!("/v1/queues/{q}/claims/{x}/release"), None)
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let mut back: Vec<i64> = v["released"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_i64().unwrap())
        .collect();
    back.sort_unstable();
    let mut want: Vec<i64> = got.iter().map(|t| t["id"].as_i64().unwrap()).collect();
    want.sort_unstable();
    assert_eq!(back, want);
    for id in &want {
        let t = n.task(*id).await;
        assert_eq!(
            (t["state"].as_str(), t["attempt"].as_i64()),
            (Some("available"), Some(0)),
            "{t}"
        );
    }
    // Another queue's path reaches nothing; a second release finds nothing held.
    let (_, v) = n
        .call("POST", &format!("/v1/queues/{q}x/claims/{x}/release"), None)
        .await;
    assert_eq!(v["released"], json!([]));
    // A release that overtakes its claim: the claim answers nothing and leaves the tasks.
    let y = uuid::Uuid::new_v4().simple().to_string();
    let (st, v) = n
        .call("POST", &format!("/v1/queues/{q}/claims/{y}/release"), None)
        .await;
    assert_eq!((st, v["released"].clone()), (StatusCode::OK, json!([])));
    let got = n
        .claim(&q, json!({"worker": "w", "limit": 10, "claim_id": y}))
        .await;
    assert!(got.is_empty(), "{got:?}");
    // Held, not started: released by lease; a stale or foreign token is lease_lost.
    let got = n.claim(&q, json!({"worker": "w", "limit": 3})).await;
    assert_eq!(got.len(), 3);
    let (st, v) = n
        .call(
            "POST",
            "/v1/tasks/release",
            Some(json!({"items": [
                {"id": got[0]["id"], "lease": got[0]["lease"]["token"]},
                {"id": got[1]["id"], "lease": got[0]["lease"]["token"]},
                {"id": got[2]["id"], "lease": "nonsense"},
            ]})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let outcomes: Vec<&str> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["ok", "lease_lost", "lease_lost"], "{v}");
    assert_eq!(n.task(got[0]["id"].as_i64().unwrap()).await["attempt"], 0);
    assert_eq!(
        n.task(got[1]["id"].as_i64().unwrap()).await["state"],
        "running"
    );
    for t in &got[1..] {
        let (st, v) = n
            .call(
                "POST",
                "/v1/tasks/release",
                Some(json!({"items": [{"id": t["id"], "lease": t["lease"]["token"]}]})),
            )
            .await;
        assert_eq!(
            (st, v["results"][0]["outcome"].as_str()),
            (StatusCode::OK, Some("ok")),
            "{v}"
        );
    }
    // Worst values: 4xx, nothing changed.
    for bad in [
        "",
        "zz",
        "0b0d9c1e-6a77-4b43-9d55-3f0c3b6f2a4",
        "+7e5504410b1426f9247bb680e5fe0c8",
        "a\u{0}",
    ] {
        let (st, v) = n
            .call(
                "POST",
                &format!("/v1/queues/{q}/claim"),
                Some(json!({"worker": "w", "claim_id": bad})),
            )
            .await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{bad:?}: {v}");
    }
    for bad in ["zz", "0b0d9c1e-6a77-4b43-9d55-3f0c3b6f2a4"] {
        let (st, v) = n
            .call(
                "POST",
                &format!("/v1/queues/{q}/claims/{bad}/release"),
                None,
            )
            .await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{bad:?}: {v}");
    }
    let (st, _) = n
        .call("POST", "/v1/tasks/release", Some(json!({"items": []})))
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    for id in &ids {
        assert_eq!(n.task(*id).await["state"], "available");
    }

    // The stop: a long-polled claim given up on at a random moment around the enqueue that
    // answers it, then released. Whatever the timing, nothing is left running.
    let q2 = format!("s{}", uuid::Uuid::new_v4().simple());
    for round in 0..30u64 {
        let claim_id = uuid::Uuid::new_v4().to_string();
        let http = reqwest::Client::new();
        let url = format!("{}/v1/queues/{q2}/claim", n.base);
        let body = json!({"worker": "w", "limit": 4, "wait": "5s", "claim_id": claim_id});
        let poll = tokio::spawn(async move {
            http.post(url)
                .json(&body)
                .send()
                .await
                .ok()?
                .json::<Value>()
                .await
                .ok()
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (st, _) = n
            .call("POST", "/v1/tasks", Some(json!({"queue": q2, "kind": "k"})))
            .await;
        assert_eq!(st, StatusCode::CREATED);
        // Give up within 0..6 ms of the enqueue (the claim answers within about that).
        tokio::time::sleep(Duration::from_micros(round * 200)).await;
        poll.abort();
        let answered = poll.await.ok().flatten();
        let (st, v) = n
            .call(
                "POST",
                &format!("/v1/queues/{q2}/claims/{claim_id}/release"),
                None,
            )
            .await;
        assert_eq!(st, StatusCode::OK, "{v}");
        let _ = answered;
    }
    // Nothing running, every task at attempt 0: none lost an attempt to a stop.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (st, v) = n
            .call("GET", &format!("/v1/tasks?queue={q2}&limit=100"), None)
            .await;
        assert_eq!(st, StatusCode::OK, "{v}");
        let tasks = v["tasks"].as_array().unwrap().clone();
        assert_eq!(tasks.len(), 30);
        if tasks.iter().all(|t| t["state"] == "available") {
            assert!(tasks.iter().all(|t| t["attempt"] == 0), "{tasks:?}");
            break;
        }
        // A claim still finishing on the server after its client gave up hands its task
        // back itself (the release's mark); allow it the moment that takes.
        assert!(
            Instant::now() < deadline,
            "stranded: {:?}",
            tasks
                .iter()
                .filter(|t| t["state"] != "available")
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

macro_rules! both {
    ($($name:ident),* $(,)?) => {
        mod pg { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name(super::pg().await).await; } )* }
        mod sqlite { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name(super::sqlite().await).await; } )* }
        mod mysql { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name(super::mysql().await).await; } )* }
    };
}

async fn docket_metrics(n: Node) {
    let q = format!("m{}", uuid::Uuid::new_v4().simple());
    for kind in ["ok", "ok", "bad"] {
        let (st, v) = n
            .call(
                "POST",
                "/v1/tasks",
                Some(json!({"queue": q, "kind": kind, "max_attempts": 1})),
            )
            .await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
    }
    let (st, _) = n
        .call(
            "POST",
            "/v1/tasks",
            Some(json!({"queue": q, "kind": "waiting", "run_in": "1h"})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED);
    let (st, _) = n
        .call(
            "POST",
            "/v1/tasks",
            Some(json!({"queue": q, "kind": "left"})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED);
    let claimed = n.claim(&q, json!({"worker": "w", "limit": 3})).await;
    assert_eq!(claimed.len(), 3);
    for t in &claimed {
        let id = t["id"].as_i64().unwrap();
        let lease = t["lease"]["token"].as_str().unwrap();
        // An HTTP heartbeat counts like an in-process one.
        let (st, v) = n
            .call(
                "POST",
                &format!("/v1/tasks/{id}/heartbeat"),
                Some(json!({"lease": lease})),
            )
            .await;
        assert_eq!(st, StatusCode::OK, "{v}");
        let (verb, body) = if t["kind"] == "bad" {
            ("fail", json!({"lease": lease, "error": "no"}))
        } else {
            ("complete", json!({"lease": lease, "result": 1}))
        };
        let (st, v) = n
            .call("POST", &format!("/v1/tasks/{id}/{verb}"), Some(body))
            .await;
        assert_eq!(st, StatusCode::OK, "{v}");
    }
    // A claimed task whose worker vanished is rescued when its lease runs out.
    let lost = n
        .claim(&q, json!({"worker": "gone", "limit": 1, "lease": "200ms"}))
        .await;
    let lost_id = lost[0]["id"].as_i64().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while n.task(lost_id).await["state"] == "running" {
        assert!(std::time::Instant::now() < deadline, "not rescued");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let text = n
        .http
        .get(format!("{}/metrics", n.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
        .expect("Prometheus text format");
    let value = |metric: &str, labels: &[(&str, &str)]| -> f64 {
        scrape
            .samples
            .iter()
            .filter(|s| {
                s.metric == metric && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v))
            })
            .map(|s| match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                _ => f64::NAN,
            })
            .sum()
    };
    let ql = q.as_str();
    assert_eq!(
        value(
            "docket_tasks_enqueued_total",
            &[("queue", ql), ("kind", "ok")]
        ),
        2.0,
        "{text}"
    );
    assert_eq!(value("docket_tasks_enqueued_total", &[("queue", ql)]), 5.0);
    assert_eq!(value("docket_tasks_claimed_total", &[("queue", ql)]), 4.0);
    assert_eq!(
        value(
            "docket_task_heartbeats_total",
            &[("queue", ql), ("outcome", "ok")]
        ),
        3.0
    );
    assert_eq!(
        value(
            "docket_tasks_rescued_total",
            &[("queue", ql), ("kind", "left")]
        ),
        1.0
    );
    assert_eq!(
        value(
            "docket_tasks_completed_total",
            &[("queue", ql), ("kind", "ok")]
        ),
        2.0
    );
    assert_eq!(
        value(
            "docket_tasks_discarded_total",
            &[("queue", ql), ("kind", "bad")]
        ),
        1.0
    );
    assert_eq!(
        value(
            "docket_task_run_seconds_count",
            &[("queue", ql), ("kind", "ok")]
        ),
        2.0
    );
    assert!(
        text.contains("docket_task_run_seconds_bucket{"),
        "seconds buckets"
    );
    assert_eq!(
        value("docket_task_pickup_seconds_count", &[("queue", ql)]),
        4.0
    );
    assert_eq!(
        value(
            "docket_queue_tasks",
            &[("queue", ql), ("state", "completed")]
        ),
        2.0
    );
    assert_eq!(
        value(
            "docket_queue_tasks",
            &[("queue", ql), ("state", "scheduled")]
        ),
        1.0
    );
    assert_eq!(
        value(
            "docket_queue_tasks",
            &[("queue", ql), ("state", "retryable")]
        ),
        1.0
    );
    assert!(value("docket_queue_oldest_available_seconds", &[("queue", ql)]) >= 0.0);
    assert_eq!(value("docket_queue_paused", &[("queue", ql)]), 0.0);
    assert!(value("docket_db_connections", &[]) >= 1.0);
    assert!(text.contains("# TYPE docket_tasks_completed_total counter"));
    let http_count: f64 = text
        .lines()
        .find(|l| {
            l.starts_with("docket_http_request_duration_seconds_count{")
                && l.contains("route=\"/v1/tasks/{id}/complete\"")
                && l.contains("status=\"200\"")
        })
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0);
    assert!(
        http_count >= 2.0,
        "HTTP durations by route pattern:\n{text}"
    );
}

async fn trace_ids_and_attempt_costs(n: Node) {
    let q = format!("tr{}", uuid::Uuid::new_v4().simple());
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    // From the W3C traceparent header.
    let resp = n
        .http
        .post(format!("{}/v1/tasks", n.base))
        .header("traceparent", format!("00-{trace}-00f067aa0ba902b7-01"))
        .json(&json!({"queue": q, "kind": "traced", "max_attempts": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let t: Value = resp.json().await.unwrap();
    assert_eq!(t["trace_id"], trace);
    // The body's own wins; none at all gets a fresh one; a malformed one is refused.
    let (_, own) = n
        .call(
            "POST",
            "/v1/tasks",
            Some(
                json!({"queue": q, "kind": "own", "trace_id": "0af7651916cd43dd8448eb211c80319c"}),
            ),
        )
        .await;
    assert_eq!(own["trace_id"], "0af7651916cd43dd8448eb211c80319c");
    let (_, fresh) = n
        .call(
            "POST",
            "/v1/tasks",
            Some(json!({"queue": q, "kind": "fresh"})),
        )
        .await;
    let f = fresh["trace_id"].as_str().unwrap();
    assert!(f.len() == 32 && f != trace && f.bytes().all(|b| b.is_ascii_hexdigit()));
    let (st, bad) = n
        .call(
            "POST",
            "/v1/tasks",
            Some(json!({"queue": q, "kind": "bad", "trace_id": "nope"})),
        )
        .await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{bad}");
    // Claims carry it to the worker; a failed attempt records its cost.
    let claimed = n.claim(&q, json!({"worker": "w", "limit": 1})).await;
    assert_eq!(claimed[0]["trace_id"], trace);
    let id = claimed[0]["id"].as_i64().unwrap();
    let lease = claimed[0]["lease"]["token"].as_str().unwrap();
    tokio::time::sleep(Duration::from_millis(30)).await;
    let (st, _) = n
        .call(
            "POST",
            &format!("/v1/tasks/{id}/fail"),
            Some(json!({"lease": lease, "error": "no"})),
        )
        .await;
    assert_eq!(st, StatusCode::OK);
    let t = n.task(id).await;
    assert_eq!(t["trace_id"], trace);
    let cost = t["errors"][0]["duration_ms"].as_i64().unwrap();
    assert!((25..60_000).contains(&cost), "attempt cost {cost} ms");
}

/// Issue 37 item 7: `GET /v1/tasks?trace_id=&unique_key=&worker=` find exactly their tasks —
/// waiting, running, finished (MySQL's `docket_tasks_done`) and retried on another worker — on
/// their own, with each other and with the other filters, in either order and page by page.
async fn tasks_found_by_trace_id_unique_key_and_worker(n: Node) {
    let n = &n;
    let q = format!("s{}", uuid::Uuid::new_v4().simple());
    let q2 = format!("{q}x");
    let (ta, tb) = (
        "0af7651916cd43dd8448eb211c80319c",
        "4bf92f3577b34da6a3ce929d0e0e4736",
    );
    let (ua, uc) = (format!("ua-{q}"), format!("uc-{q}"));
    let add = |body: Value| async move {
        let (st, t) = n.call("POST", "/v1/tasks", Some(body)).await;
        assert_eq!(st, StatusCode::CREATED, "{t}");
        t["id"].as_i64().unwrap()
    };
    let a = add(json!({"queue": q, "kind": "ka", "trace_id": ta, "unique_key": ua})).await;
    let b = add(json!({"queue": q, "kind": "kb", "trace_id": tb, "max_attempts": 3})).await;
    let c = add(json!({"queue": q, "kind": "kc", "unique_key": uc})).await;
    // Another task of trace `ta`, in another queue: a trace id names no single task.
    let d = add(json!({"queue": q2, "kind": "ka", "trace_id": ta})).await;
    // a: run by wa, completed.
    let got = n
        .claim(&q, json!({"worker": "wa", "limit": 1, "kinds": ["ka"]}))
        .await;
    assert_eq!(got[0]["id"], a);
    let (st, v) = n
        .call(
            "POST",
            &format!("/v1/tasks/{a}/complete"),
            Some(json!({"lease": got[0]["lease"]["token"], "result": 1})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    // b: failed on wa, run again at once and now running on wb — its last attempt is wb's.
    let got = n
        .claim(&q, json!({"worker": "wa", "limit": 1, "kinds": ["kb"]}))
        .await;
    assert_eq!(got[0]["id"], b);
    let (st, v) = n
        .call(
            "POST",
            &format!("/v1/tasks/{b}/fail"),
            Some(json!({"lease": got[0]["lease"]["token"], "error": "once"})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (st, v) = n
        .call("POST", &format!("/v1/tasks/{b}/run-now"), None)
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let got = n
        .claim(&q, json!({"worker": "wb", "limit": 1, "kinds": ["kb"]}))
        .await;
    assert_eq!(got[0]["id"], b);
    assert_eq!(n.task(a).await["state"], "completed");
    assert_eq!(n.task(b).await["state"], "running");
    assert_eq!(n.task(c).await["state"], "available");
    // Every id the query finds, page after page.
    let found = |query: String| async move {
        let mut ids = vec![];
        let mut after = String::new();
        for _ in 0..20 {
            let (st, v) = n
                .call("GET", &format!("/v1/tasks?{query}{after}"), None)
                .await;
            assert_eq!(st, StatusCode::OK, "{query}: {v}");
            ids.extend(
                v["tasks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|t| t["id"].as_i64().unwrap()),
            );
            match v["next_after"].as_i64() {
                Some(next) => after = format!("&after={next}"),
                None => return ids,
            }
        }
        panic!("{query}: paging did not end");
    };
    assert_eq!(found(format!("trace_id={ta}")).await, vec![a, d]);
    assert_eq!(
        found(format!("trace_id={}", ta.to_ascii_uppercase())).await,
        vec![a, d],
        "a trace id is hex, whatever its case"
    );
    assert_eq!(found(format!("trace_id={ta}&order=desc")).await, vec![d, a]);
    assert_eq!(found(format!("trace_id={ta}&limit=1")).await, vec![a, d]);
    let (_, first) = n
        .call("GET", &format!("/v1/tasks?trace_id={ta}&limit=1"), None)
        .await;
    assert_eq!(first["tasks"].as_array().unwrap().len(), 1, "{first}");
    assert_eq!(found(format!("trace_id={ta}&queue={q}")).await, vec![a]);
    assert_eq!(found(format!("trace_id={tb}")).await, vec![b]);
    assert!(found("trace_id=ffffffffffffffffffffffffffffffff".into())
        .await
        .is_empty());
    assert_eq!(found(format!("unique_key={ua}")).await, vec![a]);
    assert_eq!(found(format!("unique_key={uc}")).await, vec![c]);
    assert_eq!(
        found(format!("unique_key={ua}&state=completed")).await,
        vec![a]
    );
    assert!(found(format!("unique_key={ua}&state=available,running"))
        .await
        .is_empty());
    assert!(found(format!("unique_key=none-{q}")).await.is_empty());
    assert_eq!(found("worker=wa".into()).await, vec![a]);
    assert_eq!(found("worker=wb".into()).await, vec![b]);
    assert!(found("worker=wc".into()).await.is_empty());
    assert_eq!(found(format!("worker=wa&trace_id={ta}")).await, vec![a]);
    assert!(found(format!("worker=wb&trace_id={ta}")).await.is_empty());
    assert_eq!(
        found(format!("worker=wa&unique_key={ua}&trace_id={ta}")).await,
        vec![a]
    );
    assert!(found(format!("worker=wa&unique_key={uc}")).await.is_empty());
}

/// Issue 9: every duration and time is bounded at the edge, NUL is refused, and the values at
/// the very edge of the bounds neither panic a handler nor stop maintenance.
async fn hostile_durations_times_and_nul(n: Node) {
    let q = format!("h{}", uuid::Uuid::new_v4().simple());
    let tasks = "/v1/tasks".to_string();
    let bad: Vec<(&str, String, StatusCode, &str)> = vec![
        (
            "POST",
            tasks.clone(),
            StatusCode::BAD_REQUEST,
            r#"{"kind":"a","run_in":"1000000y"}"#,
        ),
        (
            "POST",
            tasks.clone(),
            StatusCode::BAD_REQUEST,
            r#"{"kind":"a","timeout":"300000000y"}"#,
        ),
        (
            "POST",
            tasks.clone(),
            StatusCode::BAD_REQUEST,
            r#"{"kind":"a","backoff":{"initial":"1000000y","max":"1000000y"}}"#,
        ),
        (
            "POST",
            tasks.clone(),
            StatusCode::UNPROCESSABLE_ENTITY,
            r#"{"kind":"a","timeout":"1ns"}"#,
        ),
        (
            "POST",
            tasks.clone(),
            StatusCode::UNPROCESSABLE_ENTITY,
            r#"{"kind":"a","timeout":"31days"}"#,
        ),
        (
            "POST",
            tasks.clone(),
            StatusCode::UNPROCESSABLE_ENTITY,
            r#"{"kind":"a","run_at":"2030-01-01T00:00:00Z","expires_at":"2029-01-01T00:00:00Z"}"#,
        ),
        (
            "POST",
            tasks.clone(),
            StatusCode::UNPROCESSABLE_ENTITY,
            r#"{"kind":"a","run_in":"1h","expires_at":"2020-01-01T00:00:00Z"}"#,
        ),
        (
            "POST",
            tasks.clone(),
            StatusCode::UNPROCESSABLE_ENTITY,
            r#"{"kind":"a\u0001b"}"#,
        ),
        (
            "POST",
            tasks.clone(),
            StatusCode::BAD_REQUEST,
            r#"{"kind":"a","payload":"x\u0000y"}"#,
        ),
        (
            "POST",
            tasks.clone(),
            StatusCode::BAD_REQUEST,
            r#"{"kind":"a","payload":{"k\u0000":1}}"#,
        ),
        (
            "POST",
            "/v1/schedules".into(),
            StatusCode::BAD_REQUEST,
            r#"{"name":"s1","every":"1000000y","task":{"kind":"a"}}"#,
        ),
        (
            "POST",
            "/v1/schedules".into(),
            StatusCode::BAD_REQUEST,
            r#"{"name":"s2","every":"1ns","task":{"kind":"a"}}"#,
        ),
        (
            "PUT",
            format!("/v1/queues/{q}"),
            StatusCode::BAD_REQUEST,
            r#"{"timeout":"1000000y"}"#,
        ),
        (
            "PUT",
            format!("/v1/queues/{q}"),
            StatusCode::BAD_REQUEST,
            r#"{"timeout":"1ns"}"#,
        ),
        (
            "PUT",
            format!("/v1/queues/{q}"),
            StatusCode::BAD_REQUEST,
            "",
        ),
        (
            "POST",
            "/v1/tasks/fail".into(),
            StatusCode::BAD_REQUEST,
            r#"{"items":[{"id":1,"lease":"x","error":"e","worker":""}]}"#,
        ),
        (
            "PUT",
            format!("/v1/queues/{q}"),
            StatusCode::BAD_REQUEST,
            "[]",
        ),
        (
            "POST",
            format!("/v1/queues/{q}/claim"),
            StatusCode::BAD_REQUEST,
            r#"{"worker":"w","kinds":[]}"#,
        ),
        (
            "POST",
            format!("/v1/queues/{q}/claim"),
            StatusCode::BAD_REQUEST,
            r#"{"worker":"w","kinds":[""]}"#,
        ),
        (
            "POST",
            format!("/v1/queues/{q}/claim"),
            StatusCode::BAD_REQUEST,
            r#"{"worker":"w","lease":"1000000y"}"#,
        ),
        (
            "POST",
            format!("/v1/queues/{q}/claim"),
            StatusCode::BAD_REQUEST,
            r#"{"worker":"w","lease":"31days"}"#,
        ),
    ];
    for (m, path, want, body) in &bad {
        let (st, v) = n.raw(m, path, body).await;
        assert!(
            st == *want
                || (st.is_client_error()
                    && *want == StatusCode::UNPROCESSABLE_ENTITY
                    && st == StatusCode::BAD_REQUEST),
            "{m} {path} {body}: {st} {v}"
        );
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|s| !s.is_empty()),
            "{v}"
        );
    }
    // NUL in a URL is refused before it reaches the database.
    for path in [
        "/v1/tasks?text=%00",
        "/v1/tasks?kind=a%00b",
        "/v1/queues/a%00b",
    ] {
        let (st, v) = n.call("GET", path, None).await;
        assert_eq!(
            (st, code(&v)),
            (StatusCode::BAD_REQUEST, "invalid_text"),
            "{path}"
        );
    }
    // axum's own rejections come back in the JSON error shape too.
    let (st, v) = n.call("GET", "/v1/tasks/%FF", None).await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    assert_eq!(code(&v), "invalid_request", "{v}");
    // A dashboard confirmation page built from a crafted queue name posts to that queue's own
    // action, not to a path the name smuggles in.
    let crafted = "/ui/queues/..%2Ftasks%2F139%2Fcancel%3F/pause";
    let page = n
        .http
        .get(format!("{}{crafted}", n.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains(&format!("action=\"{crafted}\"")), "{page}");
    // An escaped backslash before u0000 is text, not NUL.
    let (st, t) = n
        .raw(
            "POST",
            "/v1/tasks",
            &format!(r#"{{"kind":"a","queue":"{q}","payload":"\\u0000"}}"#),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{t}");
    assert_eq!(t["payload"], "\\u0000");
    // Nothing of the refused requests was written.
    let (_, list) = n.call("GET", &format!("/v1/tasks?queue={q}"), None).await;
    assert_eq!(list["tasks"].as_array().unwrap().len(), 1, "{list}");
    let (_, s) = n.call("GET", "/v1/schedules", None).await;
    assert_eq!(s["schedules"].as_array().unwrap().len(), 0, "{s}");

    // The largest accepted values: a 100-year backoff that the rescuer applies, a 100-year
    // retry_in, a 100-year run_in. None may panic or stop maintenance.
    let (st, t) = n
        .call("POST", "/v1/tasks", Some(json!({"kind": "k", "queue": q, "backoff": {"initial": "36500days", "max": "36500days", "jitter": 0.0}})))
        .await;
    assert_eq!(st, StatusCode::CREATED, "{t}");
    let (st, far) = n
        .call(
            "POST",
            "/v1/tasks",
            Some(json!({"kind": "k", "queue": q, "run_in": "36500days"})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{far}");
    assert_eq!(far["state"], "scheduled");
    let got = n
        .claim(&q, json!({"worker": "w", "lease": "200ms", "limit": 10}))
        .await;
    assert_eq!(got.len(), 2, "{got:?}");
    let rescued_id = t["id"].as_i64().unwrap();
    let other = got.iter().find(|g| g["id"] != t["id"]).unwrap();
    let (st, v) = n
        .call(
            "POST",
            &format!("/v1/tasks/{}/fail", other["id"]),
            Some(json!({"lease": other["lease"]["token"], "error": "e", "retry_in": "36500days"})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["state"], "retryable");
    // The first task's lease expires: the rescuer applies the 100-year backoff.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let t = n.task(rescued_id).await;
        if t["state"] == "retryable" {
            assert!(t["run_at"].as_str().unwrap() > "2120", "{t}");
            break;
        }
        assert!(Instant::now() < deadline, "never rescued: {t}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Maintenance still runs: a task due in 300 ms is promoted and claimed.
    let (_, soon) = n
        .call(
            "POST",
            "/v1/tasks",
            Some(json!({"kind": "k", "queue": q, "run_in": "300ms"})),
        )
        .await;
    let got = n.claim(&q, json!({"worker": "w", "wait": "10s"})).await;
    assert_eq!(got[0]["id"], soon["id"]);
    let (st, h) = n.call("GET", "/healthz", None).await;
    assert_eq!(st, StatusCode::OK, "{h}");
}

/// Issue 9: `timeout` is how long one attempt may run. The lease never outlives it, a
/// heartbeat or completion past it is refused with 409 `timed_out` and the attempt fails with
/// `timeout`; a silent worker is rescued with `timeout` at the deadline.
async fn attempt_timeout_is_enforced(first: Node) {
    // The test moves time itself: a node on a manual clock, on the same database. The given
    // node stops, so no rescuer on real time races the checks below (on a loaded machine the
    // 1 s deadline used to pass before the first heartbeat).
    first.stop.cancel();
    let clock = docket_core::ManualClock::new(chrono::Utc::now());
    let n = start_clocked(
        first.store.clone(),
        "clocked",
        Duration::from_secs(1),
        None,
        Arc::new(clock.clone()),
    )
    .await;
    let q = format!("to{}", uuid::Uuid::new_v4().simple());
    let spec = json!({"kind": "k", "queue": q, "timeout": "1s", "max_attempts": 3, "backoff": {"initial": "1h", "jitter": 0.0}});
    let (_, a) = n.call("POST", "/v1/tasks", Some(spec.clone())).await;
    let (_, b) = n.call("POST", "/v1/tasks", Some(spec.clone())).await;
    let got = n
        .claim(&q, json!({"worker": "w", "lease": "30s", "limit": 2}))
        .await;
    assert_eq!(got.len(), 2);
    for t in &got {
        let attempted =
            chrono::DateTime::parse_from_rfc3339(t["attempted_at"].as_str().unwrap()).unwrap();
        let exp = chrono::DateTime::parse_from_rfc3339(t["lease"]["expires_at"].as_str().unwrap())
            .unwrap();
        assert!(
            exp - attempted <= chrono::TimeDelta::try_seconds(1).unwrap(),
            "lease outlives the timeout: {t}"
        );
    }
    let lease = |id: &Value| got.iter().find(|t| t["id"] == *id).unwrap()["lease"]["token"].clone();
    // Heartbeats inside the timeout work, but cannot extend past it.
    let (st, hb) = n
        .call(
            "POST",
            &format!("/v1/tasks/{}/heartbeat", a["id"]),
            Some(json!({"lease": lease(&a["id"]), "extend": "1h"})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{hb}");
    assert!(
        hb["lease_expires_at"].as_str().unwrap()
            <= got[0]["lease"]["expires_at"]
                .as_str()
                .unwrap()
                .max(got[1]["lease"]["expires_at"].as_str().unwrap())
    );
    clock.advance(Duration::from_millis(1300));
    let (st, v) = n
        .call(
            "POST",
            &format!("/v1/tasks/{}/heartbeat", a["id"]),
            Some(json!({"lease": lease(&a["id"])})),
        )
        .await;
    let (st2, v2) = n
        .call(
            "POST",
            &format!("/v1/tasks/{}/complete", b["id"]),
            Some(json!({"lease": lease(&b["id"]), "result": 1})),
        )
        .await;
    // The rescuer may have got there first (lease_lost); either way the attempt failed with
    // `timeout` and nothing completed.
    for (st, v) in [(st, v), (st2, v2)] {
        assert_eq!(st, StatusCode::CONFLICT, "{v}");
        assert!(["timed_out", "lease_lost"].contains(&code(&v)), "{v}");
    }
    for id in [&a["id"], &b["id"]] {
        let t = n.task(id.as_i64().unwrap()).await;
        assert_eq!(t["state"], "retryable", "{t}");
        assert_eq!(t["errors"][0]["message"], "timeout", "{t}");
        assert!(t["result"].is_null(), "{t}");
    }
    // A worker that goes silent is rescued at the deadline, with `timeout`.
    let (_, c) = n.call("POST", "/v1/tasks", Some(spec)).await;
    let got = n.claim(&q, json!({"worker": "w", "lease": "1h"})).await;
    assert_eq!(got[0]["id"], c["id"]);
    let t = n.task(c["id"].as_i64().unwrap()).await;
    assert_eq!(
        t["state"], "running",
        "not rescued before its deadline: {t}"
    );
    clock.advance(Duration::from_millis(1300));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let t = n.task(c["id"].as_i64().unwrap()).await;
        if t["state"] == "retryable" {
            assert_eq!(t["errors"][0]["message"], "timeout", "{t}");
            break;
        }
        assert!(Instant::now() < deadline, "never rescued: {t}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Issue 12 (asyncflow): a task passes through stages under one id, claims pick stages, every
/// attempt lands in the run log with its own trace id, and a waiting task changes by PATCH under
/// its ETag; a running one only with its lease.
async fn stages_run_log_and_updates(n: Node) {
    let q = format!("s{}", uuid::Uuid::new_v4().simple());
    let (st, t) = n
        .call(
            "POST",
            "/v1/tasks",
            Some(json!({"queue": q, "kind": "order", "stage": "fetch", "payload": {"n": 1}})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{t}");
    let id = t["id"].as_i64().unwrap();
    assert!(n
        .claim(&q, json!({"worker": "w", "stages": ["ship"]}))
        .await
        .is_empty());
    let got = n
        .claim(&q, json!({"worker": "w", "stages": ["fetch"]}))
        .await;
    assert_eq!(got.len(), 1);
    let lease = got[0]["lease"]["token"].as_str().unwrap().to_string();
    let attempt_trace = got[0]["lease"]["trace_id"].as_str().unwrap().to_string();
    assert_eq!(attempt_trace.len(), 32);
    assert_ne!(Some(attempt_trace.as_str()), got[0]["trace_id"].as_str());
    // A running task: PATCH needs its lease, and then takes only payload/progress.
    let (st, v) = n.patch(id, json!({"progress": 10})).await;
    assert_eq!(
        (st, code(&v)),
        (StatusCode::CONFLICT, "invalid_state"),
        "{v}"
    );
    let (st, v) = n.patch(id, json!({"progress": 10, "lease": lease})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["progress"], json!(10));
    // Bad hand-offs are refused and change nothing.
    let (st, v) = n
        .call(
            "POST",
            &format!("/v1/tasks/{id}/complete"),
            Some(json!({"lease": lease, "payload": {"x": 1}})),
        )
        .await;
    assert_eq!(
        (st, code(&v)),
        (StatusCode::BAD_REQUEST, "invalid_request"),
        "{v}"
    );
    let (st, v) = n
        .call(
            "POST",
            &format!("/v1/tasks/{id}/complete"),
            Some(json!({"lease": lease, "next_stage": ""})),
        )
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("next_stage"),
        "{v}"
    );
    let (st, v) = n
        .call(
            "POST",
            &format!("/v1/tasks/{id}/complete"),
            Some(
                json!({"lease": lease, "result": {"fetched": true}, "next_stage": "ship",
                        "payload": {"n": 2}, "priority": 3, "run_in": "1h"}),
            ),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["state"], "scheduled");
    let t = n.task(id).await;
    assert_eq!(t["stage"], "ship");
    assert_eq!(t["stages_done"], json!(["fetch"]));
    assert_eq!(
        (t["attempt"].as_i64(), t["priority"].as_i64()),
        (Some(0), Some(3))
    );
    assert_eq!(t["payload"], json!({"n": 2}));
    assert_eq!(t["run_count"], 1);
    assert_eq!(t["runs"][0]["outcome"], "completed");
    assert_eq!(t["runs"][0]["stage"], "fetch");
    assert_eq!(
        t["runs"][0]["trace_id"].as_str(),
        Some(attempt_trace.as_str())
    );
    assert!(t["runs"][0]["duration_ms"].as_i64().is_some(), "{t}");
    // The waiting task changes under its ETag; a stale ETag gets 412 and changes nothing.
    let resp = n
        .http
        .get(format!("{}/v1/tasks/{id}", n.base))
        .send()
        .await
        .unwrap();
    let etag = resp.headers()["etag"].to_str().unwrap().to_string();
    let patch = |body: Value, if_match: &str| {
        n.http
            .patch(format!("{}/v1/tasks/{id}", n.base))
            .header("if-match", if_match)
            .json(&body)
            .send()
    };
    let r = patch(json!({"run_in": "0s", "priority": 9, "node": null}), &etag)
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let new_etag = r.headers()["etag"].to_str().unwrap().to_string();
    assert_ne!(new_etag, etag);
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        (v["state"].as_str(), v["priority"].as_i64()),
        (Some("available"), Some(9))
    );
    let r = patch(json!({"priority": 1}), &etag).await.unwrap();
    assert_eq!(r.status(), StatusCode::PRECONDITION_FAILED);
    let v: Value = r.json().await.unwrap();
    assert_eq!(code(&v), "version_mismatch", "{v}");
    assert_eq!(n.task(id).await["priority"], 9);
    for (body, want) in [
        (json!({}), "invalid_request"),
        (json!({"max_attempts": 0}), "invalid_request"),
        (json!({"queue": ""}), "invalid_request"),
        (json!({"priority": "high"}), "invalid_request"),
        (json!({"colour": "red"}), "invalid_request"),
        (
            json!({"run_at": "2030-01-01T00:00:00Z", "run_in": "1s"}),
            "invalid_request",
        ),
    ] {
        let (st, v) = n.patch(id, body.clone()).await;
        assert!(st.is_client_error(), "{body}: {st} {v}");
        assert_eq!(code(&v), want, "{body}: {v}");
    }
    let (st, v) = n
        .call("PATCH", "/v1/tasks/999999999", Some(json!({"priority": 1})))
        .await;
    assert_eq!((st, code(&v)), (StatusCode::NOT_FOUND, "not_found"), "{v}");
    // Move it to another queue: it is claimed there, and the last stage finishes it.
    let q2 = format!("{q}-2");
    let (st, v) = n.patch(id, json!({"queue": q2})).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    // Long-polled: on MySQL a claim's SKIP LOCKED passes over a row another transaction's
    // locking scan holds at that instant (a maintenance job of this node), and finds it on
    // the next look.
    let got = n
        .claim(
            &q2,
            json!({"worker": "w", "stages": ["ship"], "wait": "10s"}),
        )
        .await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["attempt"], 1, "attempts count per stage");
    let lease = got[0]["lease"]["token"].as_str().unwrap();
    let (st, v) = n
        .call(
            "POST",
            &format!("/v1/tasks/{id}/complete"),
            Some(json!({"lease": lease, "result": "shipped"})),
        )
        .await;
    assert_eq!(
        (st, v["state"].as_str()),
        (StatusCode::OK, Some("completed")),
        "{v}"
    );
    let t = n.task(id).await;
    assert_eq!(t["run_count"], 2);
    assert_eq!(t["runs"][1]["stage"], "ship");
    // The dashboard's task page shows the stages passed and the run log.
    let html = n
        .http
        .get(format!("{}/ui/tasks/{id}", n.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("id=\"runs\""), "{html}");
    assert!(html.contains("fetch → <strong>ship</strong>"), "{html}");
    assert!(
        html.contains(&attempt_trace),
        "the attempt's trace id is listed"
    );
    let (st, v) = n.patch(id, json!({"priority": 1})).await;
    assert_eq!(
        (st, code(&v)),
        (StatusCode::CONFLICT, "invalid_state"),
        "{v}"
    );
}

/// Issue 12 item 9: worker reports over HTTP: the list shows the last report, the dashboard
/// page lists it, a worker silent for three intervals is lost, bad reports are 400s.
async fn worker_reports_over_http(n: Node) {
    let (st, v) = n
        .call(
            "POST",
            "/v1/workers/w%201/report",
            Some(
                json!({"state": "work", "tasks": [7, 8], "queue": "q", "interval": "100ms",
                        "concurrency": 2, "pid": 42}),
            ),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(
        (v["name"].as_str(), v["state"].as_str()),
        (Some("w 1"), Some("work"))
    );
    let (_, l) = n.call("GET", "/v1/workers", None).await;
    assert_eq!(l["workers"][0]["report"]["tasks"], json!([7, 8]));
    let html = n
        .http
        .get(format!("{}/ui/workers", n.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        html.contains("w 1") && html.contains("/ui/tasks/7"),
        "{html}"
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let (_, l) = n.call("GET", "/v1/workers", None).await;
    assert_eq!(l["workers"][0]["state"], "lost", "{l}");
    for body in [
        json!({"state": "lost", "interval": "5s"}),
        json!({"state": "idle", "interval": "1ms"}),
        json!({"state": "idle"}),
        json!({"state": "nap", "interval": "5s"}),
        json!({"state": "idle", "interval": "5s", "queue": ""}),
        json!({"state": "idle", "interval": "5s", "tasks": vec![1; 10_001]}),
    ] {
        let (st, v) = n
            .call("POST", "/v1/workers/w2/report", Some(body.clone()))
            .await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{body}: {v}");
    }
    let (_, l) = n.call("GET", "/v1/workers", None).await;
    assert_eq!(
        l["workers"].as_array().unwrap().len(),
        1,
        "no bad report was kept"
    );
}

both!(
    worker_reports_over_http,
    stages_run_log_and_updates,
    hostile_durations_times_and_nul,
    attempt_timeout_is_enforced,
    trace_ids_and_attempt_costs,
    tasks_found_by_trace_id_unique_key_and_worker,
    docket_metrics,
    lifecycle,
    batch_complete_and_fail,
    bad_input_gets_4xx_and_loses_nothing,
    long_poll_wakes_on_insert,
    cancel_retry_and_queues,
    expired_lease_is_rescued,
    openapi_matches_routes,
    bulk_actions_over_a_filter,
    claims_handed_back_on_stop,
);

/// Issue 9: a row inserted with plain SQL wakes a long-polling claimer at once (the statement
/// trigger of migration 0009), with the poll interval set far beyond the test's bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_sql_insert_wakes_claimers() {
    let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
    let n = start(pg_store(&schema).await, "n1", Duration::from_secs(60), None).await;
    let base = n.base.clone();
    let poll = tokio::spawn(async move {
        let t0 = Instant::now();
        let v: Value = reqwest::Client::new()
            .post(format!("{base}/v1/queues/plain/claim"))
            .json(&json!({"worker": "w", "wait": "30s"}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        (t0.elapsed(), v)
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pool = sqlx::PgPool::connect(&pg_url()).await.unwrap();
    sqlx::query(&format!(
        "INSERT INTO {schema}.docket_tasks (queue, kind, payload) VALUES ('plain', 'k', '{{\"by\": \"psql\"}}')"
    ))
    .execute(&pool)
    .await
    .unwrap();
    let (took, v) = poll.await.unwrap();
    assert_eq!(v["tasks"][0]["payload"]["by"], "psql", "{v}");
    assert!(
        took < Duration::from_secs(10),
        "woken after {took:?}: the poll, not NOTIFY"
    );
}

/// Issue 9: silent connections, clients that trickle a header line every so often, and
/// connections past the cap are all closed; a normal request still gets through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_silent_clients_are_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let store = connect(&ConnectOptions::new(url)).await.unwrap();
    store.migrate().await.unwrap();
    let engine = Engine::new(
        store.clone(),
        Arc::new(SystemClock),
        EngineConfig::new("n1", store.backend()),
    );
    let stop = CancellationToken::new();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let limits = docket_server::ConnLimits {
        header_read_timeout: Duration::from_secs(1),
        max_connections: 40,
    };
    tokio::spawn(docket_server::serve_with(
        l,
        AppState::new(engine, stop.clone()),
        limits,
    ));
    // Is the connection closed by the server within `within`?
    async fn closed(mut c: tokio::net::TcpStream, within: Duration, trickle: bool) -> bool {
        let mut buf = [0u8; 256];
        let end = tokio::time::Instant::now() + within;
        if trickle {
            let _ = c.write_all(b"GET /healthz HTTP/1.1\r\n").await;
        }
        loop {
            if trickle {
                let _ = c.write_all(b"X-Slow: 1\r\n").await;
            }
            match tokio::time::timeout_at(
                end.min(tokio::time::Instant::now() + Duration::from_millis(300)),
                c.read(&mut buf),
            )
            .await
            {
                Ok(Ok(0)) | Ok(Err(_)) => return true,
                Ok(Ok(_)) => {}
                Err(_) if tokio::time::Instant::now() >= end => return false,
                Err(_) => {}
            }
        }
    }
    let mut silent = vec![];
    for _ in 0..20 {
        silent.push(tokio::net::TcpStream::connect(addr).await.unwrap());
    }
    let mut slow = vec![];
    for _ in 0..15 {
        slow.push(tokio::net::TcpStream::connect(addr).await.unwrap());
    }
    // 35 of 40 slots are taken: a burst of 10 more finds some refused at once.
    let mut extra = vec![];
    for _ in 0..10 {
        extra.push(tokio::net::TcpStream::connect(addr).await.unwrap());
    }
    let mut refused = 0;
    for c in extra {
        if closed(c, Duration::from_millis(500), false).await {
            refused += 1;
        }
    }
    assert!(
        refused >= 5,
        "only {refused} of 10 over the cap were refused"
    );
    let t0 = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for c in silent {
        set.spawn(closed(c, Duration::from_secs(8), false));
    }
    for c in slow {
        set.spawn(closed(c, Duration::from_secs(8), true));
    }
    while let Some(r) = set.join_next().await {
        assert!(r.unwrap(), "a slow or silent connection stayed open");
    }
    assert!(t0.elapsed() < Duration::from_secs(8));
    let r = reqwest::get(format!("http://{addr}/healthz"))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    stop.cancel();
}

/// Issue 9: clients that give up mid-request (timeouts of a few ms, under load) must not leave
/// pooled connections inside a transaction: afterwards no session of the test's database sits
/// `idle in transaction`, and a normal workload on the same pool sees no failed query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_requests_do_not_poison_connections() {
    let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
    let n = start(pg_store(&schema).await, "n1", Duration::from_secs(1), None).await;
    let q = format!("c{}", uuid::Uuid::new_v4().simple());
    let mut set = tokio::task::JoinSet::new();
    for i in 0..300u64 {
        let (base, q) = (n.base.clone(), q.clone());
        set.spawn(async move {
            let http = reqwest::Client::builder()
                .timeout(Duration::from_micros(500 + (i % 20) * 500))
                .build()
                .unwrap();
            let batch: Vec<Value> = (0..20)
                .map(|j| json!({"kind": "k", "queue": q, "payload": j}))
                .collect();
            let _ = http
                .post(format!("{base}/v1/tasks"))
                .json(&json!({"tasks": batch}))
                .send()
                .await;
            let _ = http
                .post(format!("{base}/v1/queues/{q}/claim"))
                .json(&json!({"worker": "w", "limit": 5, "wait": "1s"}))
                .send()
                .await;
        });
    }
    while set.join_next().await.is_some() {}
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pool = sqlx::PgPool::connect(&pg_url()).await.unwrap();
    let stuck: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' \
         AND now() - state_change > interval '2 seconds'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(stuck, 0, "sessions left idle in a transaction");
    // The same pool serves a normal workload without a single failed query.
    for _ in 0..20 {
        let (st, v) = n
            .call("POST", "/v1/tasks", Some(json!({"kind": "k", "queue": q})))
            .await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
    }
    loop {
        let got = n.claim(&q, json!({"worker": "w2", "limit": 100})).await;
        if got.is_empty() {
            break;
        }
        let items: Vec<Value> = got
            .iter()
            .map(|t| json!({"id": t["id"], "lease": t["lease"]["token"], "result": 1}))
            .collect();
        let (st, v) = n
            .call("POST", "/v1/tasks/complete", Some(json!({"items": items})))
            .await;
        assert_eq!(st, StatusCode::OK, "{v}");
    }
}

/// Two equal nodes on one PostgreSQL: a task enqueued on one wakes a long poll on the other at
/// once (LISTEN/NOTIFY, with the poll interval set far beyond the test's bound), and work split
/// across both nodes runs every task exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_pg_nodes_share_work() {
    let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
    let a = start(
        pg_store(&schema).await,
        "node-a",
        Duration::from_secs(60),
        None,
    )
    .await;
    let b = start(
        pg_store(&schema).await,
        "node-b",
        Duration::from_secs(60),
        None,
    )
    .await;
    let (base, http) = (b.base.clone(), b.http.clone());
    let t0 = Instant::now();
    let waiter = tokio::spawn(async move {
        let r: Value = http
            .post(format!("{base}/v1/queues/x/claim"))
            .json(&json!({"worker": "on-b", "wait": "30s"}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        (r, t0.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (st, v) = a
        .call(
            "POST",
            "/v1/tasks",
            Some(json!({"kind": "k", "queue": "x"})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let (r, took) = waiter.await.unwrap();
    assert_eq!(
        r["tasks"].as_array().unwrap().len(),
        1,
        "{r} after {took:?}"
    );
    assert!(
        took < Duration::from_secs(10),
        "cross-node wake took {took:?}"
    );

    let specs: Vec<Value> = (0..400)
        .map(|i| json!({"kind": "k", "payload": i}))
        .collect();
    a.call("POST", "/v1/tasks", Some(json!({"tasks": specs})))
        .await;
    let mut hs = vec![];
    for (i, node) in [&a, &b, &a, &b].iter().enumerate() {
        let (base, http) = (node.base.clone(), node.http.clone());
        hs.push(tokio::spawn(async move {
            let mut ids = vec![];
            loop {
                let r: Value = http
                    .post(format!("{base}/v1/queues/default/claim"))
                    .json(&json!({"worker": format!("w{i}"), "limit": 9}))
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                let tasks = r["tasks"].as_array().unwrap().clone();
                if tasks.is_empty() {
                    return ids;
                }
                let items: Vec<Value> = tasks
                    .iter()
                    .map(|t| json!({"id": t["id"], "lease": t["lease"]["token"]}))
                    .collect();
                let c: Value = http
                    .post(format!("{base}/v1/tasks/complete"))
                    .json(&json!({"items": items}))
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                assert!(c["results"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|x| x["outcome"] == "ok"));
                ids.extend(tasks.iter().map(|t| t["id"].as_i64().unwrap()));
            }
        }));
    }
    let mut all = vec![];
    for h in hs {
        all.extend(h.await.unwrap());
    }
    let n = all.len();
    all.sort();
    all.dedup();
    assert_eq!((n, all.len()), (400, 400));
    let (_, nodes) = a.call("GET", "/v1/nodes", None).await;
    let nodes = nodes["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2);
    assert!(nodes.iter().all(|n| n["state"] == "active"), "{nodes:?}");
    // Maintenance on both nodes at once: rescue and promotion still happen exactly once.
    let (_, t) = a.call("POST", "/v1/tasks", Some(json!({"kind": "r", "queue": "r", "max_attempts": 5, "backoff": {"initial": "10ms", "jitter": 0.0}}))).await;
    let id = t["id"].as_i64().unwrap();
    b.claim("r", json!({"worker": "dies", "lease": "200ms"}))
        .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let t = a.task(id).await;
        if t["errors"].as_array().unwrap().len() == 1 && t["state"] == "available" {
            break;
        }
        assert!(Instant::now() < deadline, "not rescued: {t}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let t = a.task(id).await;
    assert_eq!(
        t["errors"].as_array().unwrap().len(),
        1,
        "rescued once, not once per node"
    );
    drop(b);
    let _ = a.store.node_list().await.unwrap();
}

fn start_processor() -> (std::process::Child, String) {
    let (child, port) = spawn_processor();
    (child, format!("http://127.0.0.1:{port}/"))
}

/// Starts `examples/processor.py` on a port of its own choosing (it prints `PORT n` once it
/// listens), so no other test can take the port in between.
fn spawn_processor() -> (std::process::Child, u16) {
    use std::io::BufRead;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/processor.py");
    let mut child = std::process::Command::new("python3")
        .arg(script)
        .arg("0")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().expect("piped"))
        .read_line(&mut line)
        .expect("the processor says its port");
    let port = line
        .trim()
        .strip_prefix("PORT ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("processor said {line:?}"));
    (child, port)
}

async fn processes_over_http(n: Node) {
    let (child, url) = start_processor();
    let _guard = KillOnDrop(child);
    let (st, v) = n
        .call(
            "PUT",
            "/v1/namespaces/orders",
            Some(json!({"processor": {"url": url}})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["config"]["retry_policy"]["max_attempts"], 3);
    assert_eq!(v["config"]["process_step_timeout"], "1m");
    let (st, v) = n
        .call(
            "PUT",
            "/v1/namespaces/bad",
            Some(json!({"processor": {"url": "ftp://x"}})),
        )
        .await;
    assert_eq!((st, code(&v)), (StatusCode::BAD_REQUEST, "invalid_request"));
    let (_, v) = n.call("GET", "/v1/namespaces", None).await;
    assert_eq!(v["namespaces"].as_array().unwrap().len(), 1);
    let (st, v) = n
        .call(
            "POST",
            "/v1/namespaces/orders/processes",
            Some(json!({"id": "o1", "args": {"events": ["created"], "response": "hi"}})),
        )
        .await;
    assert_eq!(
        (st, v["response"].clone()),
        (StatusCode::OK, json!("hi")),
        "{v}"
    );
    let (st, v) = n
        .call(
            "POST",
            "/v1/namespaces/orders/processes",
            Some(json!({"id": "o1"})),
        )
        .await;
    assert_eq!((st, code(&v)), (StatusCode::CONFLICT, "process_exists"));
    let (st, v) = n
        .call(
            "POST",
            "/v1/namespaces/orders/processes/o1/call",
            Some(json!({"args": {"events": ["paid"]}})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["response"], json!({"history": [1], "last_event_id": 1}));
    let (st, v) = n
        .call(
            "GET",
            "/v1/namespaces/orders/processes/o1?offset=1&limit=5",
            None,
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["last_event_id"], 2);
    assert_eq!(v["history"].as_array().unwrap().len(), 1);
    assert_eq!(v["history"][0]["payload"], "paid");
    assert_eq!(v["process"]["status"], "running");
    let (st, v) = n
        .call(
            "POST",
            "/v1/namespaces/orders/processes/o1/call",
            Some(json!({"args": {"error": {"reason": "card declined"}}})),
        )
        .await;
    assert_eq!(
        (st, code(&v)),
        (StatusCode::UNPROCESSABLE_ENTITY, "processor_error")
    );
    assert_eq!(v["error"]["details"], json!({"reason": "card declined"}));
    let (st, v) = n
        .call(
            "POST",
            "/v1/namespaces/orders/processes/o1/call",
            Some(json!({})),
        )
        .await;
    assert_eq!(
        (st, code(&v)),
        (StatusCode::CONFLICT, "process_not_running")
    );
    assert_eq!(v["error"]["message"], "process is error");
    let (st, v) = n
        .call(
            "POST",
            "/v1/namespaces/orders/processes/o1/repair",
            Some(json!({"args": {}})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (st, v) = n
        .call(
            "POST",
            "/v1/namespaces/orders/processes/o1/repair",
            Some(json!({})),
        )
        .await;
    assert_eq!((st, code(&v)), (StatusCode::CONFLICT, "process_is_running"));
    let (st, v) = n
        .call(
            "POST",
            "/v1/namespaces/orders/processes/zz/call",
            Some(json!({})),
        )
        .await;
    assert_eq!((st, code(&v)), (StatusCode::NOT_FOUND, "process_not_found"));
    let (st, v) = n
        .call(
            "POST",
            "/v1/namespaces/nope/processes",
            Some(json!({"id": "x"})),
        )
        .await;
    assert_eq!(
        (st, code(&v)),
        (StatusCode::NOT_FOUND, "namespace_not_found")
    );
    let (st, v) = n
        .call(
            "GET",
            "/v1/namespaces/orders/processes/o1?direction=sideways",
            None,
        )
        .await;
    assert_eq!((st, code(&v)), (StatusCode::BAD_REQUEST, "invalid_request"));
    // A removal timer, so every histogram has seen work.
    let init = json!({"id": "gone", "args": {"remove_timer": "200ms"}});
    let (st, _) = n
        .call("POST", "/v1/namespaces/orders/processes", Some(init))
        .await;
    assert_eq!(st, StatusCode::OK);
    let deadline = Instant::now() + Duration::from_secs(20);
    while n
        .call("GET", "/v1/namespaces/orders/processes/gone", None)
        .await
        .0
        == StatusCode::OK
    {
        assert!(Instant::now() < deadline, "not removed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The event stream: every event and lifecycle change of the namespace, in order, resumable.
    let seen = sse(&n, "/v1/events?namespace=orders", 7).await;
    let o1: Vec<(String, Option<i64>)> = seen
        .iter()
        .filter(|v| v["process_id"] == "o1")
        .map(|v| {
            (
                v["kind"].as_str().unwrap().to_string(),
                v["event_id"].as_i64(),
            )
        })
        .collect();
    let want = [
        ("created", None),
        ("event", Some(1)),
        ("event", Some(2)),
        ("failed", None),
        ("repaired", None),
    ];
    let want: Vec<(String, Option<i64>)> = want.iter().map(|(k, e)| (k.to_string(), *e)).collect();
    assert_eq!(o1, want, "{seen:?}");
    assert_eq!(seen[1]["data"]["payload"], "created");
    let gone: Vec<&str> = seen
        .iter()
        .filter(|v| v["process_id"] == "gone")
        .map(|v| v["kind"].as_str().unwrap())
        .collect();
    assert_eq!(gone, vec!["created", "removed"]);
    let seqs: Vec<i64> = seen.iter().map(|v| v["seq"].as_i64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
    let resumed = sse(
        &n,
        &format!("/v1/events?namespace=orders&after={}", seqs[2]),
        1,
    )
    .await;
    assert_eq!(resumed[0]["seq"].as_i64(), Some(seqs[3]));
    // Live: three open streams (one shared tail) all see a process created after they opened.
    let live = format!("/v1/events?namespace=orders&after={}", seqs[seqs.len() - 1]);
    let create = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        n.call(
            "POST",
            "/v1/namespaces/orders/processes",
            Some(json!({"id": "zz-live", "args": {"response": "hi"}})),
        )
        .await
    };
    let (a, b, c, (st, v)) = tokio::join!(
        sse(&n, &live, 1),
        sse(&n, &live, 1),
        sse(&n, &live, 1),
        create
    );
    assert_eq!(st, StatusCode::OK, "{v}");
    for got in [a, b, c] {
        assert_eq!(
            (got[0]["process_id"].as_str(), got[0]["kind"].as_str()),
            (Some("zz-live"), Some("created")),
            "{got:?}"
        );
    }
    // /metrics parses as Prometheus text and has progressor's eight histograms.
    let text = n
        .http
        .get(format!("{}/metrics", n.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let lines = text.lines().map(|l| Ok(l.to_string()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("Prometheus text format");
    for name in [
        "progressor_calls_scanning_duration_ms",
        "progressor_timers_scanning_duration_ms",
        "progressor_zombie_collection_duration_ms",
        "progressor_request_preparing_duration_ms",
        "progressor_task_processing_duration_ms",
        "progressor_task_completion_duration_ms",
        "progressor_process_removing_duration_ms",
        "progressor_notification_duration_ms",
    ] {
        let found = scrape
            .samples
            .iter()
            .any(|s| s.metric == format!("{name}_count"));
        assert!(found, "{name} missing in:\n{text}");
    }
    let labelled = scrape.samples.iter().any(|s| {
        s.metric == "progressor_task_processing_duration_ms_count"
            && s.labels.get("namespace") == Some("orders")
            && s.labels.get("task_type") == Some("call")
    });
    assert!(labelled, "labelled by namespace and task_type");
    assert!(
        text.contains("completion_type=\"error\""),
        "completion_type label"
    );
    // trace: every task of the process with the events it produced.
    let (st, v) = n
        .call("GET", "/v1/namespaces/orders/processes/o1/trace", None)
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let kinds: Vec<&str> = v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, vec!["init", "call", "call", "repair"]);
    assert_eq!(v["tasks"][0]["events"][0]["payload"], "created");
    assert_eq!(v["tasks"][2]["state"], "discarded");
    // list and simple-repair.
    let (_, v) = n
        .call(
            "GET",
            "/v1/namespaces/orders/processes?status=running",
            None,
        )
        .await;
    assert_eq!(v["processes"][0]["id"], "o1");
    let again = json!({"args": {"error": "again"}});
    n.call(
        "POST",
        "/v1/namespaces/orders/processes/o1/call",
        Some(again),
    )
    .await;
    let (_, v) = n
        .call("GET", "/v1/namespaces/orders/processes?status=error", None)
        .await;
    assert_eq!(v["processes"].as_array().unwrap().len(), 1);
    let (st, v) = n
        .call(
            "POST",
            "/v1/namespaces/orders/processes/o1/simple-repair",
            None,
        )
        .await;
    assert_eq!(
        (st, v["process"]["status"].as_str()),
        (StatusCode::OK, Some("running")),
        "{v}"
    );
    let (st, v) = n
        .call(
            "POST",
            "/v1/namespaces/orders/processes/o1/simple-repair",
            None,
        )
        .await;
    assert_eq!((st, code(&v)), (StatusCode::CONFLICT, "process_is_running"));
}

/// Reads `n` SSE events from `path` (their `data` as JSON), with a generous deadline.
async fn sse(n: &Node, path: &str, count: usize) -> Vec<Value> {
    let mut resp = n
        .http
        .get(format!("{}{}", n.base, path))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let mut text = String::new();
    let mut out: Vec<Value> = vec![];
    let deadline = Instant::now() + Duration::from_secs(20);
    while out.len() < count {
        let chunk = match tokio::time::timeout_at(deadline.into(), resp.chunk()).await {
            Ok(c) => c.unwrap().expect("stream open"),
            Err(_) => panic!(
                "only {} of {count} SSE events in 20 s: {out:?}; pending {text:?}",
                out.len()
            ),
        };
        text.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = text.find("\n\n") {
            let block: String = text.drain(..end + 2).collect();
            if let Some(data) = block
                .lines()
                .find_map(|l| l.strip_prefix("data: ").or_else(|| l.strip_prefix("data:")))
            {
                out.push(serde_json::from_str(data).unwrap());
            }
        }
    }
    out
}

/// Kills the processor when the test ends, passed or failed.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

mod processes {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn pg() {
        super::processes_over_http(super::pg().await).await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        super::processes_over_http(super::sqlite().await).await;
    }
}

/// Issue 26 item 2: batches over HTTP — create with callbacks, bad specs refused with nothing
/// written, progress, the callback enqueued once with counts and failed ids when every task
/// finished, an open batch taking tasks until sealed, a settled batch refusing more.
async fn batches_over_http(n: Node) {
    let cb = |kind: &str| json!({"kind": kind, "queue": "bcb", "payload": {"to": kind}});
    let (st, v) = n
        .call(
            "POST",
            "/v1/batches",
            Some(json!({
                "name": "import",
                "tasks": [{"kind": "a", "queue": "bq"}, {"kind": "b", "queue": "bq", "max_attempts": 1}],
                "callbacks": {"completed": cb("done"), "succeeded": cb("good")}
            })),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let id = v["batch"]["id"].as_i64().unwrap();
    assert_eq!(v["batch"]["total"], 2);
    assert_eq!(v["batch"]["open"], false);
    assert_eq!(v["batch"]["counts"]["available"], 2);
    assert_eq!(v["tasks"][0]["batch_id"], id);

    // Bad specs: 4xx, and no batch or task written.
    for (body, want) in [
        (json!({"tasks": []}), "open"),
        (
            json!({"tasks": [{"kind": "a", "unique_key": "u"}]}),
            "unique_key",
        ),
        (
            json!({"tasks": [{"kind": "a"}], "callbacks": {"completed": {"kind": "c", "run_at": "2030-01-01T00:00:00Z"}}}),
            "run_in",
        ),
        (
            json!({"tasks": [{"kind": "a"}], "callbacks": {"completed": {"kind": "c", "payload": [1]}}}),
            "payload",
        ),
        (
            json!({"tasks": [{"kind": "a"}], "callbacks": {"done": {"kind": "c"}}}),
            "done",
        ),
        (
            json!({"tasks": [{"kind": "a", "run_in": "1000000y"}]}),
            "longest",
        ),
        (json!({"name": "", "tasks": [{"kind": "a"}]}), "name"),
    ] {
        let (st, v) = n.call("POST", "/v1/batches", Some(body.clone())).await;
        assert!(st.is_client_error(), "{body}: {st} {v}");
        assert!(
            v["error"]["message"].as_str().unwrap_or("").contains(want),
            "{body}: {v}"
        );
    }
    let (_, list) = n.call("GET", "/v1/batches", None).await;
    assert_eq!(list["batches"].as_array().unwrap().len(), 1);
    let (_, q) = n.call("GET", "/v1/queues/default", None).await;
    assert_eq!(q["counts"]["available"].as_i64().unwrap_or(0), 0);
    for (path, want) in [
        ("/v1/batches/999999", StatusCode::NOT_FOUND),
        ("/v1/batches/abc", StatusCode::BAD_REQUEST),
        ("/v1/batches/-1", StatusCode::BAD_REQUEST),
        ("/v1/batches?limit=0", StatusCode::BAD_REQUEST),
        ("/v1/batches?limit=101", StatusCode::BAD_REQUEST),
    ] {
        assert_eq!(n.call("GET", path, None).await.0, want, "{path}");
    }

    // A sealed batch that has not settled takes more tasks (a running member fanning out).
    let (st, v) = n
        .call(
            "POST",
            &format!("/v1/batches/{id}/tasks"),
            Some(json!({"tasks": [{"kind": "a", "queue": "bq"}]})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(v["batch"]["total"], 3);
    assert_eq!(v["tasks"][0]["batch_id"], id);

    // Two complete, one fails for good: `completed` runs, `succeeded` does not.
    let got = n.claim("bq", json!({"worker": "w", "limit": 3})).await;
    assert_eq!(got.len(), 3);
    let b = got.iter().find(|t| t["kind"] == "b").unwrap();
    for a in got.iter().filter(|t| t["kind"] == "a") {
        let (st, _) = n
            .call(
                "POST",
                &format!("/v1/tasks/{}/complete", a["id"]),
                Some(json!({"lease": a["lease"]["token"]})),
            )
            .await;
        assert_eq!(st, StatusCode::OK);
    }
    let (_, mid) = n.call("GET", &format!("/v1/batches/{id}"), None).await;
    assert_eq!(
        (mid["done"].as_i64(), mid["total"].as_i64()),
        (Some(2), Some(3))
    );
    assert!(mid["settled_at"].is_null());
    let (st, _) = n
        .call(
            "POST",
            &format!("/v1/tasks/{}/fail", b["id"]),
            Some(json!({"lease": b["lease"]["token"], "error": "no"})),
        )
        .await;
    assert_eq!(st, StatusCode::OK);
    let deadline = Instant::now() + Duration::from_secs(20);
    let settled = loop {
        let (_, v) = n.call("GET", &format!("/v1/batches/{id}"), None).await;
        if !v["settled_at"].is_null() {
            break v;
        }
        assert!(Instant::now() < deadline, "not settled: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(settled["counts"]["discarded"], 1);
    let fired = settled["fired"].as_object().unwrap();
    assert_eq!(fired.keys().collect::<Vec<_>>(), ["completed"]);
    let cb_task = n.task(fired["completed"].as_i64().unwrap()).await;
    assert_eq!(cb_task["kind"], "done");
    assert_eq!(cb_task["queue"], "bcb");
    assert_eq!(cb_task["payload"]["to"], "done");
    assert_eq!(cb_task["payload"]["batch"]["failed_ids"], json!([b["id"]]));
    assert_eq!(cb_task["payload"]["batch"]["name"], "import");
    assert_eq!(cb_task["payload"]["batch"]["total"], 3);
    assert_eq!(cb_task["payload"]["batch"]["completed"], 2);
    let (st, v) = n
        .call(
            "POST",
            &format!("/v1/batches/{id}/tasks"),
            Some(json!({"tasks": [{"kind": "late"}]})),
        )
        .await;
    assert_eq!(st, StatusCode::CONFLICT, "{v}");

    // An open batch: tasks in several requests; callbacks only after the seal.
    let (st, v) = n
        .call(
            "POST",
            "/v1/batches",
            Some(json!({"open": true, "callbacks": {"succeeded": cb("fine")}})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let open = v["batch"]["id"].as_i64().unwrap();
    assert_eq!(v["batch"]["open"], true);
    let (st, v) = n
        .call(
            "POST",
            &format!("/v1/batches/{open}/tasks"),
            Some(json!({"tasks": [{"kind": "o", "queue": "oq"}]})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(v["batch"]["total"], 1);
    let got = n.claim("oq", json!({"worker": "w"})).await;
    n.call(
        "POST",
        &format!("/v1/tasks/{}/complete", got[0]["id"]),
        Some(json!({"lease": got[0]["lease"]["token"]})),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (_, v) = n.call("GET", &format!("/v1/batches/{open}"), None).await;
    assert!(v["settled_at"].is_null(), "settled while open: {v}");
    let (st, v) = n
        .call("POST", &format!("/v1/batches/{open}/seal"), None)
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["open"], false);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, v) = n.call("GET", &format!("/v1/batches/{open}"), None).await;
        if !v["settled_at"].is_null() {
            assert!(v["fired"]["succeeded"].is_i64(), "{v}");
            break;
        }
        assert!(Instant::now() < deadline, "not settled after the seal: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let text = n
        .http
        .get(format!("{}/metrics", n.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        // The recorder is the test process's: other tests' batches count too.
        text.contains("docket_batch_callbacks_total{callback=\"completed\"}"),
        "{text}"
    );
}

mod batches {
    use super::*;
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        batches_over_http(pg().await).await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        batches_over_http(super::sqlite().await).await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mysql() {
        batches_over_http(super::mysql().await).await;
    }
}

/// Issue 26 item 3: rate limits over HTTP — bad specs are 400 with nothing written, a task
/// naming no limit is 422, a window limit admits its budget and holds the rest (available, no
/// attempt), a queue's default key applies to its tasks, totals and metrics show it, delete.
async fn rate_limits_over_http(n: Node) {
    for (name, body, want) in [
        ("x", json!({"kind": "window", "limit": 5}), "period"),
        (
            "x",
            json!({"kind": "concurrent", "limit": 5, "period": "1s"}),
            "period",
        ),
        (
            "x",
            json!({"kind": "leaky", "limit": 5, "period": "1s"}),
            "leaky",
        ),
        (
            "x",
            json!({"kind": "window", "limit": 0, "period": "1s"}),
            "limit",
        ),
        (
            "x",
            json!({"kind": "window", "limit": 5, "period": "1000000years"}),
            "duration",
        ),
        (
            "x",
            json!({"kind": "bucket", "limit": 5, "period": "2years"}),
            "period",
        ),
        (
            "x",
            json!({"kind": "window", "limit": 5, "period": "1s", "extra": 1}),
            "extra",
        ),
        ("a:b", json!({"kind": "concurrent", "limit": 5}), "name"),
    ] {
        let (st, v) = n
            .call("PUT", &format!("/v1/rate-limits/{name}"), Some(body))
            .await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{name} {v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(want),
            "{v}"
        );
    }
    let (_, v) = n.call("GET", "/v1/rate-limits", None).await;
    assert_eq!(v["rate_limits"], json!([]));
    let (st, v) = n
        .call(
            "POST",
            "/v1/tasks",
            Some(json!({"kind": "k", "rate_limit": "nosuch:1"})),
        )
        .await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("nosuch"),
        "{v}"
    );
    let (st, v) = n
        .call(
            "PUT",
            "/v1/rate-limits/mail",
            Some(json!({"kind": "window", "limit": 2, "period": "1h"})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["period"], "1h");
    // The queue's default key.
    let (st, v) = n
        .call(
            "PUT",
            "/v1/queues/rlq",
            Some(json!({"rate_limit": "mail:eu"})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let mut ids = vec![];
    for _ in 0..3 {
        let (st, v) = n
            .call(
                "POST",
                "/v1/tasks",
                Some(json!({"kind": "k", "queue": "rlq"})),
            )
            .await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
        assert_eq!(v["rate_limit"], "mail:eu");
        ids.push(v["id"].as_i64().unwrap());
    }
    let got = n.claim("rlq", json!({"worker": "w", "limit": 10})).await;
    assert_eq!(got.len(), 2);
    assert!(n
        .claim("rlq", json!({"worker": "w", "limit": 10}))
        .await
        .is_empty());
    let (_, t) = n.call("GET", &format!("/v1/tasks/{}", ids[2]), None).await;
    assert_eq!(
        (t["state"].as_str(), t["attempt"].as_i64()),
        (Some("available"), Some(0))
    );
    let (_, v) = n.call("GET", "/v1/rate-limits/mail", None).await;
    assert_eq!(
        (
            v["keys"].as_i64(),
            v["admitted"].as_i64(),
            v["blocked"].as_i64()
        ),
        (Some(1), Some(2), Some(1))
    );
    let text = n
        .http
        .get(format!("{}/metrics", n.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("docket_rate_limit_admitted_total{limit=\"mail\"}"),
        "{text}"
    );
    // A raised limit applies at once.
    let (st, _) = n
        .call(
            "PUT",
            "/v1/rate-limits/mail",
            Some(json!({"kind": "window", "limit": 10, "period": "1h"})),
        )
        .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(
        n.claim("rlq", json!({"worker": "w", "limit": 10}))
            .await
            .len(),
        1
    );
    let (st, _) = n.call("DELETE", "/v1/rate-limits/mail", None).await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    let (st, v) = n.call("GET", "/v1/rate-limits/mail", None).await;
    assert_eq!(st, StatusCode::NOT_FOUND, "{v}");
    let (st, _) = n.call("DELETE", "/v1/rate-limits/mail", None).await;
    assert_eq!(st, StatusCode::NOT_FOUND);
}

mod rate_limits {
    use super::*;
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        rate_limits_over_http(pg().await).await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        rate_limits_over_http(super::sqlite().await).await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mysql() {
        rate_limits_over_http(super::mysql().await).await;
    }
}

/// Issue 26 item 1: workflows over HTTP — a bad graph (cycle, unknown ref, duplicate ref,
/// self-dependency) is refused with nothing written; a task runs only once its dependencies
/// completed and sees their results; a failure cancels what waits on it, transitively, except
/// across an `ignore_failure` edge; the graph shows each task's state; cancel stops the rest.
async fn workflows_over_http(n: Node) {
    let task = |r: &str, deps: Value| json!({"ref": r, "kind": r, "queue": "wq", "depends_on": deps, "max_attempts": 1});
    for (tasks, want) in [
        (
            json!([task("a", json!(["b"])), task("b", json!(["a"]))]),
            "cycle",
        ),
        (json!([task("a", json!(["zz"]))]), "not a ref"),
        (json!([task("a", json!([])), task("a", json!([]))]), "twice"),
        (json!([task("a", json!(["a"]))]), "itself"),
        (json!([]), "1 to"),
        (json!([{"ref": "a", "kind": "k", "colour": 1}]), "colour"),
    ] {
        let (st, v) = n
            .call("POST", "/v1/workflows", Some(json!({"tasks": tasks})))
            .await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{tasks}: {v}");
        assert!(
            v["error"]["message"].as_str().unwrap_or("").contains(want),
            "{tasks}: {v}"
        );
    }
    let (_, q) = n.call("GET", "/v1/queues/wq", None).await;
    assert_eq!(q["counts"]["available"].as_i64().unwrap_or(0), 0, "{q}");

    // a → b → c; a → d (ignores a's failure); e alone.
    let (st, v) = n
        .call(
            "POST",
            "/v1/workflows",
            Some(json!({"name": "etl", "tasks": [
                task("a", json!([])),
                task("b", json!(["a"])),
                task("c", json!(["b"])),
                task("d", json!([{"ref": "a", "ignore_failure": true}])),
                task("e", json!([])),
            ], "callbacks": {"completed": {"kind": "etl_done", "queue": "wcb"}}})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let id = v["workflow"]["batch"]["id"].as_i64().unwrap();
    let waiting: Vec<&str> = v["workflow"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["waiting"] == true)
        .map(|t| t["ref"].as_str().unwrap())
        .collect();
    assert_eq!(waiting, ["b", "c", "d"]);
    // Only a and e can run; a fails for good.
    let got = n.claim("wq", json!({"worker": "w", "limit": 10})).await;
    let mut kinds: Vec<&str> = got.iter().map(|t| t["kind"].as_str().unwrap()).collect();
    kinds.sort_unstable();
    assert_eq!(kinds, ["a", "e"]);
    for t in &got {
        let (verb, body) = if t["kind"] == "a" {
            ("fail", json!({"lease": t["lease"]["token"], "error": "no"}))
        } else {
            (
                "complete",
                json!({"lease": t["lease"]["token"], "result": {"e": 1}}),
            )
        };
        let (st, r) = n
            .call("POST", &format!("/v1/tasks/{}/{verb}", t["id"]), Some(body))
            .await;
        assert_eq!(st, StatusCode::OK, "{r}");
    }
    // b and c are cancelled; d runs and sees a's (missing) result.
    let deadline = Instant::now() + Duration::from_secs(20);
    let d = loop {
        let got = n
            .claim("wq", json!({"worker": "w", "limit": 10, "wait": "1s"}))
            .await;
        if let Some(d) = got.first() {
            assert_eq!(got.len(), 1, "{got:?}");
            break d.clone();
        }
        assert!(Instant::now() < deadline, "d was never released");
    };
    assert_eq!(d["kind"], "d");
    assert_eq!(d["deps"], json!({"a": null}));
    // The cascade reaches c in the round after b's cancel: wait for it.
    let deadline = Instant::now() + Duration::from_secs(20);
    let w = loop {
        let (_, w) = n.call("GET", &format!("/v1/workflows/{id}"), None).await;
        if w["tasks"][2]["state"] == "cancelled" {
            break w;
        }
        assert!(Instant::now() < deadline, "c not cancelled: {w}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let state = |r: &str| {
        w["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["ref"] == r)
            .unwrap()["state"]
            .clone()
    };
    assert_eq!(state("a"), "discarded");
    assert_eq!(state("b"), "cancelled");
    assert_eq!(state("c"), "cancelled");
    assert_eq!(state("d"), "running");
    assert_eq!(state("e"), "completed");
    n.call(
        "POST",
        &format!("/v1/tasks/{}/complete", d["id"]),
        Some(json!({"lease": d["lease"]["token"]})),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, w) = n.call("GET", &format!("/v1/workflows/{id}"), None).await;
        if !w["batch"]["settled_at"].is_null() {
            assert!(w["batch"]["fired"]["completed"].is_i64(), "{w}");
            break;
        }
        assert!(Instant::now() < deadline, "not settled: {w}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A settled workflow takes no tasks (409); retry it: a runs again now, b and c wait for
    // it again; d and e (completed) do not run again.
    let more = json!({"tasks": [task("late", json!([]))]});
    let (st, v) = n
        .call("POST", &format!("/v1/workflows/{id}/tasks"), Some(more))
        .await;
    assert_eq!(st, StatusCode::CONFLICT, "{v}");
    let (st, w) = n
        .call("POST", &format!("/v1/workflows/{id}/retry"), None)
        .await;
    assert_eq!(st, StatusCode::OK, "{w}");
    let shown: Vec<(String, bool)> = w["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["state"].as_str().unwrap().to_string(),
                t["waiting"] == true,
            )
        })
        .collect();
    let want: Vec<(String, bool)> = [
        ("available", false),
        ("scheduled", true),
        ("scheduled", true),
        ("completed", false),
        ("completed", false),
    ]
    .iter()
    .map(|(s, w)| (s.to_string(), *w))
    .collect();
    assert_eq!(shown, want, "{w}");
    assert!(w["batch"]["settled_at"].is_null(), "{w}");
    // Works whatever is claimable until `kinds` all ran (each once), completing each.
    let n = &n;
    let run = |kinds: &'static [&'static str]| async move {
        let mut seen: Vec<String> = vec![];
        let deadline = Instant::now() + Duration::from_secs(20);
        while seen.len() < kinds.len() {
            assert!(
                Instant::now() < deadline,
                "ran {seen:?}, not all of {kinds:?}"
            );
            for t in n
                .claim("wq", json!({"worker": "w", "limit": 10, "wait": "1s"}))
                .await
            {
                seen.push(t["kind"].as_str().unwrap().to_string());
                let (st, r) = n
                    .call(
                        "POST",
                        &format!("/v1/tasks/{}/complete", t["id"]),
                        Some(json!({"lease": t["lease"]["token"], "result": t["kind"]})),
                    )
                    .await;
                assert_eq!(st, StatusCode::OK, "{r}");
            }
        }
        seen.sort();
        assert_eq!(seen, kinds, "each once");
    };
    run(&["a"]).await;
    // Added at run time while b is next: f after b, and a sub-workflow after f.
    for (body, want) in [
        (
            json!({"tasks": [task("a", json!([]))]}),
            "already in the workflow",
        ),
        (json!({"tasks": [task("f", json!(["nope"]))]}), "not a ref"),
        (json!({"tasks": [task("f/x", json!([]))]}), "'/'"),
    ] {
        let (st, v) = n
            .call("POST", &format!("/v1/workflows/{id}/tasks"), Some(body))
            .await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(want),
            "{v}"
        );
    }
    let (st, v) = n
        .call(
            "POST",
            &format!("/v1/workflows/{id}/tasks"),
            Some(json!({"tasks": [task("f", json!(["b"])), task("h", json!(["e"]))],
                "workflows": [{"ref": "sub", "depends_on": ["f"], "tasks": [task("g", json!([]))]}]})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(v["tasks"].as_array().unwrap().len(), 3);
    let refs: Vec<&str> = v["workflow"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["ref"].as_str().unwrap())
        .collect();
    assert_eq!(refs, ["a", "b", "c", "d", "e", "f", "h", "sub/g"]);
    // h's dependency (e) had completed: h was released before the answer.
    assert_eq!(
        (
            &v["workflow"]["tasks"][6]["state"],
            &v["workflow"]["tasks"][6]["waiting"]
        ),
        (&json!("available"), &json!(false)),
        "{v}"
    );
    assert_eq!(v["workflow"]["tasks"][7]["depends_on"], json!(["f"]), "{v}");
    for (path, want) in [
        ("/v1/workflows/999999/tasks", StatusCode::NOT_FOUND),
        ("/v1/workflows/0/tasks", StatusCode::BAD_REQUEST),
        ("/v1/workflows/999999/retry", StatusCode::NOT_FOUND),
    ] {
        let (st, v) = n
            .call("POST", path, Some(json!({"tasks": [task("q", json!([]))]})))
            .await;
        assert_eq!(st, want, "{path}: {v}");
    }
    run(&["b", "h"]).await;
    run(&["c", "f"]).await;
    run(&["g"]).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, w) = n.call("GET", &format!("/v1/workflows/{id}"), None).await;
        if !w["batch"]["settled_at"].is_null() {
            assert_eq!(w["batch"]["counts"]["completed"], 8, "{w}");
            assert!(w["batch"]["fired"]["completed"].is_i64(), "{w}");
            break;
        }
        assert!(Instant::now() < deadline, "not settled again: {w}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A chain released step by step sees each result; cancel stops what is left.
    let (_, v) = n
        .call(
            "POST",
            "/v1/workflows",
            Some(json!({"tasks": [task("x", json!([])), task("y", json!(["x"])), task("z", json!(["y"]))]})),
        )
        .await;
    let id2 = v["workflow"]["batch"]["id"].as_i64().unwrap();
    let x = n.claim("wq", json!({"worker": "w"})).await;
    assert_eq!(x[0]["kind"], "x");
    n.call(
        "POST",
        &format!("/v1/tasks/{}/complete", x[0]["id"]),
        Some(json!({"lease": x[0]["lease"]["token"], "result": 42})),
    )
    .await;
    let y = n.claim("wq", json!({"worker": "w", "wait": "10s"})).await;
    assert_eq!(y[0]["kind"], "y");
    assert_eq!(y[0]["deps"], json!({"x": 42}));
    let (st, w) = n
        .call("POST", &format!("/v1/workflows/{id2}/cancel"), None)
        .await;
    assert_eq!(st, StatusCode::OK, "{w}");
    let states: Vec<&str> = w["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["state"].as_str().unwrap())
        .collect();
    // y runs: its cancel is requested (it stops at its next heartbeat); z never starts.
    assert_eq!(states, ["completed", "running", "cancelled"]);
    for (path, want) in [
        ("/v1/workflows/999999", StatusCode::NOT_FOUND),
        ("/v1/workflows/x", StatusCode::BAD_REQUEST),
    ] {
        assert_eq!(n.call("GET", path, None).await.0, want, "{path}");
    }
    // The workflow is a batch: its progress there too.
    let (st, b) = n.call("GET", &format!("/v1/batches/{id}"), None).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(
        (b["total"].as_i64(), b["done"].as_i64()),
        (Some(8), Some(8))
    );
    // The dashboard draws graphs of up to 300 tasks; a bigger one gets its table only.
    let big: Vec<Value> = (0..301)
        .map(|i| json!({"ref": format!("t{i}"), "kind": "k", "queue": "big", "run_in": "1h"}))
        .collect();
    let (st, v) = n
        .call("POST", "/v1/workflows", Some(json!({"tasks": big})))
        .await;
    assert_eq!(st, StatusCode::CREATED);
    let big_id = v["workflow"]["batch"]["id"].as_i64().unwrap();
    let page = |id: i64| {
        let http = n.http.clone();
        let url = format!("{}/ui/batches/{id}", n.base);
        async move { http.get(url).send().await.unwrap().text().await.unwrap() }
    };
    let html = page(big_id).await;
    assert!(html.contains("drawn for workflows of up to 300"), "{html}");
    assert!(!html.contains("<svg"));
    assert!(page(id2).await.contains("<svg"));
    // A plain batch is not a workflow.
    let (_, b) = n
        .call(
            "POST",
            "/v1/batches",
            Some(json!({"tasks": [{"kind": "k", "queue": "other"}]})),
        )
        .await;
    let bid = b["batch"]["id"].as_i64().unwrap();
    assert_eq!(
        n.call("GET", &format!("/v1/workflows/{bid}"), None).await.0,
        StatusCode::NOT_FOUND
    );
}

mod workflows {
    use super::*;
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        workflows_over_http(pg().await).await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        workflows_over_http(super::sqlite().await).await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn mysql() {
        workflows_over_http(super::mysql().await).await;
    }
}
