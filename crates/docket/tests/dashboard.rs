//! The dashboard in a real headless Chromium (Debian's chromium + chromedriver, which
//! scripts/test.sh installs): every page loads, a filter narrows the task list, a task
//! cancelled from the dashboard ends cancelled, a task cancelled elsewhere changes on an open
//! page without a reload, and a screenshot of the overview is saved as a test artifact
//! (`target/dashboard-overview.png`, `-overview-pg.png`, `-overview-mysql.png`), on SQLite,
//! PostgreSQL and MariaDB/MySQL (a database `t_<uuid>` of its own, as the other MySQL tests;
//! `scripts/test.sh` drops the ones older runs left).

use fantoccini::{ClientBuilder, Locator};
use serde_json::{json, Value};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_docket");

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn wait_port(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "{what} did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn post(http: &reqwest::Client, url: &str, body: Value) -> Value {
    let r = http.post(url).json(&body).send().await.unwrap();
    assert!(r.status().is_success(), "{url}: {}", r.status());
    r.json().await.unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_in_chromium_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("ui.db").display());
    scenario(&["--database", &db], "overview").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_in_chromium_on_postgres() {
    let url = std::env::var("DOCKET_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let schema = format!("cli_{}", uuid::Uuid::new_v4().simple());
    scenario(&["--database", &url, "--schema", &schema], "overview-pg").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_in_chromium_on_mysql() {
    let url = mysql_database().await;
    scenario(&["--database", &url], "overview-mysql").await;
}

/// A new database on the MariaDB/MySQL server of `DOCKET_TEST_MYSQL_URL`, migrated; its URL.
async fn mysql_database() -> String {
    let t = docket_store::testing::TestStore::mysql_with(1).await;
    t.store.close().await;
    docket_store::testing::TestStore::mysql_db_url(t.schema.as_deref().unwrap())
}

async fn scenario(db: &[&str], shot: &str) {
    let (server, driver, port, driver_port) = start(db, &["--node", "ui-test"], &[]).await;
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let needle = post(
        &http,
        &format!("{base}/v1/tasks"),
        json!({"queue": "ui", "kind": "email", "payload": {"to": "needle@example.com"}}),
    )
    .await;
    let other = post(
        &http,
        &format!("{base}/v1/tasks"),
        json!({"queue": "ui", "kind": "email", "payload": {"to": "hay@example.com"}}),
    )
    .await;
    let later = post(
        &http,
        &format!("{base}/v1/tasks"),
        json!({"queue": "ui", "kind": "report", "run_in": "1h"}),
    )
    .await;
    post(
        &http,
        &format!("{base}/v1/schedules"),
        json!({"name": "nightly", "cron": "30 2 * * *", "task": {"kind": "report"}}),
    )
    .await;

    let batch = post(
        &http,
        &format!("{base}/v1/batches"),
        json!({"name": "import-42", "tasks": [{"queue": "ui-batch", "kind": "row"}, {"queue": "ui-batch", "kind": "row"}],
               "callbacks": {"completed": {"kind": "report"}}}),
    )
    .await;
    let batch_id = batch["batch"]["id"].as_i64().unwrap();
    let wf = post(
        &http,
        &format!("{base}/v1/workflows"),
        json!({"name": "etl", "tasks": [{"ref": "extract", "kind": "x", "queue": "ui-wf"},
               {"ref": "load", "kind": "y", "queue": "ui-wf", "depends_on": ["extract"]},
               {"ref": "report", "kind": "z", "queue": "ui-wf", "depends_on": [{"ref": "load", "ignore_failure": true}]}]}),
    )
    .await;
    let wf_id = wf["workflow"]["batch"]["id"].as_i64().unwrap();
    // A rate limit that one claim fills: its page shows it blocked.
    let r = http
        .put(format!("{base}/v1/rate-limits/stripe"))
        .json(&json!({"kind": "window", "limit": 1, "period": "1h"}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let mut held = Value::Null;
    for _ in 0..2 {
        held = post(
            &http,
            &format!("{base}/v1/tasks"),
            json!({"queue": "ui-rl", "kind": "charge", "rate_limit": "stripe:acme"}),
        )
        .await;
    }
    post(
        &http,
        &format!("{base}/v1/queues/ui-rl/claim"),
        json!({"worker": "w", "limit": 5}),
    )
    .await;

    let c = chromium(driver_port).await;

    // Every page loads and shows what it is about.
    for (path, marker) in [
        ("/", "queues"),
        ("/ui/tasks", "tasks"),
        ("/ui/processes", "processes"),
        ("/ui/schedules", "schedules"),
        ("/ui/batches", "batches"),
        ("/ui/rate-limits", "rate-limits"),
        ("/ui/audit", "audit"),
    ] {
        c.goto(&format!("{base}{path}")).await.unwrap();
        c.wait()
            .at_most(Duration::from_secs(10))
            .for_element(Locator::Id(marker))
            .await
            .unwrap_or_else(|e| panic!("{path}: no #{marker}: {e}"));
    }
    // State tabs with the queue's counts: a tab per state, its count, and it filters.
    c.goto(&format!("{base}/ui/tasks?queue=ui-batch"))
        .await
        .unwrap();
    let tab = c.find(Locator::Id("tab-available")).await.unwrap();
    assert_eq!(tab.text().await.unwrap(), "available 2");
    assert_eq!(text_of(&c, "tab-completed").await, "completed 0");
    tab.click().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !c
        .current_url()
        .await
        .unwrap()
        .as_str()
        .contains("queue=ui-batch&state=available")
    {
        assert!(Instant::now() < deadline, "the tab did not filter");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        c.find_all(Locator::Css("#tasks tr[data-id]"))
            .await
            .unwrap()
            .len(),
        2
    );
    // The rate limit: admitted one, its key blocked now; a task of it links to the page.
    c.goto(&format!("{base}/ui/tasks/{}", held["id"]))
        .await
        .unwrap();
    c.find(Locator::LinkText("stripe:acme"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Id("rate-limits"))
        .await
        .unwrap();
    let row = text_of(&c, "rate-limit-stripe").await;
    assert!(
        row.contains("window") && row.contains("1h") && row.contains(" 1 "),
        "{row}"
    );
    save_shot(&c, &format!("dashboard-rate-limits-{shot}.png")).await;
    // The batch: its progress (a labelled progress bar) in the list, its counts on its page,
    // and a link from each of its tasks.
    c.goto(&format!("{base}/ui/batches")).await.unwrap();
    let row = text_of(&c, &format!("batch-{batch_id}")).await;
    assert!(row.contains("import-42") && row.contains("0 / 2"), "{row}");
    let bar = c
        .find(Locator::Css(&format!("#batch-{batch_id} progress")))
        .await
        .unwrap();
    let label = bar.attr("aria-label").await.unwrap().unwrap_or_default();
    assert!(label.contains("0 of 2"), "{label}");
    c.goto(&format!("{base}/ui/batches/{batch_id}"))
        .await
        .unwrap();
    let counts = text_of(&c, "batch-counts").await;
    assert!(
        counts.contains("available") && counts.contains('2'),
        "{counts}"
    );
    let member = batch["tasks"][0]["id"].as_i64().unwrap();
    c.goto(&format!("{base}/ui/tasks/{member}")).await.unwrap();
    c.find(Locator::LinkText(&format!("batch {batch_id}")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Id("batch-counts"))
        .await
        .unwrap();
    // A workflow's page draws its graph: a box per task, a line per edge, and the same in a
    // table.
    c.goto(&format!("{base}/ui/batches/{wf_id}")).await.unwrap();
    let boxes = c
        .find_all(Locator::Css("#workflow-graph rect"))
        .await
        .unwrap();
    assert_eq!(boxes.len(), 3);
    let lines = c
        .find_all(Locator::Css("#workflow-graph line"))
        .await
        .unwrap();
    assert_eq!(lines.len(), 2);
    let rows = text_of(&c, "workflow-tasks").await;
    assert!(
        rows.contains("waiting") && rows.contains("ignores failure"),
        "{rows}"
    );
    let png = c.screenshot().await.unwrap();
    std::fs::write(
        format!(
            "{}/../../target/dashboard-workflow-{shot}.png",
            env!("CARGO_MANIFEST_DIR")
        ),
        &png,
    )
    .unwrap();
    // A task's page: its place in the workflow, its timeline, a curl that enqueues it again.
    let load = wf["tasks"][1]["id"].as_i64().unwrap();
    c.goto(&format!("{base}/ui/tasks/{load}")).await.unwrap();
    let needs = text_of(&c, "depends-on").await;
    let needed = text_of(&c, "needed-by").await;
    assert!(
        needs.contains("extract") && needed.contains("report"),
        "{needs} / {needed}"
    );
    c.find(Locator::Id("timeline")).await.unwrap();
    let curl = text_of(&c, "curl").await;
    assert!(
        curl.contains(&format!("{base}/v1/tasks")) && curl.contains(r#""kind":"y""#),
        "{curl}"
    );
    // A task that ran: a bar per attempt on its timeline.
    let ran = post(
        &http,
        &format!("{base}/v1/tasks"),
        json!({"queue": "ui-run", "kind": "once"}),
    )
    .await;
    let got = post(
        &http,
        &format!("{base}/v1/queues/ui-run/claim"),
        json!({"worker": "w", "limit": 1}),
    )
    .await;
    post(
        &http,
        &format!("{base}/v1/tasks/{}/complete", ran["id"]),
        json!({"lease": got["tasks"][0]["lease"]["token"], "result": 1}),
    )
    .await;
    c.goto(&format!("{base}/ui/tasks/{}", ran["id"]))
        .await
        .unwrap();
    let bars = c
        .find_all(Locator::Css("#timeline rect.run"))
        .await
        .unwrap();
    assert_eq!(bars.len(), 1);
    save_shot(&c, &format!("dashboard-task-{shot}.png")).await;
    c.goto(&format!("{base}/ui/batches/{wf_id}")).await.unwrap();
    // Cancel, then retry, the whole workflow from its page, each through its confirmation.
    assert!(
        c.find(Locator::Id("action-retry")).await.is_err(),
        "nothing failed yet: no retry"
    );
    for (action, want) in [("cancel", "cancelled"), ("retry", "available")] {
        c.goto(&format!("{base}/ui/batches/{wf_id}")).await.unwrap();
        c.find(Locator::Id(&format!("action-{action}")))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        c.wait()
            .at_most(Duration::from_secs(10))
            .for_element(Locator::Id("confirm"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let w = http
                .get(format!("{base}/v1/workflows/{wf_id}"))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap();
            let states: Vec<&str> = w["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["state"].as_str().unwrap())
                .collect();
            // A cancel reaches what waited on the cancelled tasks a moment later (the release
            // rule runs after the cancel commits): wait for all of them.
            let done = match action {
                "cancel" => states.iter().all(|s| *s == "cancelled"),
                _ => states[0] == want,
            };
            if done {
                if action != "cancel" {
                    assert!(w["tasks"][1]["waiting"].as_bool().unwrap(), "{w}");
                }
                break;
            }
            assert!(Instant::now() < deadline, "{action}: {states:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    c.goto(&format!("{base}/")).await.unwrap();
    let overview = c
        .find(Locator::Id("queues"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(overview.contains("ui"), "{overview}");
    let png = c.screenshot().await.unwrap();
    let artifact = format!(
        "{}/../../target/dashboard-{shot}.png",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::write(&artifact, &png).unwrap();
    assert!(png.len() > 10_000, "a real screenshot");
    // A filter narrows the list to the task whose payload has the text.
    c.goto(&format!("{base}/ui/tasks")).await.unwrap();
    let input = c
        .find(Locator::Css("#filter input[name=text]"))
        .await
        .unwrap();
    input.send_keys("needle").await.unwrap();
    c.find(Locator::Css("#filter button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !c
        .current_url()
        .await
        .unwrap()
        .as_str()
        .contains("text=needle")
    {
        assert!(
            Instant::now() < deadline,
            "the filter form was not submitted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let rows = c
        .find_all(Locator::Css("#tasks tr[data-id]"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0].attr("data-id").await.unwrap(),
        Some(needle["id"].to_string())
    );
    // Search by trace id: the one task that carries it.
    c.goto(&format!("{base}/ui/tasks")).await.unwrap();
    let trace = needle["trace_id"].as_str().unwrap().to_string();
    c.find(Locator::Css("#filter input[name=trace_id]"))
        .await
        .unwrap()
        .send_keys(&trace)
        .await
        .unwrap();
    c.find(Locator::Css("#filter button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !c
        .current_url()
        .await
        .unwrap()
        .as_str()
        .contains("trace_id=")
    {
        assert!(Instant::now() < deadline, "the search was not submitted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let rows = c
        .find_all(Locator::Css("#tasks tr[data-id]"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0].attr("data-id").await.unwrap(),
        Some(needle["id"].to_string())
    );
    // A task id in the search box opens that task.
    c.goto(&format!("{base}/ui/tasks?text={}", needle["id"]))
        .await
        .unwrap();
    assert_eq!(
        c.current_url().await.unwrap().path(),
        format!("/ui/tasks/{}", needle["id"])
    );
    // Cancel from the dashboard: the action, its confirmation, the task cancelled.
    let id = needle["id"].as_i64().unwrap();
    c.goto(&format!("{base}/ui/tasks/{id}")).await.unwrap();
    c.find(Locator::Id("action-cancel"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Id("confirm"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_text(&c, "state", "cancelled").await;
    // Live: a page left open changes when the task is cancelled elsewhere (the CLI here).
    let other_id = other["id"].as_i64().unwrap();
    c.goto(&format!("{base}/ui/tasks/{other_id}"))
        .await
        .unwrap();
    assert_eq!(text_of(&c, "state").await, "available");
    // The page's event stream must be open before the change happens.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let out = Command::new(BIN)
        .args(["task", "cancel", &other_id.to_string()])
        .env("DOCKET_SERVER", &base)
        .output()
        .unwrap();
    assert!(out.status.success());
    wait_text(&c, "state", "cancelled").await;
    assert_eq!(
        c.current_url().await.unwrap().as_str(),
        format!("{base}/ui/tasks/{other_id}"),
        "no navigation: the page updated in place"
    );
    // Run now moves a scheduled task to available.
    let later_id = later["id"].as_i64().unwrap();
    c.goto(&format!("{base}/ui/tasks/{later_id}/run-now"))
        .await
        .unwrap();
    c.find(Locator::Id("confirm"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_text(&c, "state", "available").await;
    // Bulk retry over a filter of 2,000 tasks: the list's form, a confirmation naming the
    // count, the bulk action's page following its progress, the result.
    let many: Vec<Value> = (0..2000)
        .map(|i| json!({"queue": "bulk", "kind": "sync", "payload": {"i": i}}))
        .collect();
    post(&http, &format!("{base}/v1/tasks"), json!({"tasks": many})).await;
    let job = post(
        &http,
        &format!("{base}/v1/tasks/bulk"),
        json!({"action": "cancel", "filter": {"queue": "bulk"}}),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while http
        .get(format!("{base}/v1/tasks/bulk/{}", job["id"]))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap()["state"]
        != "completed"
    {
        assert!(Instant::now() < deadline, "the bulk cancel did not finish");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    c.goto(&format!("{base}/ui/tasks?queue=bulk&state=cancelled"))
        .await
        .unwrap();
    c.find(Locator::Css("#bulk-action option[value=retry]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.find(Locator::Id("bulk-go"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let count = c
        .wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Id("bulk-count"))
        .await
        .unwrap();
    assert_eq!(count.attr("data-n").await.unwrap().as_deref(), Some("2000"));
    let question = count.text().await.unwrap();
    assert!(question.contains("Retry all 2,000 matching"), "{question}");
    save_shot(&c, &format!("dashboard-bulk-confirm-{shot}.png")).await;
    c.find(Locator::Id("confirm"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Id("bulk-progress"))
        .await
        .unwrap();
    // The page follows the action live; a reload now and then only guards a lost event.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut polls = 0;
    // The live region is swapped as it goes: an element read mid-swap is read again.
    while !matches!(
        try_text(&c, "bulk-state").await.as_deref(),
        Some("completed")
    ) {
        assert!(Instant::now() < deadline, "the bulk retry did not finish");
        polls += 1;
        if polls % 20 == 0 {
            c.refresh().await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let mut done = None;
    for _ in 0..50 {
        if let Ok(e) = c.find(Locator::Id("bulk-done")).await {
            if let Ok(n) = e.attr("data-n").await {
                done = n;
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(done.as_deref(), Some("2000"));
    save_shot(&c, &format!("dashboard-bulk-{shot}.png")).await;
    let q = http
        .get(format!("{base}/v1/queues/bulk"))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(
        (
            q["counts"]["available"].as_i64(),
            q["counts"]["cancelled"].as_i64()
        ),
        (Some(2000), Some(0)),
        "{q}"
    );
    // Charts: all queues on the overview; a queue's own on its page, once the kept counts'
    // step (every second, a few seconds behind) has taken its finished task in.
    c.goto(&format!("{base}/")).await.unwrap();
    for id in ["chart-throughput", "chart-depth", "chart-latency"] {
        c.find(Locator::Id(id)).await.unwrap();
    }
    c.goto(&format!("{base}/ui/queues/ui-run?range=day"))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while c
        .find(Locator::Css("#chart-latency circle.p50"))
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "no latency drawn for ui-run");
        tokio::time::sleep(Duration::from_millis(1000)).await;
        c.refresh().await.unwrap();
    }
    let label = c
        .find(Locator::Id("chart-throughput"))
        .await
        .unwrap()
        .attr("aria-label")
        .await
        .unwrap()
        .unwrap_or_default();
    assert!(label.starts_with("1 completed"), "{label}");
    let latency = c
        .find(Locator::Id("chart-latency"))
        .await
        .unwrap()
        .attr("aria-label")
        .await
        .unwrap()
        .unwrap_or_default();
    assert!(
        latency.contains("p50") && latency.contains("p99"),
        "{latency}"
    );
    save_shot(&c, &format!("dashboard-queue-{shot}.png")).await;
    // Durable functions (issue 41): a run with a recorded step, waiting for an event; its page
    // shows the journal; cancel, then retry, through their confirmations.
    post(
        &http,
        &format!("{base}/v1/workflow-runs"),
        json!({"workflow": "checkout", "id": "ui-run-1", "input": {"order": 1}}),
    )
    .await;
    let got = post(
        &http,
        &format!("{base}/v1/queues/workflows/claim"),
        json!({"worker": "w", "limit": 1}),
    )
    .await;
    let lease = got["tasks"][0]["lease"]["token"].clone();
    post(
        &http,
        &format!("{base}/v1/workflow-runs/ui-run-1/steps"),
        json!({"lease": lease, "steps": [{"seq": 0, "kind": "step", "name": "reserve", "output": {"ok": true}}]}),
    )
    .await;
    post(
        &http,
        &format!("{base}/v1/workflow-runs/ui-run-1/suspend"),
        json!({"lease": lease, "wait": {"seq": 1, "kind": "event", "name": "paid"}}),
    )
    .await;
    c.goto(&format!("{base}/ui/runs")).await.unwrap();
    let runs = text_of(&c, "runs").await;
    assert!(
        runs.contains("ui-run-1") && runs.contains("waiting"),
        "{runs}"
    );
    c.goto(&format!("{base}/ui/runs/ui-run-1")).await.unwrap();
    let journal = text_of(&c, "journal").await;
    assert!(journal.contains("reserve"), "{journal}");
    assert!(text_of(&c, "entry-1").await.contains("paid"));
    save_shot(&c, &format!("dashboard-run-{shot}.png")).await;
    for (action, want) in [("cancel", "cancelled"), ("retry", "running")] {
        c.goto(&format!("{base}/ui/runs/ui-run-1")).await.unwrap();
        c.find(Locator::Id(&format!("action-{action}")))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        c.wait()
            .at_most(Duration::from_secs(10))
            .for_element(Locator::Id("confirm"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        // The confirmation's form posts as a navigation: the click returns before the server
        // has answered, so read the run until it shows the change (generous bound: busy box).
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let run = http
                .get(format!("{base}/v1/workflow-runs/ui-run-1"))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap();
            if run["state"] == want {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "after {action}: {} not {want}",
                run["state"]
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    // Every page at a desktop's 1280×800 and a phone's 390×844: no control without a label a
    // screen reader reads, no chart without its words, no link or button without a name,
    // nothing out of the keyboard's reach, and no page wider than the screen (a wide table
    // scrolls in its own box).
    let pages = [
        ("/".to_string(), "overview"),
        ("/ui/tasks".into(), "tasks"),
        (format!("/ui/tasks/{load}"), "task-in-workflow"),
        (format!("/ui/tasks/{}", ran["id"]), "task"),
        ("/ui/queues/ui-run".into(), "queue"),
        (format!("/ui/bulk/{}", job["id"]), "bulk"),
        ("/ui/batches".into(), "batches"),
        (format!("/ui/batches/{wf_id}"), "workflow"),
        ("/ui/runs".into(), "runs"),
        ("/ui/runs/ui-run-1".into(), "run"),
        ("/ui/processes".into(), "processes"),
        ("/ui/schedules".into(), "schedules"),
        ("/ui/rate-limits".into(), "rate-limits"),
        ("/ui/workers".into(), "workers"),
        ("/ui/sinks".into(), "sinks"),
        ("/ui/audit".into(), "audit"),
    ];
    const CHECK: &str = r#"
        const named = e => (e.getAttribute('aria-label') || e.textContent || '').trim() || e.getAttribute('title');
        const bad = [];
        for (const e of document.querySelectorAll('input:not([type=hidden]),select,textarea'))
            if (!(e.labels && e.labels.length) && !e.getAttribute('aria-label')) bad.push('unlabelled ' + e.name);
        for (const e of document.querySelectorAll('svg'))
            if (!e.getAttribute('aria-label') && !e.getAttribute('aria-labelledby')) bad.push('svg ' + e.id);
        for (const e of document.querySelectorAll('a[href],button'))
            if (!named(e)) bad.push('nameless ' + e.outerHTML.slice(0, 60));
        for (const e of document.querySelectorAll('a[href],button,input,select'))
            if (e.tabIndex < 0) bad.push('unreachable ' + e.outerHTML.slice(0, 60));
        if (document.documentElement.scrollWidth > window.innerWidth + 1)
            bad.push('page ' + document.documentElement.scrollWidth + ' wide on ' + window.innerWidth);
        return bad;"#;
    std::fs::create_dir_all(format!(
        "{}/../../target/screens-{shot}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    for (w, h) in [(1280u32, 800u32), (390, 844)] {
        c.set_window_size(w, h).await.unwrap();
        for (path, name) in &pages {
            c.goto(&format!("{base}{path}")).await.unwrap();
            let bad = c.execute(CHECK, vec![]).await.unwrap();
            assert_eq!(bad, json!([]), "{path} at {w}×{h}");
            if w == 1280 {
                // Each page's picture, for the docs (docs/src/screens/).
                save_shot(&c, &format!("screens-{shot}/{name}.png")).await;
            }
        }
    }
    c.set_window_size(390, 844).await.unwrap();
    c.goto(&format!("{base}/ui/tasks/{load}")).await.unwrap();
    save_shot(&c, &format!("dashboard-phone-{shot}.png")).await;
    c.set_window_size(1280, 900).await.unwrap();
    // Every action is in the audit log, with who did it.
    c.goto(&format!("{base}/ui/audit")).await.unwrap();
    let audit = c
        .find(Locator::Id("audit"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        audit.contains(&format!("task:{id}")) && audit.contains("dashboard"),
        "{audit}"
    );
    assert!(
        audit.contains(&format!("task:{other_id}")) && audit.contains("cli:"),
        "{audit}"
    );
    assert!(audit.contains("task.run-now"), "{audit}");
    assert!(audit.contains("tasks.bulk"), "{audit}");
    c.close().await.unwrap();
    drop(driver);
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_and_read_only_session_in_chromium_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("ui.db").display());
    login_scenario(&["--database", &db]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_and_read_only_session_in_chromium_on_postgres() {
    let url = std::env::var("DOCKET_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let schema = format!("cli_{}", uuid::Uuid::new_v4().simple());
    login_scenario(&["--database", &url, "--schema", &schema]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_and_read_only_session_in_chromium_on_mysql() {
    let url = mysql_database().await;
    login_scenario(&["--database", &url]).await;
}

/// `docket serve` on `db` with `args` and `env`, and a chromedriver, both up: (server, driver,
/// server port, driver port).
async fn start(db: &[&str], args: &[&str], env: &[(&str, &str)]) -> (Killed, Killed, u16, u16) {
    // fantoccini's TLS stack and docket's both compile rustls providers (aws-lc-rs, ring), so
    // rustls cannot pick a process default by itself.
    let _ = rustls::crypto::ring::default_provider().install_default();
    for bin in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
        assert!(
            std::path::Path::new(bin).exists(),
            "{bin} is missing: scripts/test.sh installs Debian's chromium and chromium-driver"
        );
    }
    // Both ports reserved at once: two reservations made one after the other can return the same port (the
    // first reservation is released before the second is made), and chromedriver then took the
    // server's port (seen once in CI: "cannot listen on 127.0.0.1:43877: Address already in use").
    let (port, driver_port) = {
        let a = TcpListener::bind("127.0.0.1:0").unwrap();
        let b = TcpListener::bind("127.0.0.1:0").unwrap();
        (
            a.local_addr().unwrap().port(),
            b.local_addr().unwrap().port(),
        )
    };
    let server = Killed(
        Command::new(BIN)
            .arg("serve")
            .args(db)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(args)
            .envs(env.iter().copied())
            .env("DOCKET_LOG", "warn")
            .spawn()
            .unwrap(),
    );
    let driver = Killed(
        Command::new("/usr/bin/chromedriver")
            .arg(format!("--port={driver_port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_port(port, "docket serve").await;
    wait_port(driver_port, "chromedriver").await;
    (server, driver, port, driver_port)
}

async fn chromium(driver_port: u16) -> fantoccini::Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": "/usr/bin/chromium",
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"]
        }),
    );
    ClientBuilder::rustls()
        .unwrap()
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{driver_port}"))
        .await
        .expect("chromedriver session")
}

/// With auth required the dashboard asks for a token; a `read` token's session sees no action
/// buttons and its confirmed action is refused (the task stays as it was); logging out ends the
/// session; an `admin` session has the actions.
async fn login_scenario(db: &[&str]) {
    let admin = format!("dkt_{}", "a1".repeat(32));
    let (_server, _driver, port, driver_port) = start(
        db,
        &["--auth", "required"],
        &[("DOCKET_ADMIN_TOKEN", admin.as_str())],
    )
    .await;
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let as_admin = |m: reqwest::Method, path: &str| {
        http.request(m, format!("{base}{path}")).bearer_auth(&admin)
    };
    let task: Value = as_admin(reqwest::Method::POST, "/v1/tasks")
        .json(&json!({"queue": "ui", "kind": "email"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = task["id"].as_i64().unwrap();
    let wf: Value = as_admin(reqwest::Method::POST, "/v1/workflows")
        .json(&json!({"tasks": [{"ref": "a", "kind": "x", "queue": "ui-wf"}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let wf_id = wf["workflow"]["batch"]["id"].as_i64().unwrap();
    let viewer: Value = as_admin(reqwest::Method::POST, "/v1/tokens")
        .json(&json!({"name": "viewer", "scopes": ["read"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let viewer = viewer["token"].as_str().unwrap().to_string();

    let c = chromium(driver_port).await;
    let login = |token: String| {
        let c = c.clone();
        let base = base.clone();
        async move {
            c.goto(&format!("{base}/ui/login")).await.unwrap();
            c.find(Locator::Id("token"))
                .await
                .unwrap()
                .send_keys(&token)
                .await
                .unwrap();
            c.find(Locator::Id("login"))
                .await
                .unwrap()
                .click()
                .await
                .unwrap();
        }
    };
    // No session: every page sends the browser to the login page.
    c.goto(&format!("{base}/ui/tasks/{id}")).await.unwrap();
    assert!(c.current_url().await.unwrap().path() == "/ui/login");
    login("dkt_wrong".into()).await;
    c.wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Id("login-error"))
        .await
        .expect("a wrong token is refused on the login page");
    // A read-only session: the pages, no action buttons, and an action refused.
    login(viewer.clone()).await;
    c.wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Id("queues"))
        .await
        .expect("logged in: the overview");
    c.goto(&format!("{base}/ui/tasks/{id}")).await.unwrap();
    assert_eq!(text_of(&c, "state").await, "available");
    assert!(
        c.find(Locator::Id("action-cancel")).await.is_err(),
        "a read-only session sees no action buttons"
    );
    c.goto(&format!("{base}/ui/batches/{wf_id}")).await.unwrap();
    assert!(
        c.find(Locator::Id("workflow-graph")).await.is_ok()
            && c.find(Locator::Id("action-cancel")).await.is_err(),
        "a read-only session sees a workflow without its action buttons"
    );
    c.goto(&format!("{base}/ui/tasks/{id}/cancel"))
        .await
        .unwrap();
    // The confirmation page is a read; its post is the action, refused.
    c.find(Locator::Id("confirm"))
        .await
        .expect("the confirmation page")
        .click()
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !c.source().await.unwrap().contains("forbidden") {
        assert!(
            Instant::now() < deadline,
            "the read-only post was not refused"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let now: Value = as_admin(reqwest::Method::GET, &format!("/v1/tasks/{id}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        now["state"], "available",
        "the read-only session changed nothing"
    );
    // Logging out ends the session.
    c.goto(&format!("{base}/ui/logout")).await.unwrap();
    c.goto(&format!("{base}/")).await.unwrap();
    assert_eq!(c.current_url().await.unwrap().path(), "/ui/login");
    // An admin session can act.
    login(admin.clone()).await;
    c.wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Id("queues"))
        .await
        .unwrap();
    c.goto(&format!("{base}/ui/tasks/{id}")).await.unwrap();
    c.find(Locator::Id("action-cancel"))
        .await
        .expect("an admin session has the actions")
        .click()
        .await
        .unwrap();
    c.wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Id("confirm"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_text(&c, "state", "cancelled").await;
    c.close().await.unwrap();
}

/// Saves the page's screenshot as `target/<name>` (test artifacts; docs/src copies some).
async fn save_shot(c: &fantoccini::Client, name: &str) {
    let png = c.screenshot().await.unwrap();
    std::fs::write(
        format!("{}/../../target/{name}", env!("CARGO_MANIFEST_DIR")),
        png,
    )
    .unwrap();
}

/// Element `id`'s text; `None` when it is not there or was replaced while read.
async fn try_text(c: &fantoccini::Client, id: &str) -> Option<String> {
    c.find(Locator::Id(id)).await.ok()?.text().await.ok()
}

async fn text_of(c: &fantoccini::Client, id: &str) -> String {
    c.find(Locator::Id(id)).await.unwrap().text().await.unwrap()
}

async fn wait_text(c: &fantoccini::Client, id: &str, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(e) = c.find(Locator::Id(id)).await {
            if let Ok(t) = e.text().await {
                if t == want {
                    return;
                }
            }
        }
        assert!(Instant::now() < deadline, "#{id} never became {want:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
