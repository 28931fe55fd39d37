//! Batches over HTTP.

use super::*;

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

mod on {
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
