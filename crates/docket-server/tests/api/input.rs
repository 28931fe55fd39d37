//! Bad and hostile input: 4xx with a stable code, nothing lost, no panic.

use super::*;

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

both!(
    bad_input_gets_4xx_and_loses_nothing,
    hostile_durations_times_and_nul,
);
