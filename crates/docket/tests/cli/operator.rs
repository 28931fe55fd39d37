//! The operator's CLI: tokens, status/watch/bulk, secrets kept out of output, bench.

use super::*;

/// Auth required: `docket token create/list/revoke` on the database, DOCKET_TOKEN for the CLI and
/// the worker, one clear line (and a non-zero exit) when refused.
fn tokens_from_the_cli(backend: &str) {
    let s = serve_with(backend, &["--auth", "required"]);
    let as_token = |token: Option<&str>, args: &[&str]| {
        let mut c = Command::new(BIN);
        c.args(args)
            .env("DOCKET_SERVER", &s.url)
            .env_remove("DOCKET_TOKEN");
        if let Some(t) = token {
            c.env("DOCKET_TOKEN", t);
        }
        c.output().unwrap()
    };
    let token_cmd = |args: &[&str]| {
        let mut a = vec!["token"];
        a.extend_from_slice(args);
        let db: Vec<&str> = s.db.iter().map(String::as_str).collect();
        a.extend_from_slice(&db);
        Command::new(BIN).args(&a).output().unwrap()
    };
    let made = token_cmd(&["create", "ci", "--scope", "enqueue", "--scope", "read"]);
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let ci = String::from_utf8(made.stdout).unwrap().trim().to_string();
    assert!(ci.starts_with("dkt_") && ci.len() == 68, "{ci}");
    let again = token_cmd(&["create", "ci", "--scope", "read"]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already has that name"));
    let bad = token_cmd(&["create", "x", "--scope", "root"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown scope"));

    // Without a token: one line naming the problem, exit 1.
    let o = as_token(None, &["task", "add", "--kind", "k"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("unauthenticated") && err.contains("401"),
        "{err}"
    );
    // With one.
    let o = as_token(Some(&ci), &["task", "add", "--kind", "k", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let id = serde_json::from_slice::<Value>(&o.stdout).unwrap()["id"]
        .as_i64()
        .unwrap();
    // A worker whose token may not work the queue stops at once with the server's reason.
    let w = token_cmd(&["create", "w", "--scope", "work", "--queue", "other"]);
    let w = String::from_utf8(w.stdout).unwrap().trim().to_string();
    let o = Command::new(BIN)
        .args(["worker", "--queue", "default", "--", "true"])
        .env("DOCKET_SERVER", &s.url)
        .env("DOCKET_TOKEN", &w)
        .env("DOCKET_LOG", "warn")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(
        err.contains("forbidden") && err.contains("default"),
        "{err}"
    );
    // One that may works it.
    let w2 = token_cmd(&["create", "w2", "--scope", "work", "--queue", "default"]);
    let w2 = String::from_utf8(w2.stdout).unwrap().trim().to_string();
    let mut c = Command::new(BIN);
    c.args(["worker", "--queue", "default", "--", "true"])
        .env("DOCKET_SERVER", &s.url)
        .env("DOCKET_TOKEN", &w2)
        .env("DOCKET_LOG", "warn")
        .stdout(Stdio::null())
        .process_group(0);
    let _worker = Worker(c.spawn().unwrap());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let o = as_token(Some(&ci), &["task", "show", &id.to_string()]);
        let t: Value = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
        if t["state"] == "completed" {
            break;
        }
        assert!(Instant::now() < deadline, "not completed: {t}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // The list names the tokens, never their secrets.
    let list = token_cmd(&["list"]);
    let text = String::from_utf8(list.stdout).unwrap();
    assert!(
        text.contains("ci") && text.contains("w2") && text.contains("admin"),
        "{text}"
    );
    assert!(!text.contains(&ci) && !text.contains(&w2), "{text}");
    // Revoked: refused at once.
    assert!(token_cmd(&["revoke", "ci"]).status.success());
    let o = as_token(Some(&ci), &["task", "list"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("revoked"));
    assert!(!token_cmd(&["revoke", "ci"]).status.success());

    // With a server given, token commands go through /v1/tokens (issue 21 item 3: they used to
    // create ./docket.db and print a token the server refused). Run from an empty directory,
    // with no database named anywhere: nothing may appear there.
    let cwd = tempfile::tempdir().unwrap();
    let root = token_cmd(&["create", "root", "--scope", "admin"]);
    let root = String::from_utf8(root.stdout).unwrap().trim().to_string();
    let via = |token: Option<&str>, args: &[&str]| {
        let mut c = Command::new(BIN);
        c.arg("token")
            .args(args)
            .current_dir(cwd.path())
            .env("DOCKET_SERVER", &s.url)
            .env_remove("DOCKET_TOKEN")
            .env_remove("DOCKET_DATABASE_URL");
        if let Some(t) = token {
            c.env("DOCKET_TOKEN", t);
        }
        c.output().unwrap()
    };
    let o = via(Some(&root), &["create", "remote", "--scope", "read"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let remote = String::from_utf8(o.stdout).unwrap().trim().to_string();
    let o = as_token(Some(&remote), &["task", "list"]);
    assert!(
        o.status.success(),
        "the server takes the token it made: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = via(Some(&root), &["list"]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(o.status.success() && text.contains("remote"), "{text}");
    assert!(!text.contains(&remote), "{text}");
    // A token without admin: the server's refusal, one line, exit 1.
    let o = via(Some(&remote), &["create", "x", "--scope", "read"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("forbidden"));
    let o = via(Some(&root), &["revoke", "remote"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        as_token(Some(&remote), &["task", "list"]).status.code(),
        Some(1)
    );
    let o = via(Some(&root), &["revoke", "remote"]);
    assert_eq!(o.status.code(), Some(1));
    // Neither a server nor a database: refused in one line; migrate needs a database too.
    for args in [&["token", "list"][..], &["migrate"][..]] {
        let o = Command::new(BIN)
            .args(args)
            .current_dir(cwd.path())
            .env_remove("DOCKET_SERVER")
            .env_remove("DOCKET_DATABASE_URL")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    // A SQLite file that is not there is not created by a token command.
    let o = Command::new(BIN)
        .args(["token", "list", "--database", "sqlite://nothere.db"])
        .current_dir(cwd.path())
        .env_remove("DOCKET_SERVER")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no database"));
    let left: Vec<_> = std::fs::read_dir(cwd.path()).unwrap().collect();
    assert!(left.is_empty(), "no file made: {left:?}");
}

#[test]
fn operator_cli_status_watch_bulk_completions_man() {
    let s = serve("sqlite");
    for i in 0..4 {
        s.add(&[
            "--kind",
            "bulk",
            "--queue",
            "ops",
            "--payload",
            &format!("{{\"n\":{i}}}"),
        ]);
    }
    let keep = s.add(&["--kind", "keep", "--queue", "ops"]);
    let status = s.ok(&["status"]);
    assert!(
        status.contains("QUEUE") && status.contains("ops") && status.contains("NODE"),
        "{status}"
    );
    assert!(status.contains(&s.node), "{status}");
    let v: Value = serde_json::from_str(&s.ok(&["status", "--json"])).unwrap();
    assert_eq!(v["queues"][0]["counts"]["available"], 5);
    // Bulk cancel by filter: only the matching tasks, a summary at the end.
    let out = s.ok(&["task", "cancel", "--queue", "ops", "--kind", "bulk"]);
    assert!(out.contains("cancel: 4 done, 0 refused"), "{out}");
    assert_eq!(s.task(keep)["state"], "available");
    let out = s.ok(&["task", "retry", "--kind", "bulk", "--state", "cancelled"]);
    assert!(out.contains("retry: 4 done"), "{out}");
    // `task bulk`: counted, refused without a confirmation when there is no terminal to ask
    // on, done on the server with --yes; delete takes only finished tasks.
    let v: Value = serde_json::from_str(&s.ok(&[
        "task",
        "bulk",
        "cancel",
        "--queue",
        "ops",
        "--kind",
        "bulk",
        "--dry-run",
        "--json",
    ]))
    .unwrap();
    assert_eq!(
        (v["total"].as_i64(), v["more"].as_bool()),
        (Some(4), Some(false))
    );
    let o = s.cli(&["task", "bulk", "cancel", "--queue", "ops", "--kind", "bulk"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--yes"),
        "{o:?}"
    );
    assert_eq!(
        s.task(keep)["state"],
        "available",
        "nothing done unconfirmed"
    );
    let out = s.ok(&[
        "task", "bulk", "cancel", "--queue", "ops", "--kind", "bulk", "--yes",
    ]);
    assert!(out.contains("cancel: 4 done, 0 refused"), "{out}");
    let out = s.ok(&["task", "bulk", "delete", "--queue", "ops", "--yes"]);
    assert!(out.contains("delete: 4 done"), "{out}");
    assert_eq!(
        s.task(keep)["state"],
        "available",
        "unfinished: not deleted"
    );
    let o = s.cli(&["task", "bulk", "nuke", "--queue", "ops", "--yes"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no bulk action"));
    let o = s.cli(&["task", "bulk", "retry", "--state", "running", "--yes"]);
    assert!(!o.status.success(), "retry applies to no running task");
    let o = s.cli(&["task", "cancel", "1", "--queue", "ops"]);
    assert!(
        !o.status.success(),
        "an id and a filter together are refused"
    );
    // watch follows a task to its end: exit 0 when it completes, 1 when cancelled.
    let watcher = Command::new(BIN)
        .args(["task", "watch", &keep.to_string()])
        .env("DOCKET_SERVER", &s.url)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let w = s.worker(
        &["--queue", "ops"],
        &["sh", "-c", "cat >/dev/null; echo '{\"ok\":true}'"],
    );
    let out = watcher.wait_with_output().unwrap();
    drop(w);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("available") && text.contains("completed"),
        "{text}"
    );
    assert!(text.contains("result: {\"ok\":true}"), "{text}");
    let gone = s.add(&["--kind", "never", "--queue", "nobody", "--run-in", "1h"]);
    let watcher = Command::new(BIN)
        .args(["task", "watch", &gone.to_string()])
        .env("DOCKET_SERVER", &s.url)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    s.ok(&["task", "cancel", &gone.to_string()]);
    let out = watcher.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("cancelled"));
    // Completions and the man page come from the clap definitions.
    let bash = s.ok(&["completions", "bash"]);
    assert!(
        bash.contains("_docket()") && bash.contains("schedule"),
        "bash completions"
    );
    assert!(s.ok(&["completions", "zsh"]).contains("#compdef docket"));
    let man = s.ok(&["man"]);
    assert!(
        man.starts_with(".ie") || man.contains(".TH docket"),
        "{}",
        &man[..200.min(man.len())]
    );
    // The audit log has the CLI's actions with who did them.
    let audit = http::blocking_get(&format!("{}/v1/audit", s.url)).unwrap();
    let user = std::env::var("USER").unwrap_or_else(|_| "unknown".into());
    assert!(audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["actor"] == format!("cli:{user}") && e["action"] == "task.cancel"));
}

/// No database password reaches the logs, `/v1/status`, `/metrics`, the dashboard, task errors
/// or API error messages (docs: operations/security.md). PostgreSQL here trusts 127.0.0.1, so URLs with a
/// password connect and the password is just text to look for.
#[test]
fn no_password_in_any_output() {
    let dir = tempfile::tempdir().unwrap();
    let schema = format!("cli_sec_{}", uuid::Uuid::new_v4().simple());
    let pgt_schema = format!("cli_secpgt_{}", uuid::Uuid::new_v4().simple());
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let log = dir.path().join("serve.log");
    let child = Command::new(BIN)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--node", "sec"])
        .args([
            "--database",
            "postgres://postgres:SeCrEt-db-1@127.0.0.1:5432/postgres",
            "--schema",
            &schema,
        ])
        .args([
            "--sql-target",
            "main=postgres://postgres:SeCrEt-tg-2@127.0.0.1:5432/postgres",
            "--sql-target",
            "dead=host=127.0.0.1 port=1 user=postgres password=SeCrEt-dd-3 dbname=postgres",
            "--pg-task",
            &format!("postgres://postgres:SeCrEt-pt-4@127.0.0.1:5432/postgres?schema={pgt_schema}&sleep=100"),
        ])
        .env("DOCKET_LOG", "debug")
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::options().append(true).open(&log).unwrap())
        .spawn()
        .unwrap();
    let mut s = Server {
        child,
        url: url.clone(),
        node: "sec".into(),
        db: vec![],
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while http::blocking_get(&format!("{url}/healthz")).is_none() {
        assert!(Instant::now() < deadline, "server did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    // A task that fails to connect, one that runs, and refused ones that name a URL.
    let dead = s.add(&[
        "--sql",
        "SELECT 1",
        "--target",
        "dead",
        "--max-attempts",
        "1",
    ]);
    let ok = s.add(&["--sql", "SELECT 1", "--target", "main"]);
    s.wait_for(dead, "dead target failed", |t| t["state"] == "discarded");
    s.wait_for(ok, "sql task done", |t| t["state"] == "completed");
    let mut seen = String::new();
    for target in [
        "postgres://postgres:SeCrEt-raw-5@127.0.0.1/postgres",
        "host=x password=SeCrEt-raw-6",
    ] {
        let o = s.cli(&["task", "add", "--sql", "SELECT 1", "--target", target]);
        assert!(!o.status.success());
        seen.push_str(&String::from_utf8_lossy(&o.stderr));
    }
    for path in [
        "/v1/status".to_string(),
        "/metrics".to_string(),
        "/".to_string(),
        "/ui/schedules".to_string(),
        "/ui/tasks".to_string(),
        format!("/ui/tasks/{dead}"),
        format!("/v1/tasks/{dead}"),
        "/v1/nodes".to_string(),
        "/healthz".to_string(),
    ] {
        let o = Command::new("curl")
            .args(["-s", &format!("{url}{path}")])
            .output()
            .unwrap();
        assert!(!o.stdout.is_empty(), "{path} answered nothing");
        seen.push_str(&format!("\n--- {path}\n"));
        seen.push_str(&String::from_utf8_lossy(&o.stdout));
    }
    let _ = s.child.kill();
    let _ = s.child.wait();
    seen.push_str(&std::fs::read_to_string(&log).unwrap());
    assert!(seen.contains("docket serving"), "the log was captured");
    assert!(
        seen.contains("/ui/tasks") || seen.contains("task"),
        "pages were read"
    );
    if let Some(i) = seen.find("SeCrEt") {
        let from = seen[..i]
            .char_indices()
            .rev()
            .nth(300)
            .map_or(0, |(j, _)| j);
        panic!(
            "a password leaked: …{}…",
            &seen[from..(i + 40).min(seen.len())]
        );
    }
}

/// `docket bench --save` writes a baseline; `--compare` prints the ratios and fails on a drop
/// of `--max-drop` times (here a baseline made ten times faster than the run).
#[test]
fn bench_compares_with_a_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.json");
    let run = |extra: &[&str]| {
        Command::new(BIN)
            .args(["bench", "-n", "300", "-c", "2", "--latency-secs", "0"])
            .args(extra)
            .output()
            .unwrap()
    };
    let o = run(&["--save", base.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&base).unwrap()).unwrap();
    assert_eq!(
        (v["backend"].as_str(), v["tasks"].as_u64()),
        (Some("sqlite"), Some(300))
    );
    let o = run(&["--compare", base.to_str().unwrap(), "--max-drop", "1000"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("of baseline"));
    v["worked_per_s"] = json!(v["worked_per_s"].as_f64().unwrap() * 10.0);
    let fast = dir.path().join("fast.json");
    std::fs::write(&fast, v.to_string()).unwrap();
    let o = run(&["--compare", fast.to_str().unwrap(), "--max-drop", "3"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("worked tasks/s is") && err.contains("worse"),
        "{err}"
    );
}

both!(tokens_from_the_cli,);
