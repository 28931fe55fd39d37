//! Batches, fair queues, rate limits and workflows from the CLI.

use super::*;

/// Issue 26 item 2: `docket batch create/add/seal/show/list`; a bad spec is one clear line and
/// a non-zero exit.
fn batches_from_the_cli(backend: &str) {
    let s = serve(backend);
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("batch.json");
    std::fs::write(
        &spec,
        r#"{"name": "nightly", "open": true, "tasks": [{"kind": "a"}],
            "callbacks": {"completed": {"kind": "report", "payload": {"to": "ops"}}}}"#,
    )
    .unwrap();
    let out: Value =
        serde_json::from_str(&s.ok(&["batch", "create", spec.to_str().unwrap(), "--json"]))
            .unwrap();
    let id = out["batch"]["id"].as_i64().unwrap();
    assert_eq!(out["batch"]["open"], true);
    assert_eq!(
        s.task(out["tasks"][0]["id"].as_i64().unwrap())["batch_id"],
        id
    );
    let more = dir.path().join("more.json");
    std::fs::write(&more, r#"[{"kind": "b"}, {"kind": "c"}]"#).unwrap();
    let out: Value = serde_json::from_str(&s.ok(&[
        "batch",
        "add",
        &id.to_string(),
        more.to_str().unwrap(),
        "--seal",
        "--json",
    ]))
    .unwrap();
    assert_eq!(out["batch"]["total"], 3);
    assert_eq!(out["batch"]["open"], false);
    let shown: Value =
        serde_json::from_str(&s.ok(&["batch", "show", &id.to_string(), "--json"])).unwrap();
    assert_eq!(shown["counts"]["available"], 3);
    let table = s.ok(&["batch", "list"]);
    assert!(
        table.contains("nightly") && table.contains("0/3"),
        "{table}"
    );
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"tasks": [{"kind": "a", "unique_key": "u"}]}"#).unwrap();
    let o = s.cli(&["batch", "create", bad.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("unique_key"));
    let o = s.cli(&["batch", "show", "999999"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not found"));
}

/// Issue 26 item 4: `docket queue set Q --fair true --partition-weight P=W --partition-limit N`
/// and `task add --partition-key`; a bad weight is one clear line and a non-zero exit. The
/// settings reach claims: a `docket worker` of five takes, in its first claim, acme's first
/// three (weight 3) and beta's and gamma's first — not the first five in claim order (acme's
/// four, then beta's) — and under a partition limit of 2, two of acme's and beta's one.
fn fair_queues_from_the_cli(backend: &str) {
    let s = serve(backend);
    s.ok(&[
        "queue",
        "set",
        "fq",
        "--fair",
        "true",
        "--partition-weight",
        "acme=3",
    ]);
    let add = |p: &str, n: usize| -> Vec<i64> {
        (0..n)
            .map(|_| s.add(&["--kind", "k", "--queue", "fq", "--partition-key", p]))
            .collect()
    };
    let (acme, beta, gamma) = (add("acme", 4), add("beta", 2), add("gamma", 1));
    let first = first_claim_of_a_worker(&s, [&acme[..], &beta, &gamma].concat());
    let mut want = vec![acme[0], acme[1], acme[2], beta[0], gamma[0]];
    want.sort_unstable();
    assert_eq!(first, want, "acme {acme:?} beta {beta:?} gamma {gamma:?}");

    s.ok(&["queue", "set", "fq", "--partition-limit", "2"]);
    let q: Value = serde_json::from_str(&s.ok(&["queue", "show", "fq", "--json"])).unwrap();
    assert_eq!(q["settings"]["fair"], true, "{q}");
    assert_eq!(q["settings"]["partition_weights"]["acme"], 3, "{q}");
    assert_eq!(q["settings"]["partition_limit"], 2, "{q}");
    let id = s.add(&["--kind", "k", "--queue", "fq", "--partition-key", "acme"]);
    let t = s.task(id);
    assert_eq!(t["partition_key"], "acme");
    assert_eq!(t["concurrency_key"], "partition:fq:acme");
    let (acme, beta) = ([vec![id], add("acme", 2)].concat(), add("beta", 1));
    let first = first_claim_of_a_worker(&s, [&acme[..], &beta].concat());
    assert_eq!(
        first,
        vec![acme[0], acme[1], beta[0]],
        "acme {acme:?} beta {beta:?}"
    );

    let o = s.cli(&["queue", "set", "fq", "--partition-weight", "acme=0"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("partition_weights"));
    let o = s.cli(&["queue", "set", "fq", "--partition-weight", "acme"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("PARTITION=WEIGHT"));
}

/// Runs `docket worker --queue fq --concurrency 5 -- cat` until tasks `ids` completed, stops it,
/// and returns the ids its first claim took (sorted): the tasks of the earliest `attempted_at`
/// (a claim gives its tasks one).
fn first_claim_of_a_worker(s: &Server, ids: Vec<i64>) -> Vec<i64> {
    let mut w = s.worker(&["--queue", "fq", "--concurrency", "5"], &["cat"]);
    let done: Vec<(String, i64)> = ids
        .iter()
        .map(|id| {
            let t = s.wait_for(*id, "completed", |t| t["state"] == "completed");
            (t["attempted_at"].as_str().unwrap().to_string(), *id)
        })
        .collect();
    signal(w.id(), Signal::SIGTERM);
    assert!(w.wait().unwrap().success());
    let earliest = done.iter().map(|(at, _)| at.clone()).min().unwrap();
    let mut first: Vec<i64> = done
        .into_iter()
        .filter(|(at, _)| *at == earliest)
        .map(|(_, id)| id)
        .collect();
    first.sort_unstable();
    first
}

/// Issue 26 item 3: `docket rate-limit set/list/show/delete`; a task names a limit with
/// `--rate-limit-key`; a task naming no limit, and a bad spec, are one clear line and a non-zero
/// exit.
fn rate_limits_from_the_cli(backend: &str) {
    let s = serve(backend);
    let l: Value = serde_json::from_str(&s.ok(&[
        "rate-limit",
        "set",
        "stripe",
        "--kind",
        "window",
        "--limit",
        "1",
        "--period",
        "1h",
        "--json",
    ]))
    .unwrap();
    assert_eq!(
        (l["kind"].as_str(), l["limit"].as_i64()),
        (Some("window"), Some(1))
    );
    assert_eq!(l["period"], "1h");
    s.ok(&[
        "rate-limit",
        "set",
        "pdf",
        "--kind",
        "concurrent",
        "--limit",
        "3",
    ]);
    let a = s.add(&[
        "--kind",
        "charge",
        "--queue",
        "rl",
        "--rate-limit-key",
        "stripe:acme",
    ]);
    let b = s.add(&[
        "--kind",
        "charge",
        "--queue",
        "rl",
        "--rate-limit-key",
        "stripe:acme",
    ]);
    assert_eq!(s.task(a)["rate_limit"], "stripe:acme");
    assert_eq!(s.task(b)["state"], "available");
    let shown: Value =
        serde_json::from_str(&s.ok(&["rate-limit", "show", "stripe", "--json"])).unwrap();
    assert_eq!(shown["name"], "stripe");
    let table = s.ok(&["rate-limit", "list"]);
    assert!(table.contains("stripe") && table.contains("pdf"), "{table}");
    assert!(table.contains("concurrent"), "{table}");
    let o = s.cli(&["task", "add", "--kind", "x", "--rate-limit-key", "nosuch"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("nosuch"));
    let o = s.cli(&["rate-limit", "set", "x", "--kind", "window", "--limit", "5"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("period"));
    s.ok(&["rate-limit", "delete", "pdf"]);
    let o = s.cli(&["rate-limit", "show", "pdf"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not found"));
}

/// Issue 26 item 1: `docket workflow create/show/cancel/retry/add`; a cycle or a ref given
/// twice is one clear line and a non-zero exit.
fn workflows_from_the_cli(backend: &str) {
    let s = serve(backend);
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("wf.json");
    std::fs::write(
        &spec,
        r#"{"name": "etl", "tasks": [{"ref": "x", "kind": "extract"},
            {"ref": "y", "kind": "load", "depends_on": ["x"]},
            {"ref": "z", "kind": "report", "depends_on": [{"ref": "y", "ignore_failure": true}]}]}"#,
    )
    .unwrap();
    let out: Value =
        serde_json::from_str(&s.ok(&["workflow", "create", spec.to_str().unwrap(), "--json"]))
            .unwrap();
    let id = out["workflow"]["batch"]["id"].as_i64().unwrap();
    let table = s.ok(&["workflow", "show", &id.to_string()]);
    assert!(
        table.contains("etl") && table.contains("waiting"),
        "{table}"
    );
    assert!(table.contains("y (ignore failure)"), "{table}");
    let w: Value =
        serde_json::from_str(&s.ok(&["workflow", "cancel", &id.to_string(), "--json"])).unwrap();
    assert!(w["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["state"] == "cancelled"));
    // Retry: x runs again now, y and z wait for it again.
    let w: Value =
        serde_json::from_str(&s.ok(&["workflow", "retry", &id.to_string(), "--json"])).unwrap();
    let states: Vec<(&str, bool)> = w["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["state"].as_str().unwrap(), t["waiting"] == true))
        .collect();
    assert_eq!(
        states,
        [
            ("available", false),
            ("scheduled", true),
            ("scheduled", true)
        ],
        "{w}"
    );
    // Tasks and a sub-workflow added at run time, after x.
    let more = dir.path().join("more.json");
    std::fs::write(
        &more,
        r#"{"tasks": [{"ref": "w", "kind": "k", "depends_on": ["x"]}],
            "workflows": [{"ref": "s", "depends_on": ["w"], "tasks": [{"ref": "q", "kind": "k"}]}]}"#,
    )
    .unwrap();
    let table = s.ok(&["workflow", "add", &id.to_string(), more.to_str().unwrap()]);
    assert!(table.contains("added 2 task(s)"), "{table}");
    assert!(table.contains("s/q") && table.contains("w "), "{table}");
    let o = s.cli(&["workflow", "add", &id.to_string(), more.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("already in the workflow"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let bad = dir.path().join("cycle.json");
    std::fs::write(
        &bad,
        r#"{"tasks": [{"ref": "a", "kind": "k", "depends_on": ["b"]}, {"ref": "b", "kind": "k", "depends_on": ["a"]}]}"#,
    )
    .unwrap();
    let o = s.cli(&["workflow", "create", bad.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("cycle"));
}

/// Issue 41: `docket workflow-run start/show/list/steps/send/result/cancel/retry`; a run driven
/// by hand through the worker's calls; bad input is one clear line and a non-zero exit.
fn workflow_runs_from_the_cli(backend: &str) {
    let s = serve(backend);
    let out: Value = serde_json::from_str(&s.ok(&[
        "workflow-run",
        "start",
        "checkout",
        r#"{"order": 7}"#,
        "--id",
        "o7",
        "--json",
    ]))
    .unwrap();
    assert_eq!(out["created"], true);
    assert_eq!(out["run"]["state"], "running");
    let again = s.ok(&["workflow-run", "start", "checkout", "--id", "o7"]);
    assert!(again.contains("o7 was started before"), "{again}");
    // A worker's calls: claim the run's task, record a step, wait for an event.
    let claim = http::blocking_post(
        &format!("{}/v1/queues/workflows/claim", s.url),
        r#"{"worker": "w", "limit": 1, "lean": true}"#,
    )
    .unwrap();
    let lease = claim["lean"][0]["lease"]["token"]
        .as_str()
        .unwrap()
        .to_string();
    http::blocking_post(
        &format!("{}/v1/workflow-runs/o7/steps", s.url),
        &format!(r#"{{"lease": "{lease}", "steps": [{{"seq": 0, "kind": "step", "name": "reserve", "output": {{"ok": 1}}}}]}}"#),
    )
    .unwrap();
    let w = http::blocking_post(
        &format!("{}/v1/workflow-runs/o7/suspend", s.url),
        &format!(
            r#"{{"lease": "{lease}", "wait": {{"seq": 1, "kind": "event", "name": "paid"}}}}"#
        ),
    )
    .unwrap();
    assert_eq!(w["outcome"], "suspended");
    let shown: Value =
        serde_json::from_str(&s.ok(&["workflow-run", "show", "o7", "--json"])).unwrap();
    assert_eq!(
        (shown["state"].as_str(), shown["waiting_for"].as_str()),
        (Some("waiting"), Some("paid"))
    );
    let steps = s.ok(&["workflow-run", "steps", "o7"]);
    assert!(
        steps.contains("reserve") && steps.contains("paid") && steps.contains("waiting"),
        "{steps}"
    );
    let sent = s.ok(&["workflow-run", "send", "o7", "paid", r#"{"amount": 3}"#]);
    assert!(sent.contains("delivered"), "{sent}");
    let list = s.ok(&["workflow-run", "list", "--workflow", "checkout"]);
    assert!(list.contains("o7") && list.contains("running"), "{list}");
    // Not finished: `result` exits 2; cancelled: 1; retried, it runs again.
    let o = s.cli(&["workflow-run", "result", "o7", "--wait", "0s"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let c: Value =
        serde_json::from_str(&s.ok(&["workflow-run", "cancel", "o7", "--json"])).unwrap();
    assert_eq!(c["state"], "cancelled");
    let o = s.cli(&["workflow-run", "result", "o7"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cancelled"));
    let r: Value = serde_json::from_str(&s.ok(&["workflow-run", "retry", "o7", "--json"])).unwrap();
    assert_eq!(r["state"], "running");
    // Bad input.
    for (args, says) in [
        (
            vec!["workflow-run", "start", "checkout", "{not json"],
            "not JSON",
        ),
        (vec!["workflow-run", "send", "o7", "docket:x"], "docket:"),
        (
            vec!["workflow-run", "list", "--state", "sleepy"],
            "unknown run state",
        ),
        (vec!["workflow-run", "show", "nope"], "not found"),
        (
            vec!["workflow-run", "result", "o7", "--wait", "2m"],
            "at most 60s",
        ),
    ] {
        let o = s.cli(&args);
        assert!(!o.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

both!(
    batches_from_the_cli,
    workflow_runs_from_the_cli,
    fair_queues_from_the_cli,
    rate_limits_from_the_cli,
    workflows_from_the_cli,
);
