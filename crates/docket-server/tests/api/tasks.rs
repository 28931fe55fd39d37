//! Tasks over HTTP: the lifecycle, bad and hostile input, cancel and retry, stages, search, bulk actions.

use super::*;

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
    let html = n.page(&format!("/ui/tasks/{id}")).await;
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

/// Debounce by key (issue 43) over HTTP: created 201, replaced 200 with the same id, the new
/// payload and a later run_at; worst values 4xx with nothing written; the task page shows the
/// key; /metrics counts both outcomes.
async fn debounce_over_http(n: Node) {
    let spec = |p: i64| {
        json!({"kind": "digest", "payload": {"n": p},
            "debounce": {"key": "user:7", "period": "1h", "max_wait": "2h"}})
    };
    let (st, a) = n.call("POST", "/v1/tasks", Some(spec(1))).await;
    assert_eq!(st, StatusCode::CREATED, "{a}");
    assert_eq!(
        (
            &a["inserted"],
            &a["replaced"],
            &a["debounce_key"],
            &a["state"]
        ),
        (
            &json!(true),
            &json!(false),
            &json!("user:7"),
            &json!("scheduled")
        )
    );
    let (st, b) = n.call("POST", "/v1/tasks", Some(spec(2))).await;
    assert_eq!(st, StatusCode::OK, "{b}");
    assert_eq!(
        (&b["id"], &b["inserted"], &b["replaced"]),
        (&a["id"], &json!(false), &json!(true))
    );
    assert_eq!(b["payload"], json!({"n": 2}));
    let at =
        |v: &Value| chrono::DateTime::parse_from_rfc3339(v["run_at"].as_str().unwrap()).unwrap();
    assert!(at(&b) >= at(&a), "{a} {b}");
    let id = a["id"].as_i64().unwrap();
    let stored = n.task(id).await;
    assert_eq!(
        (&stored["payload"], &stored["debounce_key"]),
        (&json!({"n": 2}), &json!("user:7"))
    );
    // Worst values: 4xx with a code, and nothing written.
    let bad = [
        (
            json!({"kind": "x", "debounce": {"key": "", "period": "1s"}}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_task",
        ),
        (
            json!({"kind": "x", "debounce": {"key": "a\u{0}b", "period": "1s"}}),
            StatusCode::BAD_REQUEST,
            "invalid_text",
        ),
        (
            json!({"kind": "x", "debounce": {"key": "k".repeat(257), "period": "1s"}}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_task",
        ),
        (
            json!({"kind": "x", "debounce": {"key": "k", "period": "1000years"}}),
            StatusCode::BAD_REQUEST,
            "invalid_duration",
        ),
        (
            json!({"kind": "x", "debounce": {"key": "k", "period": "31days"}}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_task",
        ),
        (
            json!({"kind": "x", "debounce": {"key": "k", "period": "0s"}}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_task",
        ),
        (
            json!({"kind": "x", "debounce": {"key": "k", "period": "1s", "max_wait": "0s"}}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_task",
        ),
        (
            json!({"kind": "x", "debounce": {"key": "k", "period": "soon"}}),
            StatusCode::BAD_REQUEST,
            "invalid_duration",
        ),
        (
            json!({"kind": "x", "debounce": {"key": "k"}}),
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            json!({"kind": "x", "debounce": {"key": "k", "period": "1s", "extra": 1}}),
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            json!({"kind": "x", "run_in": "1m", "debounce": {"key": "k", "period": "1s"}}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_task",
        ),
        (
            json!({"kind": "x", "unique_key": "u", "debounce": {"key": "k", "period": "1s"}}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_task",
        ),
        (
            json!({"tasks": [{"kind": "x", "debounce": {"key": "k", "period": "1s"}}, {"kind": "y"}]}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_task",
        ),
        (
            json!({"name": "s", "every": "1h", "task": {"kind": "x", "debounce": {"key": "k", "period": "1s"}}}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "",
        ),
    ];
    for (body, status, want) in bad {
        let path = if body.get("every").is_some() {
            "/v1/schedules/s"
        } else {
            "/v1/tasks"
        };
        let method = if body.get("every").is_some() {
            "PUT"
        } else {
            "POST"
        };
        let (st, e) = n.call(method, path, Some(body.clone())).await;
        assert!(st.is_client_error(), "{body} -> {st} {e}");
        if !want.is_empty() {
            assert_eq!((st, code(&e)), (status, want), "{body}: {e}");
        }
    }
    // A batch's and a workflow's tasks are inserted as given: no debounce there.
    let d = json!({"key": "k", "period": "1s"});
    for (path, body) in [
        (
            "/v1/batches",
            json!({"tasks": [{"kind": "x", "debounce": d}]}),
        ),
        (
            "/v1/workflows",
            json!({"tasks": [{"ref": "a", "kind": "x", "debounce": d}]}),
        ),
    ] {
        let (st, e) = n.call("POST", path, Some(body.clone())).await;
        assert!(st.is_client_error(), "{path} {body} -> {st} {e}");
        assert!(
            e["error"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("debounce"),
            "{e}"
        );
    }
    let (_, all) = n.call("GET", "/v1/tasks?limit=100", None).await;
    let kinds: Vec<_> = all["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["kind"].clone())
        .collect();
    assert_eq!(
        kinds,
        vec![json!("digest")],
        "only the debounced task was written"
    );
    let html = n.page(&format!("/ui/tasks/{id}")).await;
    assert!(
        html.contains("debounce key") && html.contains("user:7"),
        "{html}"
    );
    let text = n.page("/metrics").await;
    for outcome in ["created", "replaced"] {
        assert!(
            text.contains(&format!(
                "docket_tasks_debounced_total{{queue=\"default\",outcome=\"{outcome}\"}}"
            )) || text.contains(&format!(
                "docket_tasks_debounced_total{{outcome=\"{outcome}\",queue=\"default\"}}"
            )),
            "{text}"
        );
    }
}

/// Dead-letter queues (issue 43) over HTTP: the queue setting (refused for the queue itself,
/// an empty or NUL name), a task failed on its last attempt appears in the dead-letter queue
/// with `dead_letter_of`; the dashboard's dead-letter page lists it with the way back, and the
/// original is retried by its id.
async fn dead_letters_over_http(n: Node) {
    let (st, q) = n
        .call(
            "PUT",
            "/v1/queues/pay",
            Some(json!({"dead_letter": "pay-dead"})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{q}");
    assert_eq!(q["settings"]["dead_letter"], "pay-dead");
    for (body, status, want) in [
        (
            json!({"dead_letter": "pay"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "own dead-letter",
        ),
        (
            json!({"dead_letter": ""}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "dead_letter",
        ),
        (
            json!({"dead_letter": "a\u{7}b"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "dead_letter",
        ),
        (json!({"dead_letter": 5}), StatusCode::BAD_REQUEST, ""),
    ] {
        let (st, e) = n.call("PUT", "/v1/queues/pay", Some(body.clone())).await;
        assert!(st.is_client_error(), "{body}: {st} {e}");
        if status == StatusCode::UNPROCESSABLE_ENTITY {
            assert!(
                e["error"]["message"].as_str().unwrap().contains(want),
                "{e}"
            );
        }
    }
    let (_, q) = n.call("GET", "/v1/queues/pay", None).await;
    assert_eq!(
        q["settings"]["dead_letter"], "pay-dead",
        "a refused PUT changed nothing"
    );
    let (st, t) = n
        .call(
            "POST",
            "/v1/tasks",
            Some(json!({"queue": "pay", "kind": "charge", "payload": {"order": 9}, "max_attempts": 1})),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{t}");
    let id = t["id"].as_i64().unwrap();
    let got = n.claim("pay", json!({"worker": "w", "limit": 1})).await;
    let lease = got[0]["lease"]["token"].as_str().unwrap().to_string();
    let (st, f) = n
        .call(
            "POST",
            &format!("/v1/tasks/{id}/fail"),
            Some(json!({"lease": lease, "error": "card declined"})),
        )
        .await;
    assert_eq!(
        (st, &f["state"]),
        (StatusCode::OK, &json!("discarded")),
        "{f}"
    );
    let (_, dead) = n.call("GET", "/v1/tasks?queue=pay-dead", None).await;
    let dead = dead["tasks"].as_array().unwrap().clone();
    assert_eq!(dead.len(), 1, "{dead:?}");
    let d = &dead[0];
    assert_eq!(
        (&d["kind"], &d["payload"], &d["state"]),
        (&json!("charge"), &json!({"order": 9}), &json!("available"))
    );
    assert_eq!(d["dead_letter_of"]["task_id"], id);
    assert_eq!(d["dead_letter_of"]["queue"], "pay");
    assert_eq!(d["dead_letter_of"]["errors"][0]["message"], "card declined");
    let dead_id = d["id"].as_i64().unwrap();
    let html = n.page("/ui/dead-letters").await;
    assert!(
        html.contains(&format!("id=\"dead-letter-{dead_id}\"")),
        "{html}"
    );
    assert!(html.contains(&format!("/ui/tasks/{id}/retry")), "{html}");
    assert!(html.contains("card declined"), "{html}");
    assert!(
        html.contains("/ui/bulk?action=cancel&amp;queue=pay-dead"),
        "{html}"
    );
    let confirm = n
        .page("/ui/bulk?action=cancel&queue=pay-dead&state=available,scheduled,retryable")
        .await;
    assert!(confirm.contains("data-n=\"1\""), "{confirm}");
    let task_page = n.page(&format!("/ui/tasks/{dead_id}")).await;
    assert!(task_page.contains("dead letter of"), "{task_page}");
    // The way back: the original retried.
    let (st, r) = n.call("POST", &format!("/v1/tasks/{id}/retry"), None).await;
    assert_eq!(
        (st, &r["state"]),
        (StatusCode::OK, &json!("available")),
        "{r}"
    );
}

both!(
    dead_letters_over_http,
    debounce_over_http,
    lifecycle,
    batch_complete_and_fail,
    cancel_retry_and_queues,
    trace_ids_and_attempt_costs,
    tasks_found_by_trace_id_unique_key_and_worker,
    stages_run_log_and_updates,
);
