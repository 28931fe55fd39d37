//! Tasks from the CLI: odd names, bulk files, expiry, backoff, lists and search, edits and stages, pipes.

use super::*;

/// Issue 9: names go into URL paths percent-encoded: a queue named `a/b c?` is its own queue
/// for `task add`, `queue pause/show` and `docket worker`.
fn odd_queue_names_reach_their_own_routes(backend: &str) {
    let s = serve(backend);
    let q = "a/b c?#%";
    let id = s.add(&["--kind", "x", "--queue", q, "--payload", "5"]);
    s.ok(&["queue", "pause", q]);
    let shown: Value = serde_json::from_str(&s.ok(&["queue", "show", q, "--json"])).unwrap();
    assert_eq!(shown["name"], q);
    assert_eq!(shown["settings"]["paused"], true);
    s.ok(&["queue", "resume", q]);
    let mut w = s.worker(&["--queue", q], &["cat"]);
    let t = s.wait_for(id, "completed", |t| t["state"] == "completed");
    assert_eq!(t["queue"], q);
    assert_eq!(t["result"], 5);
    signal(w.id(), Signal::SIGTERM);
    w.wait().unwrap();
}

fn bulk_file_and_cli_errors(backend: &str) {
    let s = serve(backend);
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.jsonl");
    let lines: String = (0..2500)
        .map(|i| format!("{{\"kind\":\"bulk\",\"payload\":{i}}}\n"))
        .collect();
    std::fs::write(&good, lines).unwrap();
    let out = s.ok(&[
        "task",
        "add",
        "--file",
        good.to_str().unwrap(),
        "--queue",
        "bulk",
    ]);
    assert!(out.contains("enqueued 2500 tasks"), "{out}");
    let q: Value = serde_json::from_str(&s.ok(&["queue", "show", "bulk", "--json"])).unwrap();
    assert_eq!(q["counts"]["available"], 2500);
    // A bad line anywhere: nothing is sent, non-zero exit, the line is named.
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"kind\":\"ok\"}\n{\"kind\": \n").unwrap();
    let o = s.cli(&[
        "task",
        "add",
        "--file",
        bad.to_str().unwrap(),
        "--queue",
        "bad",
    ]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("bad.jsonl:2"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let q: Value = serde_json::from_str(&s.ok(&["queue", "show", "bad", "--json"])).unwrap();
    assert_eq!(q["counts"]["available"], 0);
    // Clear errors and non-zero exits.
    let o = s.cli(&["task", "show", "987654"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not_found"));
    let o = s.cli(&["task", "add", "--kind", "x", "--payload", "{oops"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--payload is not valid JSON"));
    let o = s.cli(&["task", "add", "--kind", "x", "--max-attempts", "0"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("max_attempts must be at least 1"));
    let o = s.cli(&["task", "add", "--kind", "x", "--run-in", "later"]);
    assert!(!o.status.success());
    // Table output lists tasks; pause/resume round trip.
    let out = s.ok(&["task", "list", "--queue", "bulk", "--limit", "3"]);
    assert_eq!(out.lines().count(), 4, "{out}");
    assert!(out.starts_with("ID"));
    s.ok(&["queue", "pause", "bulk"]);
    assert!(s.ok(&["queue", "list"]).contains("paused"));
    s.ok(&["queue", "resume", "bulk"]);
}

/// Issue 21 item 12: `docket task add --expires-in/--expires-at` (a task not started in time is
/// discarded) and `docket schedule add --after-end`.
fn expiry_and_after_end_from_the_cli(backend: &str) {
    let s = serve(backend);
    let id = s.add(&["--kind", "late", "--queue", "nobody", "--expires-in", "1s"]);
    let t = s.task(id);
    let at = |v: &Value| chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap()).unwrap();
    let window = at(&t["expires_at"]) - at(&t["created_at"]);
    assert!(
        (999..=1001).contains(&window.num_milliseconds()),
        "expires 1 s after the enqueue: {t}"
    );
    // Nobody works queue `nobody`: past its expiry the task is discarded, never run.
    let t = s.wait_for(id, "expiry", |t| t["state"] == "discarded");
    assert_eq!(t["attempt"], 0, "{t}");
    let id = s.add(&["--kind", "k", "--expires-at", "2999-01-01T00:00:00Z"]);
    assert_eq!(s.task(id)["expires_at"], "2999-01-01T00:00:00Z");
    let o = s.cli(&[
        "task",
        "add",
        "--kind",
        "k",
        "--expires-in",
        "1h",
        "--expires-at",
        "2999-01-01T00:00:00Z",
    ]);
    assert!(!o.status.success());
    let o = s.cli(&[
        "task",
        "add",
        "--kind",
        "k",
        "--run-in",
        "1h",
        "--expires-in",
        "1m",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("could never start"));
    // A schedule counted from the end of its last run.
    let out = s.ok(&[
        "schedule",
        "add",
        "sleepy",
        "--every",
        "1h",
        "--after-end",
        "--kind",
        "nap",
        "--json",
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["after_end"], true, "{v}");
    let o = s.cli(&[
        "schedule",
        "add",
        "both",
        "--every",
        "1h",
        "--after-end",
        "--drift",
        "--kind",
        "nap",
    ]);
    assert!(!o.status.success());
}

/// Issue 12 item 8: a linear backoff (node-daemons' delayRatio) per queue and per task from the
/// CLI; a backoff that does not parse is refused with its flag named.
fn linear_backoff_from_the_cli(backend: &str) {
    let s = serve(backend);
    let q: Value = serde_json::from_str(&s.ok(&[
        "queue",
        "set",
        "lin",
        "--backoff-kind",
        "linear",
        "--backoff-initial",
        "30s",
        "--backoff-max",
        "2m",
    ]))
    .unwrap();
    assert_eq!(q["backoff"]["kind"], "linear", "{q}");
    assert_eq!(q["backoff"]["initial"], "30s", "{q}");
    // A task of that queue takes it; a task may bring its own.
    let a = s.add(&["--kind", "k", "--queue", "lin"]);
    assert_eq!(s.task(a)["backoff"]["kind"], "linear");
    let b = s.add(&[
        "--kind",
        "k",
        "--backoff",
        r#"{"kind": "linear", "step": "10s", "max": "1m"}"#,
    ]);
    let t = s.task(b);
    assert_eq!(
        (
            t["backoff"]["kind"].as_str(),
            t["backoff"]["initial"].as_str()
        ),
        (Some("linear"), Some("10s")),
        "{t}"
    );
    for bad in [r#"{"kind": "quadratic"}"#, "not json"] {
        let o = s.cli(&["task", "add", "--kind", "k", "--backoff", bad]);
        assert!(!o.status.success(), "{bad}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("--backoff"),
            "{bad}"
        );
    }
}

/// Issue 12 item 4: asyncflow's user task lists from the CLI: `--user-id` on add, and a list of
/// one user's tasks in several states; a bad user id is refused naming the field.
fn user_task_lists_from_the_cli(backend: &str) {
    let s = serve(backend);
    let a = s.add(&["--kind", "k", "--user-id", "noob"]);
    let _b = s.add(&["--kind", "k", "--user-id", "other"]);
    let c = s.add(&["--kind", "k", "--user-id", "noob", "--run-in", "1h"]);
    assert_eq!(s.task(a)["user_id"], "noob");
    let list = |args: &[&str]| -> Vec<i64> {
        let mut v = vec!["task", "list", "--json"];
        v.extend_from_slice(args);
        let out: Value = serde_json::from_str(&s.ok(&v)).unwrap();
        out.as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_i64().unwrap())
            .collect()
    };
    assert_eq!(list(&["--user-id", "noob"]), vec![a, c]);
    assert_eq!(
        list(&["--user-id", "noob", "--state", "scheduled,running"]),
        vec![c]
    );
    assert!(list(&["--user-id", "nobody"]).is_empty());
    let o = s.cli(&["task", "add", "--kind", "k", "--user-id", "a\u{7}b"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("user_id"));
}

/// Issue 37 item 7: `docket task list --trace-id / --unique-key / --worker` find exactly their
/// tasks (a trace id in either case, finished tasks too), alone and with the other flags.
fn task_search_from_the_cli(backend: &str) {
    let s = serve(backend);
    let a = s.add(&[
        "--queue",
        "sq",
        "--kind",
        "k",
        "--payload",
        "1",
        "--unique-key",
        "ua",
    ]);
    let b = s.add(&["--queue", "sq", "--kind", "k", "--payload", "2"]);
    let c = s.add(&["--queue", "other", "--kind", "k", "--unique-key", "uc"]);
    // A worker named search-w runs a and b; c waits in a queue no worker takes.
    let w = s.worker(&["--queue", "sq", "--name", "search-w"], &["cat"]);
    for id in [a, b] {
        s.wait_for(id, "completed", |t| t["state"] == "completed");
    }
    drop(w);
    let trace_a = s.task(a)["trace_id"].as_str().unwrap().to_string();
    let trace_c = s.task(c)["trace_id"].as_str().unwrap().to_string();
    assert_ne!(trace_a, trace_c);
    let list = |args: &[&str]| -> Vec<i64> {
        let mut v = vec!["task", "list", "--json"];
        v.extend_from_slice(args);
        let out: Value = serde_json::from_str(&s.ok(&v)).unwrap();
        out.as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_i64().unwrap())
            .collect()
    };
    assert_eq!(list(&["--trace-id", &trace_a]), vec![a]);
    assert_eq!(
        list(&["--trace-id", &trace_a.to_ascii_uppercase()]),
        vec![a]
    );
    assert_eq!(list(&["--trace-id", &trace_c]), vec![c]);
    assert!(list(&["--trace-id", &trace_c, "--queue", "sq"]).is_empty());
    assert_eq!(list(&["--unique-key", "ua"]), vec![a]);
    assert_eq!(
        list(&["--unique-key", "uc", "--state", "available"]),
        vec![c]
    );
    assert!(list(&["--unique-key", "uc", "--state", "completed"]).is_empty());
    assert!(list(&["--unique-key", "nobody"]).is_empty());
    assert_eq!(list(&["--worker", "search-w"]), vec![a, b]);
    assert_eq!(list(&["--worker", "search-w", "--desc"]), vec![b, a]);
    assert_eq!(
        list(&["--worker", "search-w", "--trace-id", &trace_a]),
        vec![a]
    );
    assert!(list(&["--worker", "search-w", "--unique-key", "uc"]).is_empty());
    assert!(list(&["--worker", "nobody"]).is_empty());
    // The table names the task it found.
    let table = s.ok(&["task", "list", "--unique-key", "uc"]);
    assert!(
        table.lines().count() == 2 && table.contains("other"),
        "{table}"
    );
}

/// Issue 12 items 1 and 3: `docket task add --stage`, `docket task set` changes a waiting task
/// (a stale `--if-version` changes nothing and exits non-zero), `task show` shows the stage.
fn task_set_and_stages_from_the_cli(backend: &str) {
    let s = serve(backend);
    let id = s.add(&["--kind", "k", "--stage", "fetch", "--run-in", "1h"]);
    let t = s.task(id);
    assert_eq!(t["stage"], "fetch");
    let task: docket_core::Task = serde_json::from_value(t).unwrap();
    let v0 = docket_core::patch::version(&task);
    let out: Value = serde_json::from_str(&s.ok(&[
        "task",
        "set",
        &id.to_string(),
        "--priority",
        "-3",
        "--run-in",
        "0s",
        "--stage",
        "ship",
        "--queue",
        "elsewhere",
        "--if-version",
        &v0,
        "--json",
    ]))
    .unwrap();
    assert_eq!(
        (
            out["priority"].as_i64(),
            out["state"].as_str(),
            out["stage"].as_str(),
            out["queue"].as_str()
        ),
        (Some(-3), Some("available"), Some("ship"), Some("elsewhere")),
        "{out}"
    );
    let o = s.cli(&[
        "task",
        "set",
        &id.to_string(),
        "--priority",
        "1",
        "--if-version",
        &v0,
    ]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("version_mismatch"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        s.task(id)["priority"],
        -3,
        "a refused change changes nothing"
    );
    let o = s.cli(&["task", "set", &id.to_string()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("nothing to change"));
    let shown: Value = serde_json::from_str(&s.ok(&["task", "show", &id.to_string()])).unwrap();
    assert_eq!(shown["stage"], "ship");
    assert_eq!(shown["runs"], serde_json::json!([]));
    // Worked by `docket worker`: `task show` has the attempt in its run log.
    let mut w = s.worker(
        &["--queue", "elsewhere", "--name", "w-log"],
        &["sh", "-c", "cat > /dev/null; echo done"],
    );
    let t = s.wait_for(id, "completed", |t| t["state"] == "completed");
    signal(w.id(), Signal::SIGTERM);
    w.wait().unwrap();
    assert_eq!(t["run_count"], 1);
    let run = &t["runs"][0];
    assert_eq!(
        (
            run["outcome"].as_str(),
            run["stage"].as_str(),
            run["worker"].as_str(),
            run["attempt"].as_i64()
        ),
        (Some("completed"), Some("ship"), Some("w-log"), Some(1)),
        "{t}"
    );
    assert_eq!(run["node"], s.node.as_str());
    assert_eq!(run["trace_id"].as_str().map(str::len), Some(32));
}

#[test]
fn bulk_file_enqueue_stops_cleanly_on_ctrl_c() {
    let s = serve("sqlite");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("many.jsonl");
    let lines: Vec<String> = (0..30_000)
        .map(|i| format!("{{\"kind\": \"bulk\", \"queue\": \"ctrlc\", \"payload\": {i}}}"))
        .collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    let child = Command::new(BIN)
        .args([
            "task",
            "add",
            "--file",
            file.to_str().unwrap(),
            "--batch",
            "2",
        ])
        .env("DOCKET_SERVER", &s.url)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    signal(child.id(), Signal::SIGINT);
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(130), "{text}");
    let sent: usize = text
        .split("the first ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        sent > 0 && sent < 30_000 && sent.is_multiple_of(2),
        "{text}"
    );
    // Exactly what it said was sent is in the queue: whole batches, nothing half-written.
    let q = http::blocking_get(&format!("{}/v1/queues/ctrlc", s.url)).unwrap();
    assert_eq!(q["counts"]["available"].as_u64(), Some(sent as u64), "{q}");
}

/// Output into a pipe its reader closed (`docket … | head`) ends quietly, without a panic.
#[test]
fn closed_stdout_pipe_is_quiet() {
    let mut c = Command::new(BIN)
        .args(["completions", "bash"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(c.stdout.take());
    let o = c.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.is_empty(), "{err}");
}

/// Debounce (issue 43) from the CLI: `--debounce-key/--debounce-period/--debounce-max-wait`
/// create a task, the next enqueue with the key replaces it (same id, new payload,
/// `replaced: true`); flags that exclude each other fail before anything is sent.
fn debounce_from_the_cli(backend: &str) {
    let s = serve(backend);
    let add = |payload: &str| -> Value {
        serde_json::from_str(&s.ok(&[
            "task",
            "add",
            "--json",
            "--kind",
            "digest",
            "--payload",
            payload,
            "--debounce-key",
            "cli:1",
            "--debounce-period",
            "1h",
            "--debounce-max-wait",
            "2h",
        ]))
        .unwrap()
    };
    let a = add("1");
    assert_eq!(
        (&a["replaced"], &a["state"]),
        (&json!(false), &json!("scheduled"))
    );
    let b = add("2");
    assert_eq!(
        (&b["id"], &b["replaced"], &b["payload"]),
        (&a["id"], &json!(true), &json!(2))
    );
    assert_eq!(s.task(a["id"].as_i64().unwrap())["debounce_key"], "cli:1");
    for bad in [
        vec!["--debounce-key", "k"],
        vec!["--debounce-period", "1s"],
        vec![
            "--debounce-key",
            "k",
            "--debounce-period",
            "1s",
            "--run-in",
            "1m",
        ],
        vec![
            "--debounce-key",
            "k",
            "--debounce-period",
            "1s",
            "--unique-key",
            "u",
        ],
        vec!["--debounce-key", "", "--debounce-period", "1s"],
        vec!["--debounce-key", "k", "--debounce-period", "40days"],
    ] {
        let mut args = vec!["task", "add", "--kind", "x"];
        args.extend(bad.iter().copied());
        let o = s.cli(&args);
        assert!(!o.status.success(), "{args:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("debounce"),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let all: Value = serde_json::from_str(&s.ok(&["task", "list", "--json"])).unwrap();
    assert_eq!(all.as_array().unwrap().len(), 1, "{all}");
}

/// Dead-letter queues (issue 43) from the CLI: `docket queue set Q --dead-letter D`; a
/// `docket worker` whose command fails on the task's last attempt discards it, and its dead
/// letter waits in D with `dead_letter_of`; a queue cannot be its own, and "" clears it.
fn dead_letters_from_the_cli(backend: &str) {
    let s = serve(backend);
    s.ok(&["queue", "set", "dq", "--dead-letter", "dq-dead"]);
    let q: Value = serde_json::from_str(&s.ok(&["queue", "show", "dq", "--json"])).unwrap();
    assert_eq!(q["settings"]["dead_letter"], "dq-dead");
    let o = s.cli(&["queue", "set", "dq", "--dead-letter", "dq"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("own dead-letter queue"));
    let id = s.add(&[
        "--queue",
        "dq",
        "--kind",
        "k",
        "--payload",
        "7",
        "--max-attempts",
        "1",
    ]);
    let w = s.worker(&["--queue", "dq"], &["false"]);
    s.wait_for(id, "discarded", |t| t["state"] == "discarded");
    drop(w);
    let list = |q: &str| -> Vec<Value> {
        let out: Value =
            serde_json::from_str(&s.ok(&["task", "list", "--json", "--queue", q])).unwrap();
        out.as_array().unwrap().clone()
    };
    let dead = list("dq-dead");
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(
        (&dead[0]["kind"], &dead[0]["payload"]),
        (&json!("k"), &json!(7))
    );
    assert_eq!(dead[0]["dead_letter_of"]["task_id"], id);
    assert_eq!(dead[0]["dead_letter_of"]["attempts"], 1);
    s.ok(&["queue", "set", "dq", "--dead-letter", ""]);
    let q: Value = serde_json::from_str(&s.ok(&["queue", "show", "dq", "--json"])).unwrap();
    assert!(q["settings"].get("dead_letter").is_none(), "{q}");
}

/// Tags (issue 43) from the CLI: `task add --tag`, `task list --tag`, `task bulk … --tag`; a
/// bad tag is a clear error before anything is sent.
fn tags_from_the_cli(backend: &str) {
    let s = serve(backend);
    let a = s.add(&["--kind", "k", "--tag", "customer:42", "--tag", "plan:pro"]);
    let b = s.add(&["--kind", "k", "--tag", "customer:42"]);
    let _c = s.add(&["--kind", "k", "--tag", "customer:7"]);
    assert_eq!(s.task(a)["tags"], json!(["customer:42", "plan:pro"]));
    let list = |tag: &str| -> Vec<i64> {
        let out: Value =
            serde_json::from_str(&s.ok(&["task", "list", "--json", "--tag", tag])).unwrap();
        out.as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_i64().unwrap())
            .collect()
    };
    assert_eq!(list("customer:42"), vec![a, b]);
    assert_eq!(list("plan:pro"), vec![a]);
    s.ok(&["task", "bulk", "cancel", "--tag", "customer:42", "--yes"]);
    assert_eq!(s.task(a)["state"], "cancelled");
    assert_eq!(s.task(b)["state"], "cancelled");
    let o = s.cli(&["task", "add", "--kind", "k", "--tag", ""]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("tags[0]"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

both!(
    tags_from_the_cli,
    dead_letters_from_the_cli,
    debounce_from_the_cli,
    odd_queue_names_reach_their_own_routes,
    bulk_file_and_cli_errors,
    expiry_and_after_end_from_the_cli,
    linear_backoff_from_the_cli,
    user_task_lists_from_the_cli,
    task_search_from_the_cli,
    task_set_and_stages_from_the_cli,
);
