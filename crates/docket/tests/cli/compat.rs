//! What the seed systems' users run: asyncflow's routes, processes, pg_task's SQL tasks, schedules.

use super::*;

/// Issue 12 item 7: `docket serve --compat asyncflow` mounts asyncflow's routes; without the
/// flag they are not there.
fn compat_asyncflow_from_the_cli(backend: &str) {
    let on = serve_with(backend, &["--compat", "asyncflow"]);
    let v = http::blocking_get(&format!("{}/api/task/getTaskList?limit=5", on.url))
        .expect("the compat route answers 200");
    assert_eq!(
        (v["code"].as_i64(), v["msg"].as_str()),
        (Some(0), Some("ok")),
        "{v}"
    );
    assert_eq!(v["result"]["taskList"], serde_json::json!([]));
    let off = serve(backend);
    assert!(http::blocking_get(&format!("{}/api/task/getTaskList", off.url)).is_none());
    let o = Command::new(BIN)
        .args(["serve", "--compat", "nosuch"])
        .output()
        .unwrap();
    assert!(!o.status.success());
}

/// Issue 12 item 6: asyncflow's t_schedule_cfg from the CLI, under docket's names and
/// asyncflow's (`--max-retry-num`, `--retry-interval`, …); the queue shows when its settings
/// were created and changed; out-of-range values are refused naming the field.
fn schedule_cfg_from_the_cli(backend: &str) {
    let s = serve(backend);
    s.ok(&[
        "queue",
        "set",
        "lark",
        "--schedule-limit",
        "100",
        "--schedule-interval",
        "10s",
        "--max-processing-time",
        "30s",
        "--max-retry-num",
        "3",
        "--retry-interval",
        "10s",
        "--max-retry-interval",
        "30s",
    ]);
    let q: Value = serde_json::from_str(&s.ok(&["queue", "show", "lark", "--json"])).unwrap();
    let st = &q["settings"];
    assert_eq!(
        (
            st["schedule_limit"].as_i64(),
            st["schedule_interval"].as_str(),
            st["timeout"].as_str(),
            st["max_attempts"].as_i64(),
            st["backoff"]["initial"].as_str(),
            st["backoff"]["max"].as_str(),
        ),
        (
            Some(100),
            Some("10s"),
            Some("30s"),
            Some(3),
            Some("10s"),
            Some("30s")
        ),
        "{q}"
    );
    let created = q["created_at"].as_str().unwrap().to_string();
    std::thread::sleep(Duration::from_millis(20));
    s.ok(&["queue", "set", "lark", "--schedule-limit", "0"]);
    let q: Value = serde_json::from_str(&s.ok(&["queue", "show", "lark", "--json"])).unwrap();
    assert_eq!(q["settings"]["schedule_limit"], Value::Null, "0 clears it");
    assert_eq!(q["created_at"].as_str(), Some(created.as_str()));
    assert!(q["updated_at"].as_str().unwrap() > created.as_str(), "{q}");
    for (flag, v) in [
        ("--schedule-limit", "10001"),
        ("--schedule-interval", "1ms"),
    ] {
        let o = s.cli(&["queue", "set", "lark", flag, v]);
        assert!(!o.status.success(), "{flag} {v}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(&flag[2..].replace('-', "_")), "{flag}: {err}");
    }
}

fn processes_from_the_cli(backend: &str) {
    let s = serve(backend);
    let (p, port) = spawn_processor();
    let _p = Killed(p);
    s.ok(&[
        "namespace",
        "put",
        "orders",
        "--processor-url",
        &format!("http://127.0.0.1:{port}/"),
    ]);
    let out = s.ok(&[
        "process",
        "init",
        "orders",
        "o-1",
        "--args",
        r#"{"events": ["created"], "response": "ok"}"#,
    ]);
    assert_eq!(out.trim(), r#""ok""#);
    let o = s.cli(&[
        "process",
        "call",
        "orders",
        "o-1",
        "--args",
        r#"{"error": "card declined"}"#,
    ]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("processor_error") && err.contains("card declined"),
        "{err}"
    );
    let v: Value = serde_json::from_str(&s.ok(&["process", "get", "orders", "o-1"])).unwrap();
    assert_eq!(v["process"]["status"], "error");
    assert_eq!(v["history"][0]["payload"], "created");
    let v: Value = serde_json::from_str(&s.ok(&["process", "trace", "orders", "o-1"])).unwrap();
    assert_eq!(v["tasks"].as_array().unwrap().len(), 2);
    let v: Value =
        serde_json::from_str(&s.ok(&["process", "list", "orders", "--status", "error"])).unwrap();
    assert_eq!(v["processes"][0]["id"], "o-1");
    let v: Value =
        serde_json::from_str(&s.ok(&["process", "simple-repair", "orders", "o-1"])).unwrap();
    assert_eq!(v["process"]["status"], "running");
}

mod processes {
    #[test]
    fn pg() {
        super::processes_from_the_cli("pg")
    }
    #[test]
    fn sqlite() {
        super::processes_from_the_cli("sqlite")
    }
    #[test]
    fn mysql() {
        super::processes_from_the_cli("mysql")
    }
}

fn psql(sql: &str) -> String {
    let o = Command::new("psql")
        .args([
            "-h",
            "127.0.0.1",
            "-U",
            "postgres",
            "-d",
            "postgres",
            "-XAtq",
            "-c",
            sql,
        ])
        .output()
        .expect("psql (scripts/test.sh installs PostgreSQL)");
    assert!(
        o.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap().trim_end().to_string()
}

/// SQL tasks and pg_task tables are PostgreSQL features that a docket on SQLite or on
/// MySQL/MariaDB serves too: its own tasks stay in its database, the SQL runs on PostgreSQL.
#[test]
fn sql_tasks_and_a_pg_task_table_on_an_sqlite_docket() {
    sql_tasks_and_a_pg_task_table("sqlite");
}

#[test]
fn sql_tasks_and_a_pg_task_table_on_a_mysql_docket() {
    sql_tasks_and_a_pg_task_table("mysql");
}

fn sql_tasks_and_a_pg_task_table(backend: &str) {
    let schema = format!("cli_pgt_{}", uuid::Uuid::new_v4().simple());
    let pg_task = format!("postgres://postgres@127.0.0.1:5432/postgres?schema={schema}&sleep=100");
    let s = serve_with(
        backend,
        &[
            "--sql-target",
            "main=host=127.0.0.1 user=postgres dbname=postgres",
            "--pg-task",
            &pg_task,
        ],
    );
    // A sql task through docket's own API.
    let id = s.add(&["--sql", "SELECT 1 AS a, 2 AS b", "--target", "main"]);
    let t = s.wait_for(id, "sql task done", |t| t["state"] == "completed");
    assert_eq!(t["queue"], "sql");
    assert_eq!(t["result"], "a\tb\n1\t2");
    let id = s.add(&["--sql", "SELECT 1/0", "--target", "main"]);
    let t = s.wait_for(id, "sql task failed", |t| t["state"] == "discarded");
    assert_eq!(t["attempt"], 1, "an SQL error is not retried");
    assert!(
        t.to_string()
            .contains("ERROR:  division by zero\\nSTATEMENT:  SELECT 1/0"),
        "{t}"
    );
    // The task's timeout is the statement timeout.
    let id = s.add(&[
        "--sql",
        "SELECT pg_sleep(5)",
        "--target",
        "main",
        "--timeout",
        "1s",
    ]);
    let t = s.wait_for(id, "sql task timed out", |t| t["state"] == "discarded");
    assert!(
        t.to_string()
            .contains("ERROR:  canceling statement due to statement timeout"),
        "{t}"
    );
    // Targets are opt-in: a raw connection string and an unknown name are refused.
    for target in ["postgres://postgres@127.0.0.1/postgres", "elsewhere"] {
        let o = s.cli(&["task", "add", "--sql", "SELECT 1", "--target", target]);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("sql_target_not_allowed"), "{err}");
    }
    // The pg_task table docket made in PostgreSQL runs a plain INSERT.
    psql(&format!(
        "INSERT INTO {schema}.task (input, \"group\") VALUES ('SELECT 40 + 2 AS answer', 'cli')"
    ));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let row = psql(&format!("SELECT state || '|' || COALESCE(output, '') FROM {schema}.task WHERE \"group\" = 'cli'"));
        if row == "DONE|42" {
            break;
        }
        assert!(Instant::now() < deadline, "pg_task row: {row}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The dashboard shows the table: a panel docket-sql adds (the server knows no pg_task).
    let page = Command::new("curl")
        .args(["-fsS", &format!("{}/ui/schedules", s.url)])
        .output()
        .unwrap();
    let html = String::from_utf8_lossy(&page.stdout);
    assert!(html.contains("<h1>pg_task tables</h1>"), "{html}");
    assert!(html.contains(&format!("{schema}.task")), "{html}");
    assert!(html.contains("SELECT 40 + 2 AS answer"), "{html}");
    drop(s);
    psql(&format!("DROP SCHEMA {schema} CASCADE"));
}

#[test]
fn schedules_from_the_cli() {
    let s = serve("sqlite");
    let count = |s: &Server| -> usize {
        let v: Value =
            serde_json::from_str(&s.ok(&["task", "list", "--kind", "tick", "--json"])).unwrap();
        v.as_array().map_or(0, |a| a.len())
    };
    s.ok(&[
        "schedule",
        "add",
        "ticker",
        "--every",
        "1s",
        "--kind",
        "tick",
        "--payload",
        "{\"n\":1}",
    ]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while count(&s) < 2 {
        assert!(Instant::now() < deadline, "the schedule did not fire twice");
        std::thread::sleep(Duration::from_millis(100));
    }
    let list = s.ok(&["schedule", "list"]);
    assert!(
        list.contains("ticker") && list.contains("every 1s"),
        "{list}"
    );
    s.ok(&["schedule", "pause", "ticker"]);
    let paused_at = count(&s);
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(count(&s), paused_at, "a paused schedule fires nothing");
    let v: Value = serde_json::from_str(&s.ok(&["schedule", "show", "ticker", "--json"])).unwrap();
    assert_eq!(v["paused"], true);
    assert_eq!(v["task"]["kind"], "tick");
    // Bad input: a clear error and a non-zero exit.
    let o = s.cli(&[
        "schedule",
        "add",
        "bad",
        "--cron",
        "61 * * * *",
        "--kind",
        "tick",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("invalid_schedule"));
    let o = s.cli(&[
        "schedule",
        "add",
        "both",
        "--cron",
        "* * * * *",
        "--every",
        "1s",
        "--kind",
        "k",
    ]);
    assert!(!o.status.success());
    s.ok(&["schedule", "remove", "ticker"]);
    let o = s.cli(&["schedule", "show", "ticker"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not_found"));
}

both!(compat_asyncflow_from_the_cli, schedule_cfg_from_the_cli,);
