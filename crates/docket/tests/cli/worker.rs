//! `docket worker`: commands as handlers, the control protocol, kills, timeouts, reports, the supervisor, graceful stops, spans.

use super::*;

const ECHO: &str = r#"p=$(cat); case "$p" in *fail*) echo "bad input $p" >&2; exit 3;; esac; printf '{"id": %s, "attempt": %s, "queue": "%s", "trace": "%s", "echo": %s}' "$DOCKET_TASK_ID" "$DOCKET_TASK_ATTEMPT" "$DOCKET_QUEUE" "$DOCKET_TRACE_ID" "$p""#;

fn worker_runs_commands(backend: &str) {
    let s = serve(backend);
    let ok = s.add(&["--kind", "echo", "--payload", r#"{"n": 1}"#]);
    let text = s.add(&["--kind", "echo", "--payload", r#""plain""#]);
    let bad = s.add(&[
        "--kind",
        "echo",
        "--payload",
        r#""please fail""#,
        "--max-attempts",
        "1",
    ]);
    let mut w = s.worker(&["--concurrency", "2"], &["sh", "-c", ECHO]);
    let t = s.wait_for(ok, "completed", |t| t["state"] == "completed");
    let trace = t["trace_id"].as_str().unwrap().to_string();
    assert_eq!(trace.len(), 32, "every task has a trace id");
    assert_eq!(
        t["result"],
        json!({"id": ok, "attempt": 1, "queue": "default", "trace": trace, "echo": {"n": 1}})
    );
    let t = s.wait_for(text, "completed", |t| t["state"] == "completed");
    assert_eq!(t["result"]["echo"], "plain");
    let t = s.wait_for(bad, "discarded", |t| t["state"] == "discarded");
    let msg = t["errors"][0]["message"].as_str().unwrap();
    assert!(msg.starts_with("exit status 3: bad input"), "{msg}");
    signal(w.id(), Signal::SIGTERM);
    assert!(w.wait().unwrap().success(), "worker exits 0 on SIGTERM");
    // A non-JSON stdout is kept as a string.
    let raw = s.add(&["--kind", "x", "--payload", "1"]);
    let mut w = s.worker(&[], &["sh", "-c", "echo not json"]);
    let t = s.wait_for(raw, "completed", |t| t["state"] == "completed");
    assert_eq!(t["result"], "not json\n");
    signal(w.id(), Signal::SIGTERM);
    w.wait().unwrap();
}

/// The command's side of `docket worker` (issue 21 item 10): DOCKET_WORKER and
/// DOCKET_TASK_STAGE in, and JSON lines in $DOCKET_CONTROL out — the next stage with a new
/// payload, a retry delay, a permanent failure, an error message, progress while it runs; a
/// bad line fails the attempt naming it. `--stage` claims only that stage.
fn worker_control_protocol(backend: &str) {
    let s = serve(backend);
    // The command's script is its payload's "do": each case says what to write.
    let script = r#"
        do=$(cat)
        case "$do" in
          *handoff*) [ "$DOCKET_TASK_STAGE" = a ] && echo '{"next_stage": "b", "payload": {"do": "handoff, now at b"}}' >> "$DOCKET_CONTROL"
                     echo '{"stage": "'"$DOCKET_TASK_STAGE"'", "worker": "'"$DOCKET_WORKER"'", "max": '"$DOCKET_TASK_MAX_ATTEMPTS"'}' ;;
          *later*) echo '{"retry_in": "1h", "error": "smtp down"}' >> "$DOCKET_CONTROL"; exit 1 ;;
          *never*) echo '{"permanent": true}' >> "$DOCKET_CONTROL"; exit 1 ;;
          *slow*) echo '{"progress": {"pct": 50}}' >> "$DOCKET_CONTROL"; sleep 2; echo '{"progress": {"pct": 100}}' >> "$DOCKET_CONTROL" ;;
          *garbled*) echo 'this is not json' >> "$DOCKET_CONTROL" ;;
          *) echo '"plain"' ;;
        esac"#;
    let add = |payload: &str, extra: &[&str]| {
        let mut a = vec!["--kind", "ctl", "--payload", payload];
        a.extend_from_slice(extra);
        s.add(&a)
    };
    let handoff = add(r#""handoff""#, &["--stage", "a", "--max-attempts", "4"]);
    // Only stage a is worked first: the task waits at b until a worker takes stage b.
    let mut wa = s.worker(&["--stage", "a", "--name", "wa"], &["sh", "-c", script]);
    let t = s.wait_for(handoff, "stage b", |t| t["stage"] == "b");
    assert_eq!(t["state"], "available", "{t}");
    assert_eq!(t["stages_done"], json!(["a"]));
    assert_eq!(t["payload"], json!({"do": "handoff, now at b"}));
    assert_eq!(t["result"], json!({"stage": "a", "worker": "wa", "max": 4}));
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        s.task(handoff)["state"],
        "available",
        "a stage-a worker leaves stage b"
    );
    let pids = vec![wa.id()];
    signal(wa.id(), Signal::SIGTERM);
    wa.wait().unwrap();
    let later = add(r#""later""#, &[]);
    let never = add(r#""never""#, &["--max-attempts", "5"]);
    let slow = add(r#""slow""#, &[]);
    let garbled = add(r#""garbled""#, &["--max-attempts", "1"]);
    let mut w = s.worker(
        &["--name", "wb", "--concurrency", "4", "--lease", "900ms"],
        &["sh", "-c", script],
    );
    let t = s.wait_for(handoff, "completed at b", |t| t["state"] == "completed");
    assert_eq!(t["result"]["stage"], "b");
    let t = s.wait_for(later, "retryable", |t| t["state"] == "retryable");
    assert_eq!(t["errors"][0]["message"], "smtp down", "{t}");
    let at = |v: &Value| chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap()).unwrap();
    let delay = at(&t["run_at"]) - at(&t["errors"][0]["at"]);
    assert!(
        (3599..=3601).contains(&delay.num_seconds()),
        "retry_in 1h, not the backoff: {t}"
    );
    let t = s.wait_for(never, "discarded", |t| t["state"] == "discarded");
    assert_eq!(t["attempt"], 1, "permanent: no second attempt of 5: {t}");
    // Progress is seen while the command runs (a heartbeat every lease/3 carries it).
    let t = s.wait_for(slow, "progress", |t| t["progress"] == json!({"pct": 50}));
    assert_eq!(t["state"], "running", "{t}");
    let t = s.wait_for(slow, "completed", |t| t["state"] == "completed");
    assert_eq!(
        t["progress"],
        json!({"pct": 100}),
        "the last progress is kept: {t}"
    );
    let t = s.wait_for(garbled, "discarded", |t| t["state"] == "discarded");
    let msg = t["errors"][0]["message"].as_str().unwrap();
    assert!(msg.contains("control file line 1"), "{msg}");
    let pids = [pids, vec![w.id()]].concat();
    signal(w.id(), Signal::SIGTERM);
    assert!(w.wait().unwrap().success());
    // The control files (named docket-control-<worker pid>-…) are gone.
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name().to_string_lossy().to_string();
            pids.iter()
                .any(|p| n.starts_with(&format!("docket-control-{p}-")))
        })
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

fn killed_worker_loses_nothing(backend: &str) {
    let s = serve(backend);
    s.ok(&[
        "queue",
        "set",
        "default",
        "--backoff-initial",
        "100ms",
        "--backoff-jitter",
        "0",
    ]);
    let id = s.add(&["--kind", "slow", "--payload", r#"{"x": 1}"#]);
    let mut w = s.worker(&["--lease", "1s"], &["sh", "-c", "sleep 60"]);
    s.wait_for(id, "running", |t| t["state"] == "running");
    // kill -9 the worker and its command: no goodbye, no complete, no fail.
    signal_group(w.id(), Signal::SIGKILL);
    w.wait().unwrap();
    let mut w2 = s.worker(&["--lease", "5s"], &["cat"]);
    let t = s.wait_for(id, "completed on a second attempt", |t| {
        t["state"] == "completed"
    });
    assert_eq!(t["attempt"], 2);
    assert_eq!(t["errors"][0]["message"], "lease expired");
    assert_eq!(t["result"], json!({"x": 1}));
    signal(w2.id(), Signal::SIGTERM);
    w2.wait().unwrap();
}

/// Issue 12: `docket worker --kind K` (repeatable) claims only those kinds; other tasks wait.
fn worker_claims_only_its_kinds(backend: &str) {
    let s = serve(backend);
    let a = s.add(&["--kind", "resize", "--payload", "1"]);
    let b = s.add(&["--kind", "thumb", "--payload", "2"]);
    let c = s.add(&["--kind", "email", "--payload", "3"]);
    let mut w = s.worker(&["--kind", "resize", "--kind", "thumb"], &["cat"]);
    s.wait_for(a, "completed", |t| t["state"] == "completed");
    s.wait_for(b, "completed", |t| t["state"] == "completed");
    std::thread::sleep(Duration::from_millis(500));
    let t = s.task(c);
    assert_eq!(
        (t["state"].as_str(), t["attempt"].as_i64()),
        (Some("available"), Some(0)),
        "{t}"
    );
    signal(w.id(), Signal::SIGTERM);
    w.wait().unwrap();
}

/// Worker labels (issue 43) from the CLI: `task add --requires/--prefer/--prefer-for` and
/// `worker --label`: a worker with the GPU label runs the task that requires it, a worker
/// without labels leaves it waiting; bad labels are clear errors before anything is sent.
fn worker_labels_from_the_cli(backend: &str) {
    let s = serve(backend);
    let gpu = s.add(&["--kind", "k", "--payload", "1", "--requires", "gpu=a100"]);
    let eu = s.add(&[
        "--kind",
        "k",
        "--payload",
        "2",
        "--prefer",
        "region=eu",
        "--prefer-for",
        "1h",
    ]);
    let t = s.task(eu);
    assert_eq!(
        t["prefer"],
        json!({"labels": {"region": "eu"}, "for": "1h"}),
        "{t}"
    );
    let plain = s.add(&["--kind", "k", "--payload", "3"]);
    let mut w = s.worker(&[], &["cat"]);
    s.wait_for(plain, "completed", |t| t["state"] == "completed");
    std::thread::sleep(Duration::from_millis(500));
    for id in [gpu, eu] {
        assert_eq!(s.task(id)["state"], "available", "a plain worker took {id}");
    }
    signal(w.id(), Signal::SIGTERM);
    w.wait().unwrap();
    let mut w = s.worker(&["--label", "gpu=a100", "--label", "region=eu"], &["cat"]);
    // Its report carries its labels: `docket worker list` shows them.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let o = s.cli(&["worker", "list"]);
        let out = String::from_utf8_lossy(&o.stdout);
        if out.contains("gpu=a100, region=eu") {
            break;
        }
        assert!(Instant::now() < deadline, "no labels in the list: {out}");
        std::thread::sleep(Duration::from_millis(200));
    }
    for id in [gpu, eu] {
        let t = s.wait_for(id, "completed", |t| t["state"] == "completed");
        assert_eq!(
            t["requires"],
            if id == gpu {
                json!({"gpu": "a100"})
            } else {
                Value::Null
            }
        );
    }
    signal(w.id(), Signal::SIGTERM);
    w.wait().unwrap();
    for (args, want) in [
        (
            vec!["task", "add", "--kind", "k", "--requires", "gpu"],
            "NAME=VALUE",
        ),
        (
            vec!["task", "add", "--kind", "k", "--prefer", "a=b"],
            "--prefer-for",
        ),
        (
            vec!["task", "add", "--kind", "k", "--requires", &"v".repeat(300)],
            "NAME=VALUE",
        ),
    ] {
        let o = s.cli(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(want), "{args:?}: {err}");
    }
    let long = format!("gpu={}", "v".repeat(129));
    let o = s.cli(&["task", "add", "--kind", "k", "--requires", &long]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("requires.gpu"), "{err}");
}

/// Issue 9: at the task's timeout the worker sends SIGTERM to the command's whole process
/// group (a child the command started goes too) and fails the attempt with `timeout`.
fn worker_enforces_the_timeout(backend: &str) {
    let s = serve(backend);
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("child");
    let id = s.add(&["--kind", "hang", "--timeout", "1s", "--max-attempts", "1"]);
    let script = format!("sleep 600 & echo $! > {}; wait", pidfile.display());
    let t0 = Instant::now();
    let mut w = s.worker(
        &["--lease", "30s", "--kill-grace", "2s"],
        &["sh", "-c", &script],
    );
    let t = s.wait_for(id, "discarded by its timeout", |t| {
        t["state"] == "discarded"
    });
    assert_eq!(t["errors"][0]["message"], "timeout", "{t}");
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "took {:?}",
        t0.elapsed()
    );
    let child: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    // The grandchild is gone (a zombie until init reaps it counts as gone: kill(0) on it
    // succeeds, so look at its state instead).
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
        let state = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .next()
            .unwrap_or("");
        if stat.is_empty() || state == "Z" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the command's child {child} survived the timeout: {stat}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    signal(w.id(), Signal::SIGTERM);
    w.wait().unwrap();
}

/// Issue 9: a worker whose report meets a server that is down (restarting) retries it while
/// the lease lasts: the finished work is not lost and does not run again.
fn worker_retries_reports_across_a_server_restart(backend: &str) {
    let mut s = serve(backend);
    let id = s.add(&["--kind", "slow", "--payload", "7"]);
    // The command says it started: a node killed between the claim's commit and its answer
    // reaching the worker leaves the task to its lease (a minute), not to this worker's report
    // (one CI run killed it 17 ms after the commit, and the claim failed instead).
    let dir = tempfile::tempdir().unwrap();
    let started = dir.path().join("started");
    let script = format!("touch '{}'; sleep 2; cat", started.display());
    let mut w = s.worker(&["--lease", "60s"], &["sh", "-c", &script]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !started.exists() {
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The node dies while the command runs, and comes back after the command has finished.
    let _ = s.child.kill();
    let _ = s.child.wait();
    std::thread::sleep(Duration::from_secs(4));
    let port = s.url.rsplit(':').next().unwrap().to_string();
    s.child = Command::new(BIN)
        .arg("serve")
        .args(&s.db)
        .args(["--listen", &format!("127.0.0.1:{port}"), "--node", &s.node])
        .env("DOCKET_LOG", "warn")
        .current_dir(s._dir.path())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while http::blocking_get(&format!("{}/healthz", s.url)).is_none() {
        assert!(Instant::now() < deadline, "server did not come back");
        std::thread::sleep(Duration::from_millis(100));
    }
    let t = s.wait_for(id, "completed by the first attempt", |t| {
        t["state"] == "completed"
    });
    assert_eq!(t["attempt"], 1, "{t}");
    assert_eq!(t["result"], 7);
    assert_eq!(t["errors"], json!([]), "{t}");
    signal(w.id(), Signal::SIGTERM);
    w.wait().unwrap();
}

/// Issue 12 item 9: `docket worker --config workers.toml` runs the enabled named workers, each
/// reports its state (`docket worker list`), a worker killed with SIGKILL is restarted (its
/// report counts the restart), SIGTERM stops them all within shutdown_interval and they report
/// `stop`; a worker that dies without a word is `lost` after three missed reports. A worker's
/// `labels` go on its claims.
fn worker_supervisor_from_the_cli(backend: &str) {
    let s = serve(backend);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("workers.toml");
    std::fs::write(
        &cfg,
        r#"
shutdown_interval = "5s"
report_interval = "200ms"

[workers.mailer]
queue = "mail"
concurrency = 2
command = ["sh", "-c", "cat > /dev/null; echo sent"]

[workers.resizer]
queue = "img"
kinds = ["resize"]
labels = { gpu = "a100" }
command = ["sh", "-c", "cat > /dev/null; echo resized"]

[workers.off]
queue = "never"
command = ["true"]
enabled = false
"#,
    )
    .unwrap();
    let mut sup = Worker(
        Command::new(BIN)
            .args(["worker", "--config", cfg.to_str().unwrap()])
            .env("DOCKET_SERVER", &s.url)
            .env("DOCKET_LOG", "warn")
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap(),
    );
    let workers = || -> Vec<Value> {
        serde_json::from_str::<Value>(&s.ok(&["worker", "list", "--json"]))
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    };
    let wait = |what: &str, f: &dyn Fn(&[Value]) -> bool| -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let w = workers();
            if f(&w) {
                return w;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}: {w:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let w = wait("two idle workers", &|w| {
        w.len() == 2 && w.iter().all(|x| x["state"] == "idle")
    });
    assert_eq!(
        w.iter()
            .map(|x| x["name"].as_str().unwrap())
            .collect::<Vec<_>>(),
        vec!["mailer", "resizer"],
        "the disabled worker is not started"
    );
    assert_eq!(w[0]["report"]["queue"], "mail");
    assert_eq!(w[0]["report"]["concurrency"], 2);
    assert_eq!(w[1]["report"]["kinds"], json!(["resize"]));
    let a = s.add(&["--kind", "k", "--queue", "mail"]);
    // Only a worker with the label takes it: the resizer's `labels` reached its claims.
    let b = s.add(&[
        "--kind",
        "resize",
        "--queue",
        "img",
        "--requires",
        "gpu=a100",
    ]);
    assert_eq!(
        s.wait_for(a, "done", |t| t["state"] == "completed")["result"],
        "sent\n"
    );
    assert_eq!(
        s.wait_for(b, "done", |t| t["state"] == "completed")["worker"],
        "resizer"
    );
    // A crash: the mailer's process is killed; the supervisor starts it again.
    let pid = w[0]["report"]["pid"].as_u64().unwrap() as u32;
    signal(pid, Signal::SIGKILL);
    let w = wait("the mailer restarted", &|w| {
        w[0]["report"]["restarts"] == 1 && w[0]["state"] == "idle"
    });
    assert_ne!(w[0]["report"]["pid"].as_u64(), Some(u64::from(pid)));
    let c = s.add(&["--kind", "k", "--queue", "mail"]);
    s.wait_for(c, "done after the restart", |t| t["state"] == "completed");
    // The table view.
    let table = s.ok(&["worker", "list"]);
    assert!(
        table.contains("mailer") && table.contains("idle"),
        "{table}"
    );
    // SIGHUP re-reads the file (issue 21 item 11): the resizer is removed (it stops and says
    // so), the mailer changes (a new process with the new concurrency), a packer is added, and
    // a worker that did not change keeps its process. A file that does not load changes nothing.
    let pid_of = |w: &[Value], name: &str| {
        w.iter()
            .find(|x| x["name"] == name)
            .and_then(|x| x["report"]["pid"].as_u64())
    };
    let before = workers();
    let mailer_pid = pid_of(&before, "mailer");
    std::fs::write(
        &cfg,
        r#"
shutdown_interval = "5s"
report_interval = "200ms"

[workers.mailer]
queue = "mail"
concurrency = 3
command = ["sh", "-c", "cat > /dev/null; echo sent"]

[workers.packer]
queue = "pack"
command = ["sh", "-c", "cat > /dev/null; echo packed"]
"#,
    )
    .unwrap();
    signal(sup.id(), Signal::SIGHUP);
    let w = wait("the reload", &|w| {
        let by = |n: &str| {
            w.iter()
                .find(|x| x["name"] == n)
                .cloned()
                .unwrap_or(Value::Null)
        };
        by("resizer")["state"] == "stop"
            && by("packer")["state"] == "idle"
            && by("mailer")["report"]["concurrency"] == 3
            && by("mailer")["state"] == "idle"
    });
    assert_ne!(
        pid_of(&w, "mailer"),
        mailer_pid,
        "the changed worker is a new process"
    );
    let p = s.add(&["--kind", "k", "--queue", "pack"]);
    assert_eq!(
        s.wait_for(p, "packed", |t| t["state"] == "completed")["result"],
        "packed
"
    );
    // Unchanged this time: the packer keeps its process; a broken file keeps everything.
    let packer_pid = pid_of(&w, "packer");
    signal(sup.id(), Signal::SIGHUP);
    std::thread::sleep(Duration::from_millis(800));
    std::fs::write(&cfg, "[workers.x]\nqueue = \"\"\n").unwrap();
    signal(sup.id(), Signal::SIGHUP);
    std::thread::sleep(Duration::from_millis(800));
    let w = workers();
    assert_eq!(pid_of(&w, "packer"), packer_pid, "not touched: {w:?}");
    assert!(
        sup.0.try_wait().unwrap().is_none(),
        "a bad file does not stop the supervisor"
    );
    let q = s.add(&["--kind", "k", "--queue", "pack"]);
    s.wait_for(q, "still packing", |t| t["state"] == "completed");
    // SIGTERM stops every worker within shutdown_interval; each says so.
    let t0 = Instant::now();
    signal(sup.id(), Signal::SIGTERM);
    assert!(sup.wait().unwrap().success());
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    let w = workers();
    assert!(w.iter().all(|x| x["state"] == "stop"), "{w:?}");
    // A worker that dies without a word goes lost after three missed reports.
    let mut solo = s.worker(
        &[
            "--name",
            "solo",
            "--queue",
            "solo",
            "--report-interval",
            "200ms",
        ],
        &["true"],
    );
    wait("solo reporting", &|w| {
        w.iter()
            .any(|x| x["name"] == "solo" && x["state"] == "idle")
    });
    signal_group(solo.id(), Signal::SIGKILL);
    let _ = solo.wait();
    wait("solo lost", &|w| {
        w.iter()
            .any(|x| x["name"] == "solo" && x["state"] == "lost")
    });
    // A bad file is refused with every problem listed.
    std::fs::write(&cfg, "[workers.x]\nqueue = \"\"\ncommand = []\n").unwrap();
    let o = s.cli(&["worker", "--config", cfg.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("workers.x.queue") && err.contains("workers.x.command"),
        "{err}"
    );
}

/// Issue 37 item 2: `docket worker` told to stop (SIGTERM) at the moment tasks arrive strands
/// nothing. 30 rounds: a worker (concurrency 4) long-polls, 20 tasks become available at once
/// and the SIGTERM comes within ±30 ms of that. Each worker exits within its grace; at the end
/// no task is running and none lost an attempt to a stop.
fn worker_stop_as_tasks_arrive_strands_nothing(backend: &str) {
    let s = serve(backend);
    let q = "stopping";
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut jitter = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % 61) as i64 - 30
    };
    let add = format!("{}/v1/tasks", s.url);
    let body = json!({"tasks": (0..20).map(|i| json!({"queue": q, "kind": "k", "payload": i})).collect::<Vec<_>>()}).to_string();
    for round in 0..30 {
        let mut w = s.worker(
            &[
                "--queue",
                q,
                "--concurrency",
                "4",
                "--grace",
                "5s",
                "--report-interval",
                "0s",
            ],
            &["true"],
        );
        // Its claim is long-polling by now.
        std::thread::sleep(Duration::from_millis(500));
        let off = jitter();
        if off < 0 {
            signal(w.id(), Signal::SIGTERM);
            std::thread::sleep(Duration::from_millis(off.unsigned_abs()));
            assert!(http::blocking_post(&add, &body).is_some());
        } else {
            assert!(http::blocking_post(&add, &body).is_some());
            std::thread::sleep(Duration::from_millis(off as u64));
            signal(w.id(), Signal::SIGTERM);
        }
        let t0 = Instant::now();
        loop {
            if let Some(st) = w.0.try_wait().unwrap() {
                assert!(st.success(), "round {round}: {st:?}");
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(15),
                "round {round}: the worker did not stop within its 5 s grace"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let page = http::blocking_get(&format!("{}/v1/tasks?queue={q}&limit=1000", s.url)).unwrap();
    let tasks = page["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 600);
    let stranded: Vec<&Value> = tasks
        .iter()
        .filter(|t| !matches!(t["state"].as_str(), Some("available" | "completed")))
        .collect();
    assert!(stranded.is_empty(), "left behind by a stop: {stranded:?}");
    for t in tasks {
        let want = if t["state"] == "completed" { 1 } else { 0 };
        assert_eq!(t["attempt"], want, "an attempt lost to a stop: {t}");
        assert_eq!(t["errors"], json!([]), "{t}");
    }
}

/// A command still running when `docket worker`'s grace ends is killed and its task handed back
/// at once (failed with retry_in 0), not left under its lease until the rescuer.
fn worker_hands_back_what_outlives_the_grace(backend: &str) {
    let s = serve(backend);
    let id = s.add(&["--kind", "slow", "--queue", "graceq"]);
    // The command says it started: a stop between the claim's commit and its answer reaching
    // the worker rightly hands the task back unstarted, with no error (one CI run did that).
    let dir = tempfile::tempdir().unwrap();
    let started = dir.path().join("started");
    let script = format!("touch '{}'; exec sleep 60", started.display());
    let mut w = s.worker(
        &[
            "--queue",
            "graceq",
            "--grace",
            "1s",
            "--kill-grace",
            "1s",
            "--lease",
            "1h",
        ],
        &["sh", "-c", &script],
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while !started.exists() {
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(w.id(), Signal::SIGTERM);
    let t0 = Instant::now();
    assert!(w.wait().unwrap().success());
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    let t = s.task(id);
    assert!(
        matches!(t["state"].as_str(), Some("available" | "retryable")),
        "{t}"
    );
    assert_eq!(
        t["errors"][0]["message"],
        "worker stopped: killed after the grace period"
    );
}

/// A minimal OTLP/HTTP collector: keeps every request body it gets.
fn fake_collector() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let got = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = got.clone();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut c) = conn else { continue };
            let mut r = BufReader::new(c.try_clone().unwrap());
            let mut len = 0usize;
            let mut line = String::new();
            let mut first = String::new();
            loop {
                line.clear();
                if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if first.is_empty() {
                    first = line.clone();
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; len];
            let _ = r.read_exact(&mut body);
            keep.lock()
                .unwrap()
                .push(format!("{first}{}", String::from_utf8_lossy(&body)));
            let _ = c.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
            );
        }
    });
    (port, got)
}

#[test]
fn worker_exports_task_spans_over_otlp() {
    let s = serve("sqlite");
    let (port, got) = fake_collector();
    let id = s.add(&["--kind", "traced", "--queue", "otel"]);
    let trace = s.task(id)["trace_id"].as_str().unwrap().to_string();
    let mut w = s.worker(
        &[
            "--queue",
            "otel",
            "--otlp-endpoint",
            &format!("http://127.0.0.1:{port}"),
        ],
        &["sh", "-c", "cat >/dev/null; echo 1"],
    );
    s.wait_for(id, "completed", |t| t["state"] == "completed");
    signal(w.id(), Signal::SIGTERM);
    assert!(w.wait().unwrap().success());
    let bodies = got.lock().unwrap().clone();
    let all = bodies.join("\n");
    assert!(all.starts_with("POST /v1/traces"), "{all}");
    assert!(
        all.contains("\"name\": \"task\""),
        "a span named task: {all}"
    );
    assert!(
        all.contains(&format!("\"traceId\": \"{trace}\"")),
        "the task span belongs to the task's trace: {all}"
    );
    assert!(all.contains("docket"), "service name");
}

both!(
    worker_runs_commands,
    worker_control_protocol,
    killed_worker_loses_nothing,
    worker_claims_only_its_kinds,
    worker_labels_from_the_cli,
    worker_enforces_the_timeout,
    worker_retries_reports_across_a_server_restart,
    worker_supervisor_from_the_cli,
    worker_stop_as_tasks_arrive_strands_nothing,
    worker_hands_back_what_outlives_the_grace,
);
