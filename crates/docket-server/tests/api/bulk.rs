//! Bulk actions over a filter.

use super::*;

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

/// Tags (issue 43) over HTTP: tasks, a batch's and a workflow's tasks carry them; the list
/// filters by one; a bulk cancel takes a tag as its filter; worst values are 4xx and write
/// nothing; the task page links each tag to the list it filters.
async fn tags_over_http(n: Node) {
    let (st, t) = n
        .call(
            "POST",
            "/v1/tasks",
            Some(json!({"kind": "k", "queue": "tq", "tags": ["customer:42", "plan:pro"]})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{t}");
    assert_eq!(t["tags"], json!(["customer:42", "plan:pro"]));
    let id = t["id"].as_i64().unwrap();
    let (st, b) = n
        .call(
            "POST",
            "/v1/batches",
            Some(json!({"tasks": [{"kind": "k", "queue": "tq", "tags": ["customer:42"]}]})),
        )
        .await;
    assert!(st.is_success(), "{b}");
    let (st, w) = n
        .call(
            "POST",
            "/v1/workflows",
            Some(json!({"tasks": [{"ref": "a", "kind": "k", "queue": "tq", "tags": ["customer:42", "wf"]}]})),
        )
        .await;
    assert!(st.is_success(), "{w}");
    n.call(
        "POST",
        "/v1/tasks",
        Some(json!({"kind": "k", "queue": "tq", "tags": ["customer:7"]})),
    )
    .await;
    let n = &n;
    let tagged = |tag: &str| {
        let path = format!("/v1/tasks?tag={}&limit=100", tag.replace(':', "%3A"));
        async move {
            let (st, v) = n.call("GET", &path, None).await;
            assert_eq!(st, StatusCode::OK, "{v}");
            v["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["id"].as_i64().unwrap())
                .collect::<Vec<_>>()
        }
    };
    let c42 = tagged("customer:42").await;
    assert_eq!(c42.len(), 3, "{c42:?}");
    assert_eq!(c42[0], id);
    assert_eq!(tagged("wf").await.len(), 1);
    assert_eq!(tagged("plan:pro").await, vec![id]);
    // Worst values: 4xx, nothing written.
    let many: Vec<String> = (0..10_000).map(|i| format!("t{i}")).collect();
    for tags in [
        json!(many),
        json!((0..21).map(|i| format!("t{i}")).collect::<Vec<_>>()),
        json!([""]),
        json!(["a\u{0}b"]),
        json!(["x".repeat(129)]),
        json!(["same", "same"]),
        json!("not-a-list"),
    ] {
        let body = json!({"kind": "bad", "queue": "tq", "tags": tags});
        let (st, e) = n.call("POST", "/v1/tasks", Some(body)).await;
        assert!(st.is_client_error(), "{tags}: {st} {e}");
    }
    assert_eq!(
        n.states("tq").await.values().sum::<usize>(),
        4,
        "nothing else was written"
    );
    // A bulk cancel over a tag takes exactly its tasks.
    let (st, c) = n
        .call(
            "POST",
            "/v1/tasks/bulk",
            Some(json!({"action": "cancel", "filter": {"tag": "customer:42"}, "dry_run": true})),
        )
        .await;
    assert_eq!((st, c["total"].as_i64()), (StatusCode::OK, Some(3)), "{c}");
    let j = n
        .bulk(json!({"action": "cancel", "filter": {"tag": "customer:42"}}))
        .await;
    assert_eq!(j["state"], "completed", "{j}");
    let states = n.states("tq").await;
    assert_eq!(states.get("cancelled"), Some(&3), "{states:?}");
    assert_eq!(states.get("available"), Some(&1), "{states:?}");
    let html = n.page(&format!("/ui/tasks/{id}")).await;
    assert!(html.contains("/ui/tasks?tag=customer%3A42"), "{html}");
    let list = n.page("/ui/tasks?tag=plan%3Apro").await;
    assert!(list.contains(&format!("/ui/tasks/{id}")), "{list}");
}

both!(bulk_actions_over_a_filter, tags_over_http,);
