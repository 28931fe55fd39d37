//! The server itself: the OpenAPI document against the routes, metrics, worker reports, slow and cancelled clients.

use super::*;

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

/// Issue 12 item 9: worker reports over HTTP: the list shows the last report, the dashboard
/// page lists it, a worker silent for three intervals is lost, bad reports are 400s.
async fn worker_reports_over_http(n: Node) {
    let (st, v) = n
        .call(
            "POST",
            "/v1/workers/w%201/report",
            Some(
                json!({"state": "work", "tasks": [7, 8], "queue": "q", "interval": "100ms",
                        "concurrency": 2, "pid": 42, "labels": {"gpu": "a100", "region": "eu"}}),
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
    assert_eq!(
        l["workers"][0]["report"]["labels"],
        json!({"gpu": "a100", "region": "eu"})
    );
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
        html.contains("w 1")
            && html.contains("/ui/tasks/7")
            && html.contains("gpu=a100, region=eu"),
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
        json!({"state": "idle", "interval": "5s", "labels": {"gpu": ""}}),
        json!({"state": "idle", "interval": "5s", "labels": {"": "x"}}),
        json!({"state": "idle", "interval": "5s", "labels": {"g\u{0}": "x"}}),
        json!({"state": "idle", "interval": "5s", "labels": {"gpu": 1}}),
        json!({"state": "idle", "interval": "5s", "labels": (0..21).map(|i| (format!("l{i}"), json!("v"))).collect::<serde_json::Map<_, _>>()}),
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
/// `idle in transaction`, and a normal workload on the same pool sees no failed query. The
/// node's sessions carry the test's schema as their `application_name`, so a session another
/// test (or another program on the server) left open is not counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_requests_do_not_poison_connections() {
    let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
    let url = pg_url();
    let sep = if url.contains('?') { '&' } else { '?' };
    let store = connect(&ConnectOptions {
        url: format!("{url}{sep}application_name={schema}"),
        schema: Some(schema.clone()),
        max_connections: Some(8),
        strict_commit: false,
    })
    .await
    .unwrap();
    let n = start(store, "n1", Duration::from_secs(1), None).await;
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
    let mine: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1")
            .bind(&schema)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(
        mine > 0,
        "the node's sessions carry application_name {schema}"
    );
    let stuck: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' \
         AND now() - state_change > interval '2 seconds' AND application_name = $1",
    )
    .bind(&schema)
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

both!(
    openapi_matches_routes,
    docket_metrics,
    worker_reports_over_http,
);
