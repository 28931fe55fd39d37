//! Durable processes over HTTP, with a processor in another process.

use super::*;

fn start_processor() -> (std::process::Child, String) {
    let (child, port) = spawn_processor();
    (child, format!("http://127.0.0.1:{port}/"))
}

use docket_store::testing::spawn_example_processor as spawn_processor;

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

mod on {
    use super::*;
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn pg() {
        processes_over_http(crate::pg().await).await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        processes_over_http(crate::sqlite().await).await;
    }
}
