//! Durable functions' runs over HTTP (issue 41): start (idempotent by id), a worker's record and
//! finish under the lease, the result, bad input refused with nothing written, and the metrics
//! `/metrics` shows for them.

use super::*;

async fn workflow_runs_over_http(n: Node) {
    // The recorder is the test process's: a workflow name of this test's own.
    let wf = format!("m{}", uuid::Uuid::new_v4().simple());
    let start = json!({"workflow": wf, "id": format!("{wf}-1"), "input": {"order": 1}});
    let (st, v) = n
        .call("POST", "/v1/workflow-runs", Some(start.clone()))
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(
        (v["created"].clone(), v["run"]["state"].clone()),
        (json!(true), json!("running"))
    );
    let (st, v) = n.call("POST", "/v1/workflow-runs", Some(start)).await;
    assert_eq!(
        (st, v["created"].clone()),
        (StatusCode::OK, json!(false)),
        "{v}"
    );
    let (st, v) = n
        .call(
            "POST",
            "/v1/workflow-runs",
            Some(json!({"workflow": "other", "id": format!("{wf}-1")})),
        )
        .await;
    assert_eq!((st, code(&v)), (StatusCode::CONFLICT, "conflict"), "{v}");
    // Worst values: 4xx with a stable code, and no run written.
    for body in [
        json!({"workflow": ""}),
        json!({"workflow": wf, "input": "a\u{0}b"}),
        json!({"workflow": wf, "id": "x".repeat(201)}),
        json!({"workflow": wf, "timeout": "1000000y"}),
        json!({"workflow": wf, "max_attempts": 0}),
    ] {
        let (st, v) = n
            .call("POST", "/v1/workflow-runs", Some(body.clone()))
            .await;
        assert!(st.is_client_error(), "{body}: {st} {v}");
        assert!(v["error"]["code"].is_string(), "{v}");
    }
    let (_, v) = n
        .call("GET", &format!("/v1/workflow-runs?workflow={wf}"), None)
        .await;
    assert_eq!(v["runs"].as_array().unwrap().len(), 1, "{v}");

    let (st, v) = n
        .call(
            "POST",
            "/v1/queues/workflows/claim",
            Some(json!({"worker": "w", "limit": 10})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let task = v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["kind"] == wf.as_str())
        .cloned()
        .expect("the run's task");
    let lease = task["lease"]["token"].clone();
    let id = format!("{wf}-1");
    let (st, v) = n
        .call(
            "POST",
            &format!("/v1/workflow-runs/{id}/steps"),
            Some(json!({"lease": lease, "steps": [
                {"seq": 0, "kind": "step", "name": "a", "output": 1},
                {"seq": 1, "kind": "step", "name": "b", "output": 2}
            ]})),
        )
        .await;
    assert_eq!(
        (st, v["recorded"].clone()),
        (StatusCode::OK, json!(2)),
        "{v}"
    );
    // Another call at a recorded place: non-determinism, 409.
    let (st, v) = n
        .call(
            "POST",
            &format!("/v1/workflow-runs/{id}/steps"),
            Some(json!({"lease": lease, "steps": [{"seq": 1, "kind": "step", "name": "c", "output": 3}]})),
        )
        .await;
    assert_eq!(
        (st, code(&v)),
        (StatusCode::CONFLICT, "nondeterministic"),
        "{v}"
    );
    let (st, v) = n
        .call(
            "POST",
            &format!("/v1/workflow-runs/{id}/finish"),
            Some(json!({"lease": lease, "result": {"done": true}})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (st, v) = n
        .call(
            "GET",
            &format!("/v1/workflow-runs/{id}/result?wait=5s"),
            None,
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(
        (v["state"].clone(), v["result"].clone()),
        (json!("completed"), json!({"done": true}))
    );
    let (st, v) = n
        .call(
            "POST",
            &format!("/v1/workflow-runs/{id}/events"),
            Some(json!({"name": "late"})),
        )
        .await;
    assert_eq!(
        (st, code(&v)),
        (StatusCode::CONFLICT, "invalid_state"),
        "{v}"
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
    for want in [
        format!("docket_workflow_runs_started_total{{workflow=\"{wf}\"}} 1"),
        format!("docket_workflow_runs_finished_total{{workflow=\"{wf}\",state=\"completed\"}} 1"),
    ] {
        assert!(text.contains(&want), "{want} not in\n{text}");
    }
    let steps = text
        .lines()
        .find_map(|l| l.strip_prefix("docket_workflow_steps_total "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .expect("docket_workflow_steps_total");
    assert!(steps >= 2.0, "{steps}");
}

both!(workflow_runs_over_http);
