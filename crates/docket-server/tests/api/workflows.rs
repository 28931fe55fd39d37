//! Workflows over HTTP.

use super::*;

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

mod on {
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
