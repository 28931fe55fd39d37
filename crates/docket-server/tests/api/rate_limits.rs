//! Rate limits over HTTP.

use super::*;

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

mod on {
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
