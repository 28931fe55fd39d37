//! asyncflow's routes (`docket serve --compat asyncflow`), driven by a small client written the
//! way the seed's worker (002) calls them: read t_schedule_cfg, hold tasks of its type every
//! schedule_interval, run each task's stage, report with setTask. Real PostgreSQL, MariaDB and
//! SQLite, a database per test.

use docket_core::auth::Scope;
use docket_core::SystemClock;
use docket_engine::auth::NewToken;
use docket_engine::{Engine, EngineConfig};
use docket_server::AppState;
use docket_store::testing::TestStore;
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

struct Server {
    base: String,
    http: reqwest::Client,
    engine: Engine,
    stop: CancellationToken,
    _db: TestStore,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn start(db: TestStore, compat: bool) -> Server {
    start_with(db, |s| s.with_compat_asyncflow(compat)).await
}

/// A kind whose hook asks for the `sql` scope (as docket-sql's `sql` kind does), so the kind
/// scope check is exercised without docket-sql.
struct NeedsSqlScope;

impl docket_engine::kinds::KindHook for NeedsSqlScope {
    fn kind(&self) -> &str {
        "sql"
    }
    fn scope(&self) -> Option<Scope> {
        Some(Scope::Sql)
    }
    fn check(&self, _: &mut docket_core::NewTask) -> Result<(), docket_engine::kinds::KindRefusal> {
        Ok(())
    }
}

/// A server whose state `f` configures.
async fn start_with(db: TestStore, f: impl FnOnce(AppState) -> AppState) -> Server {
    let store = db.store.clone();
    let mut cfg = EngineConfig::new("n1", store.backend());
    cfg.poll_interval = Duration::from_millis(200);
    let engine =
        Engine::new(store, Arc::new(SystemClock), cfg).with_kind_hook(Arc::new(NeedsSqlScope));
    let stop = CancellationToken::new();
    engine.start(stop.clone()).await.unwrap();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/api", l.local_addr().unwrap());
    let state = f(AppState::new(engine.clone(), stop.clone()));
    tokio::spawn(docket_server::serve(l, state));
    Server {
        base,
        http: reqwest::Client::new(),
        engine,
        stop,
        _db: db,
    }
}

impl Server {
    /// A call as asyncflow's clients make it: the envelope's `result` on code 0, else the
    /// HTTP status and the whole envelope.
    async fn call(
        &self,
        method: &str,
        path: &str,
        query: &[(&str, &str)],
        body: Option<Value>,
    ) -> Result<Value, (StatusCode, Value)> {
        let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut r = self
            .http
            .request(m, format!("{}{path}", self.base))
            .query(query);
        if let Some(b) = body {
            r = r.json(&b);
        }
        let resp = r.send().await.unwrap();
        let st = resp.status();
        let v: Value = resp.json().await.unwrap_or(Value::Null);
        if st == StatusCode::OK && v["code"] == 0 && v["msg"] == "ok" {
            Ok(v["result"].clone())
        } else {
            Err((st, v))
        }
    }

    async fn get_task(&self, id: &str) -> Value {
        self.call("GET", "/task/getTask", &[("taskId", id)], None)
            .await
            .unwrap()["taskData"]
            .clone()
    }
}

/// The seed's Lark worker: stage `sendmsg` hands on to `notify`; `notify` fails once (the
/// worker puts its error in scheduleLog and sets the task back to waiting), then succeeds.
async fn run_worker(s: &Server, task_type: &str) -> usize {
    let cfg = s
        .call("POST", "/task_schedule_cfg/list", &[], None)
        .await
        .unwrap();
    let row = cfg["scheduleCfgList"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["task_type"] == task_type)
        .cloned()
        .expect("the task type is configured");
    let cap = row["schedule_limit"].as_i64().unwrap();
    // The worker asks for more than the cap, so the cap is what limits a hold.
    let limit = (cap * 5).to_string();
    let mut done = 0;
    for round in 0..50 {
        let held = s
            .call(
                "POST",
                "/task/hold_task",
                &[("taskType", task_type), ("status", "1"), ("limit", &limit)],
                None,
            )
            .await
            .unwrap();
        let list = held["taskList"].as_array().unwrap().clone();
        assert!(
            list.len() as i64 <= cap,
            "schedule_limit caps a hold: {held}"
        );
        if round == 0 {
            // Three tasks wait: the first hold takes exactly the cap.
            assert_eq!(list.len() as i64, cap, "schedule_limit caps a hold: {held}");
        }
        for t in &list {
            assert_eq!(t["status"], 2, "held tasks are running: {t}");
            let id = t["taskId"].as_str().unwrap();
            let ctx: Value = serde_json::from_str(t["taskContext"].as_str().unwrap()).unwrap();
            let body = match t["taskStage"].as_str().unwrap() {
                "sendmsg" => json!({
                    "taskId": id, "taskStage": "notify", "status": 1, "priority": 3,
                    "taskContext": json!({"ReqBody": ctx["ReqBody"], "Sent": true}).to_string(),
                }),
                "notify" if t["crtRetryNum"] == 0 => json!({
                    "taskId": id, "taskStage": "notify", "status": 1,
                    "scheduleLog": json!({"LastData": {"ErrMsg": "smtp down"}}).to_string(),
                }),
                "notify" => {
                    done += 1;
                    json!({"taskId": id, "status": 3, "taskContext": t["taskContext"]})
                }
                other => panic!("unknown stage {other}"),
            };
            s.call("POST", "/task/setTask", &[], Some(body))
                .await
                .unwrap();
        }
        if done == 3 {
            break;
        }
        // The retry waits for its backoff (1 s first): poll as the seed's worker does.
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    done
}

async fn lark_worker_end_to_end(db: TestStore) {
    let s = start(db, true).await;
    // t_schedule_cfg for Lark, as the seed's insert does (limits scaled down for the test),
    // under the type's lower-case name: the queue of tasks created as `Lark`.
    {
        let put = reqwest::Client::new()
            .put(format!("{}/v1/queues/lark", s.base.trim_end_matches("/api")))
            .json(&json!({"schedule_limit": 2, "schedule_interval": "1s", "timeout": "30s",
                          "max_attempts": 3, "backoff": {"initial": "1s", "max": "10s", "jitter": 0.0}}))
            .send()
            .await
            .unwrap();
        assert_eq!(put.status(), StatusCode::OK);
    }
    let cfg = s
        .call("POST", "/task_schedule_cfg/list", &[], None)
        .await
        .unwrap();
    let row = &cfg["scheduleCfgList"][0];
    assert_eq!(
        (
            row["task_type"].as_str(),
            row["schedule_limit"].as_i64(),
            row["schedule_interval"].as_i64(),
            row["max_processing_time"].as_i64(),
            row["max_retry_num"].as_i64(),
            row["retry_interval"].as_i64(),
            row["max_retry_interval"].as_i64()
        ),
        (
            Some("lark"),
            Some(2),
            Some(1),
            Some(30),
            Some(3),
            Some(1),
            Some(10)
        ),
        "{cfg}"
    );
    assert!(row["create_time"].as_i64().unwrap() > 1_700_000_000_000);
    let mut ids = vec![];
    for i in 0..3 {
        let r = s
            .call(
                "POST",
                "/task/createTask",
                &[],
                Some(json!({"taskData": {
                    "userId": "noob", "taskType": "Lark", "taskStage": "sendmsg", "scheduleLog": "{}",
                    "taskContext": json!({"ReqBody": {"Msg": format!("hi {i}"), "FromAddr": "fish", "ToAddr": "cat"}, "UserId": ""}).to_string(),
                }})),
            )
            .await
            .unwrap();
        ids.push(r["taskId"].as_str().unwrap().to_string());
    }
    let t = s.get_task(&ids[0]).await;
    assert_eq!(
        (
            t["status"].as_i64(),
            t["taskStage"].as_str(),
            t["userId"].as_str(),
            t["taskType"].as_str()
        ),
        (Some(1), Some("sendmsg"), Some("noob"), Some("lark"))
    );
    let ctx: Value = serde_json::from_str(t["taskContext"].as_str().unwrap()).unwrap();
    assert_eq!(ctx["ReqBody"]["Msg"], "hi 0", "taskContext round-trips");
    let waiting = s
        .call(
            "GET",
            "/task/getTaskList",
            &[("taskType", "Lark"), ("status", "1"), ("limit", "10")],
            None,
        )
        .await
        .unwrap();
    assert_eq!(waiting["taskList"].as_array().unwrap().len(), 3);
    assert_eq!(
        run_worker(&s, "lark").await,
        3,
        "every task finished both stages"
    );
    for id in &ids {
        let t = s.get_task(id).await;
        assert_eq!(t["status"], 3, "{t}");
        assert_eq!(t["taskStage"], "notify");
        assert_eq!(t["priority"], 3, "setTask's priority at the hand-off");
        let log: Value = serde_json::from_str(t["scheduleLog"].as_str().unwrap()).unwrap();
        assert_eq!(
            log["LastData"]["ErrMsg"], "",
            "the last attempt succeeded: {log}"
        );
        assert_eq!(log["HistoryDatas"][0]["ErrMsg"], "smtp down", "{log}");
        assert_eq!(log["LastData"]["TraceId"].as_str().unwrap().len(), 32);
        let ctx: Value = serde_json::from_str(t["taskContext"].as_str().unwrap()).unwrap();
        assert_eq!(ctx["Sent"], true, "the context the first stage handed on");
    }
    let mine = s
        .call(
            "GET",
            "/task/getUserTaskList",
            &[("userId", "noob"), ("statusList", "3")],
            None,
        )
        .await
        .unwrap();
    assert_eq!(mine["taskList"].as_array().unwrap().len(), 3);
    let none = s
        .call(
            "GET",
            "/task/getUserTaskList",
            &[("userId", "noob"), ("statusList", "1,2")],
            None,
        )
        .await
        .unwrap();
    assert!(none["taskList"].as_array().unwrap().is_empty());

    // A waiting task changes by setTask (asyncflow's admin use); status 4 cancels it.
    let r = s
        .call(
            "POST",
            "/task/createTask",
            &[],
            Some(json!({"taskData": {"taskType": "Lark", "taskContext": "plain text"}})),
        )
        .await
        .unwrap();
    let id = r["taskId"].as_str().unwrap().to_string();
    s.call(
        "POST",
        "/task/setTask",
        &[],
        Some(json!({"taskId": id, "priority": 9, "taskStage": "b", "maxRetryNum": 5})),
    )
    .await
    .unwrap();
    let t = s.get_task(&id).await;
    assert_eq!(
        (
            t["priority"].as_i64(),
            t["taskStage"].as_str(),
            t["maxRetryNum"].as_i64(),
            t["taskContext"].as_str()
        ),
        (Some(9), Some("b"), Some(5), Some("plain text"))
    );
    s.call(
        "POST",
        "/task/setTask",
        &[],
        Some(json!({"taskId": id, "status": 4})),
    )
    .await
    .unwrap();
    assert_eq!(s.get_task(&id).await["status"], 4);

    // Errors come in asyncflow's envelope, with docket's status; nothing is written.
    for (method, path, query, body, want) in [
        ("GET", "/task/getTask", vec![("taskId", "abc")], None, 400),
        (
            "GET",
            "/task/getTask",
            vec![("taskId", "999999999")],
            None,
            404,
        ),
        ("GET", "/task/getTask", vec![], None, 400),
        (
            "POST",
            "/task/createTask",
            vec![],
            Some(json!({"taskData": {"userId": "x"}})),
            400,
        ),
        (
            "POST",
            "/task/createTask",
            vec![],
            Some(json!({"taskData": {"taskType": "Lark", "orderTime": i64::MAX}})),
            400,
        ),
        (
            "POST",
            "/task/createTask",
            vec![],
            Some(json!({"nothing": 1})),
            400,
        ),
        (
            "POST",
            "/task/hold_task",
            vec![("taskType", "Lark"), ("limit", "0")],
            None,
            400,
        ),
        ("POST", "/task/hold_task", vec![], None, 400),
        ("GET", "/task/getTaskList", vec![("status", "7")], None, 400),
        (
            "GET",
            "/task/getUserTaskList",
            vec![("userId", "noob"), ("statusList", "x")],
            None,
            400,
        ),
        (
            "POST",
            "/task/setTask",
            vec![],
            Some(json!({"taskId": ids[0], "status": 3})),
            409,
        ),
        (
            "POST",
            "/task/setTask",
            vec![],
            Some(json!({"status": 3})),
            400,
        ),
        (
            "POST",
            "/task/setTask",
            vec![],
            Some(json!({"taskId": "999999999", "status": 1})),
            404,
        ),
    ] {
        let q: Vec<(&str, &str)> = query;
        let (st, v) = s.call(method, path, &q, body.clone()).await.unwrap_err();
        assert_eq!(st.as_u16(), want, "{path} {q:?} {body:?}: {v}");
        assert_eq!(v["code"], want, "{v}");
        assert!(v["msg"].as_str().unwrap().len() > 3, "{v}");
        assert_eq!(v["result"], Value::Null);
    }
    let all = s
        .call("GET", "/task/getTaskList", &[("taskType", "Lark")], None)
        .await
        .unwrap();
    assert_eq!(
        all["taskList"].as_array().unwrap().len(),
        4,
        "no failed call wrote a task"
    );
}

/// docket's number of an asyncflow task id (`<number>_<type>_task_<table>`).
fn number(id: &str) -> &str {
    id.split('_').next().unwrap()
}

/// The task as docket's own API shows it (times and the retry policy to check against).
async fn v1_task(s: &Server, id: &str) -> Value {
    s.http
        .get(format!(
            "{}/v1/tasks/{}",
            s.base.trim_end_matches("/api"),
            number(id)
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn create(s: &Server, data: Value) -> String {
    s.call(
        "POST",
        "/task/createTask",
        &[],
        Some(json!({"taskData": data})),
    )
    .await
    .unwrap()["taskId"]
        .as_str()
        .unwrap()
        .to_string()
}

/// setTask honours the retry fields, orderTime and priority on a held task and on a waiting
/// one (issue 21 item 6: a held task kept maxRetryNum 25, maxRetryInterval 3600, crtRetryNum 0).
async fn set_task_takes_every_field(db: TestStore) {
    let s = start(db, true).await;
    let id = create(
        &s,
        json!({"taskType": "Fields", "taskStage": "one", "taskContext": "{}"}),
    )
    .await;
    let held = s
        .call(
            "POST",
            "/task/hold_task",
            &[("taskType", "Fields"), ("limit", "1")],
            None,
        )
        .await
        .unwrap();
    assert_eq!(held["taskList"][0]["taskId"], id.as_str());
    let order = 1_900_000_000_000_i64;
    s.call("POST", "/task/setTask", &[], Some(json!({
        "taskId": id, "taskStage": "one", "status": 2, "taskContext": "{\"step\":1}",
        "orderTime": order, "priority": 34, "crtRetryNum": 7, "maxRetryNum": 50, "maxRetryInterval": 88,
    })))
    .await
    .unwrap();
    let t = s.get_task(&id).await;
    assert_eq!(
        (
            &t["status"],
            &t["maxRetryNum"],
            &t["maxRetryInterval"],
            &t["crtRetryNum"],
            &t["orderTime"],
            &t["priority"],
            &t["taskContext"]
        ),
        (
            &json!(2),
            &json!(50),
            &json!(88),
            &json!(7),
            &json!(order),
            &json!(34),
            &json!("{\"step\":1}")
        ),
        "held: {t}"
    );
    // A retry counts them: the attempt in hand is the 8th of 50, so it is retried.
    s.call(
        "POST",
        "/task/setTask",
        &[],
        Some(json!({"taskId": id, "taskStage": "one", "status": 1})),
    )
    .await
    .unwrap();
    let t = s.get_task(&id).await;
    assert_eq!(
        (&t["status"], &t["crtRetryNum"]),
        (&json!(1), &json!(8)),
        "retried: {t}"
    );
    // A waiting task; an edit moves modifyTime (issue 21 item 8).
    let before = s.get_task(&id).await["modifyTime"].as_i64().unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    s.call("POST", "/task/setTask", &[], Some(json!({
        "taskId": id, "orderTime": order, "priority": 5, "crtRetryNum": 3, "maxRetryNum": 9, "maxRetryInterval": 77,
    })))
    .await
    .unwrap();
    let t = s.get_task(&id).await;
    assert_eq!(
        (
            &t["status"],
            &t["maxRetryNum"],
            &t["maxRetryInterval"],
            &t["crtRetryNum"],
            &t["orderTime"],
            &t["priority"]
        ),
        (
            &json!(1),
            &json!(9),
            &json!(77),
            &json!(3),
            &json!(order),
            &json!(5)
        ),
        "waiting: {t}"
    );
    assert!(
        t["modifyTime"].as_i64().unwrap() > before,
        "modifyTime moved: {t}"
    );
    let updated = v1_task(&s, &id).await["updated_at"].clone();
    assert_eq!(
        chrono::DateTime::parse_from_rfc3339(updated.as_str().unwrap())
            .unwrap()
            .timestamp_millis(),
        t["modifyTime"].as_i64().unwrap(),
        "modifyTime is updated_at"
    );
    // Worst values are refused with a clear error and change nothing.
    let (st, v) = s
        .call(
            "POST",
            "/task/setTask",
            &[],
            Some(json!({"taskId": id, "crtRetryNum": 9})),
        )
        .await
        .unwrap_err();
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
    assert_eq!(s.get_task(&id).await["crtRetryNum"], 3);
}

/// taskContext and scheduleLog-free contexts come back byte for byte (issue 21 item 7): other
/// spacing and key order, a JSON string literal and plain text; docket's own API sees an object
/// when the text is JSON as docket writes it.
async fn task_context_round_trips(db: TestStore) {
    let s = start(db, true).await;
    for ctx in [
        "{\"ReqBody\": {\"Msg\": \"hi\", \"FromAddr\": \"fish\"}, \"UserId\": \"\"}",
        "{\"b\":1,\"a\":2}",
        "\"just a string\"",
        "not json at all",
        "",
        "{\"a\":1,\"b\":[1,2]}",
    ] {
        let id = create(&s, json!({"taskType": "Ctx", "taskContext": ctx})).await;
        assert_eq!(s.get_task(&id).await["taskContext"], ctx, "created");
        s.call(
            "POST",
            "/task/setTask",
            &[],
            Some(json!({"taskId": id, "taskContext": ctx, "priority": 1})),
        )
        .await
        .unwrap();
        assert_eq!(s.get_task(&id).await["taskContext"], ctx, "set");
    }
    let id = create(
        &s,
        json!({"taskType": "Ctx", "taskContext": "{\"a\":1,\"b\":[1,2]}"}),
    )
    .await;
    assert_eq!(
        v1_task(&s, &id).await["payload"],
        json!({"a": 1, "b": [1, 2]})
    );
    // scheduleLog: docket's own until a worker sends one, then the worker's, byte for byte —
    // on a waiting task and on a held one, up to the end.
    assert_eq!(s.get_task(&id).await["scheduleLog"], "{}");
    let log = r#"{"LastData": {"TraceId": "t-1", "ErrMsg": "", "Cost": "3ms"}, "Mine": true}"#;
    s.call(
        "POST",
        "/task/setTask",
        &[],
        Some(json!({"taskId": id, "scheduleLog": log})),
    )
    .await
    .unwrap();
    assert_eq!(s.get_task(&id).await["scheduleLog"], log);
    let held = s
        .call(
            "POST",
            "/task/hold_task",
            &[("taskType", "Ctx"), ("limit", "100")],
            None,
        )
        .await
        .unwrap();
    let mine = held["taskList"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["taskId"] == id.as_str())
        .cloned()
        .unwrap();
    assert_eq!(mine["scheduleLog"], log, "a held task shows it too");
    let log2 = r#"{"LastData":{"ErrMsg":"done"},  "HistoryDatas":[]}"#;
    s.call(
        "POST",
        "/task/setTask",
        &[],
        Some(json!({"taskId": id, "status": 3, "scheduleLog": log2})),
    )
    .await
    .unwrap();
    let t = s.get_task(&id).await;
    assert_eq!((&t["status"], &t["scheduleLog"]), (&json!(3), &json!(log2)));
    // A scheduleLog given to createTask comes back byte for byte, in getTask, a list and a
    // hold, and the /v1 task shows it as its progress.
    let log0 = r#"{"LastData":{"TraceId":"from-create"} , "x": [1,2]}"#;
    let id = create(
        &s,
        json!({"taskType": "CtxLog", "taskContext": "{}", "scheduleLog": log0}),
    )
    .await;
    assert_eq!(s.get_task(&id).await["scheduleLog"], log0, "created");
    assert_eq!(v1_task(&s, &id).await["progress"], json!(log0));
    let held = s
        .call(
            "POST",
            "/task/hold_task",
            &[("taskType", "CtxLog"), ("limit", "1")],
            None,
        )
        .await
        .unwrap();
    assert_eq!(held["taskList"][0]["scheduleLog"], log0, "held");
}

/// Retries double as asyncflow's do — 1 s, 2 s, 4 s, 8 s, then the cap — with no jitter
/// (issue 21 item 9; seed 002's max_retry_interval example with the cap at 10).
async fn retries_follow_asyncflows_formula(db: TestStore) {
    let s = start(db, true).await;
    let id = create(&s, json!({"taskType": "Retry", "taskContext": "{}", "maxRetryNum": 10, "maxRetryInterval": 10})).await;
    for n in 1..=6u32 {
        let held = s
            .call(
                "POST",
                "/task/hold_task",
                &[("taskType", "Retry"), ("limit", "1")],
                None,
            )
            .await
            .unwrap();
        assert_eq!(held["taskList"][0]["taskId"], id.as_str(), "attempt {n}");
        s.call(
            "POST",
            "/task/setTask",
            &[],
            Some(json!({"taskId": id, "status": 1})),
        )
        .await
        .unwrap();
        let t = v1_task(&s, &id).await;
        let at = |v: &Value| chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap()).unwrap();
        let failed = at(&t["errors"][(n - 1) as usize]["at"]);
        // The failure time has nanoseconds, run_at microseconds: compare to the millisecond.
        let delay = ((at(&t["run_at"]) - failed).num_microseconds().unwrap() + 500) / 1000;
        let want = (1000_i64 << (n - 1)).min(10_000);
        assert_eq!(delay, want, "after failure {n}: {t}");
        // Due again at once, as if the delay had passed.
        s.call(
            "POST",
            "/task/setTask",
            &[],
            Some(json!({"taskId": id, "orderTime": chrono::Utc::now().timestamp_millis()})),
        )
        .await
        .unwrap();
    }
}

/// An error as asyncflow's clients read it: the HTTP status `want`, and the envelope with
/// `code` the same number, a `msg` naming docket's error code, and no `result`.
fn assert_envelope(st: StatusCode, v: &Value, want: u16, docket_code: &str, what: &str) {
    assert_eq!(st.as_u16(), want, "{what}: {v}");
    assert_eq!(v["code"], want, "{what}: {v}");
    assert_eq!(v["result"], Value::Null, "{what}: {v}");
    let msg = v["msg"].as_str().unwrap_or_default();
    assert!(msg.starts_with(&format!("{docket_code}: ")), "{what}: {v}");
    assert!(msg.len() < 400, "{what}: the message stays short: {v}");
    assert_eq!(
        v.as_object().map(|o| o.len()),
        Some(3),
        "{what}: msg, code and result only: {v}"
    );
}

/// Issue 37 item 5: the seed's client creates `Lark` and reads, lists and holds it as `lark`
/// (seed 002: answers say `"taskType": "lark"` and ids `<id>_lark_task_1`, the type
/// lower-cased and the table). Ids in that shape, and docket's plain number (clients from
/// before), name a task in every request; one naming another type or table finds nothing;
/// a malformed one is refused in asyncflow's envelope.
async fn types_and_ids_as_asyncflow_writes_them(db: TestStore) {
    let s = start(db, true).await;
    let id = create(
        &s,
        json!({"userId": "noob", "taskType": "Lark", "taskStage": "sendmsg", "taskContext": "{}"}),
    )
    .await;
    let (num, rest) = id.split_once('_').unwrap();
    assert!(num.parse::<i64>().unwrap() > 0, "{id}");
    assert_eq!(rest, "lark_task_1", "<id>_<type>_task_<table>: {id}");
    let t = s.get_task(&id).await;
    assert_eq!(
        (t["taskId"].as_str(), t["taskType"].as_str()),
        (Some(id.as_str()), Some("lark")),
        "{t}"
    );
    assert_eq!(
        s.get_task(num).await["taskId"],
        id.as_str(),
        "docket's number finds the task too, answered in asyncflow's shape"
    );
    assert_eq!(
        s.get_task(&format!("{num}_LARK_task_1")).await["taskId"],
        id.as_str()
    );
    for ty in ["lark", "Lark", "LARK"] {
        let l = s
            .call(
                "GET",
                "/task/getTaskList",
                &[("taskType", ty), ("status", "1")],
                None,
            )
            .await
            .unwrap();
        let l = l["taskList"].as_array().unwrap().clone();
        assert_eq!(l.len(), 1, "listed as {ty}: {l:?}");
        assert_eq!(
            (l[0]["taskId"].as_str(), l[0]["taskType"].as_str()),
            (Some(id.as_str()), Some("lark"))
        );
    }
    let mine = s
        .call("GET", "/task/getUserTaskList", &[("userId", "noob")], None)
        .await
        .unwrap();
    assert_eq!(mine["taskList"][0]["taskId"], id.as_str(), "{mine}");
    // A worker that holds `lark` finds the task created as `Lark`.
    let held = s
        .call(
            "POST",
            "/task/hold_task",
            &[("taskType", "lark"), ("limit", "10")],
            None,
        )
        .await
        .unwrap();
    let list = held["taskList"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{held}");
    assert_eq!(
        (
            list[0]["taskId"].as_str(),
            list[0]["taskType"].as_str(),
            list[0]["status"].as_i64()
        ),
        (Some(id.as_str()), Some("lark"), Some(2))
    );
    // setTask by asyncflow's id hands it on; held again as `LARK`, a client from before
    // completes it by number (a JSON number).
    s.call(
        "POST",
        "/task/setTask",
        &[],
        Some(json!({"taskId": id, "taskStage": "notify", "status": 1})),
    )
    .await
    .unwrap();
    let held = s
        .call("POST", "/task/hold_task", &[("taskType", "LARK")], None)
        .await
        .unwrap();
    assert_eq!(held["taskList"][0]["taskId"], id.as_str(), "{held}");
    s.call(
        "POST",
        "/task/setTask",
        &[],
        Some(json!({"taskId": num.parse::<i64>().unwrap(), "status": 3})),
    )
    .await
    .unwrap();
    let t = s.get_task(&id).await;
    assert_eq!(
        (&t["status"], &t["taskStage"]),
        (&json!(3), &json!("notify"))
    );
    // A type holding the id's separators reads back by its id.
    let odd = create(&s, json!({"taskType": "Mail_Task_2", "taskContext": "{}"})).await;
    assert!(odd.ends_with("_mail_task_2_task_1"), "{odd}");
    assert_eq!(s.get_task(&odd).await["taskType"], "mail_task_2");
    // Another type or table than the task's: not found, as asyncflow looks in that table.
    for other in [
        format!("{num}_mail_task_1"),
        format!("{num}_lark_task_2"),
        format!("{}_mail_task_1", number(&odd)),
        format!("{}_lark_task_1", i64::MAX),
        i64::MAX.to_string(),
    ] {
        let (st, v) = s
            .call("GET", "/task/getTask", &[("taskId", &other)], None)
            .await
            .unwrap_err();
        assert_envelope(st, &v, 404, "not_found", &other);
        let (st, v) = s
            .call(
                "POST",
                "/task/setTask",
                &[],
                Some(json!({"taskId": other, "status": 4})),
            )
            .await
            .unwrap_err();
        assert_envelope(st, &v, 404, "not_found", &other);
    }
    // Malformed ids: 400 in the envelope, whether in a query or a body.
    let long = "9".repeat(10_000);
    for bad in [
        "",
        " ",
        "abc",
        "lark",
        "_lark_task_1",
        &format!("{num}_lark"),
        &format!("{num}_lark_task"),
        &format!("{num}_lark_task_"),
        &format!("{num}__task_1"),
        &format!("{num}_task_1"),
        &format!("{num}_lark_task_0"),
        &format!("{num}_lark_task_x"),
        &format!("{num}_lark_task_-1"),
        &format!("{num}_lark_task_99999999999"),
        &format!("{num}_la\trk_task_1"),
        &format!("{num}_lark_job_1"),
        "-5",
        "0",
        "+5",
        "1.5",
        "-5_lark_task_1",
        "0_lark_task_1",
        "99999999999999999999",
        "99999999999999999999_lark_task_1",
        &long,
    ] {
        let (st, v) = s
            .call("GET", "/task/getTask", &[("taskId", bad)], None)
            .await
            .unwrap_err();
        assert_envelope(st, &v, 400, "invalid_request", bad);
        let (st, v) = s
            .call(
                "POST",
                "/task/setTask",
                &[],
                Some(json!({"taskId": bad, "status": 4})),
            )
            .await
            .unwrap_err();
        assert_envelope(st, &v, 400, "invalid_request", bad);
    }
    for bad in [
        json!(-1),
        json!(0),
        json!(1.5),
        json!(1e30),
        json!(u64::MAX),
        json!(true),
        json!([1]),
        json!(null),
    ] {
        let (st, v) = s
            .call(
                "POST",
                "/task/setTask",
                &[],
                Some(json!({"taskId": bad, "status": 4})),
            )
            .await
            .unwrap_err();
        assert_envelope(st, &v, 400, "invalid_request", &bad.to_string());
    }
    // A NUL: refused before anything reads it, in the envelope too.
    let nul = format!("{num}_la\0rk_task_1");
    let (st, v) = s
        .call("GET", "/task/getTask", &[("taskId", &nul)], None)
        .await
        .unwrap_err();
    assert_envelope(st, &v, 400, "invalid_text", "NUL in a query");
    let (st, v) = s
        .call(
            "POST",
            "/task/setTask",
            &[],
            Some(json!({"taskId": nul, "status": 4})),
        )
        .await
        .unwrap_err();
    assert_envelope(st, &v, 400, "invalid_text", "NUL in a body");
    // Worst task types: refused in the envelope, nothing written.
    for bad in ["", "\t", "a\u{7f}b", &"x".repeat(257)] {
        let (st, v) = s
            .call(
                "POST",
                "/task/createTask",
                &[],
                Some(json!({"taskData": {"taskType": bad, "taskContext": "{}"}})),
            )
            .await
            .unwrap_err();
        assert_envelope(st, &v, 400, "invalid_request", bad);
        let (st, v) = s
            .call("POST", "/task/hold_task", &[("taskType", bad)], None)
            .await
            .unwrap_err();
        assert_envelope(st, &v, 400, "invalid_request", bad);
    }
    assert_eq!(
        s.call("GET", "/task/getTaskList", &[], None).await.unwrap()["taskList"]
            .as_array()
            .unwrap()
            .len(),
        2,
        "no refused call wrote a task"
    );
    // A task of a queue named in capitals (made through /v1, or through /api before types
    // were lower-cased) answers as `lark` and by asyncflow's id; a hold of `lark` takes it
    // once it is moved to the queue `lark`.
    let v1: Value = s
        .http
        .post(format!("{}/v1/tasks", s.base.trim_end_matches("/api")))
        .json(&json!({"kind": "Lark", "queue": "Lark", "payload": {}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let n = v1["id"].as_i64().unwrap();
    let old = format!("{n}_lark_task_1");
    let t = s.get_task(&old).await;
    assert_eq!(
        (&t["taskId"], &t["taskType"]),
        (&json!(old), &json!("lark"))
    );
    let held = s
        .call("POST", "/task/hold_task", &[("taskType", "lark")], None)
        .await
        .unwrap();
    assert_eq!(held["taskList"], json!([]), "{held}");
    let moved = s
        .http
        .patch(format!("{}/v1/tasks/{n}", s.base.trim_end_matches("/api")))
        .json(&json!({"queue": "lark"}))
        .send()
        .await
        .unwrap();
    assert_eq!(moved.status(), StatusCode::OK);
    let held = s
        .call("POST", "/task/hold_task", &[("taskType", "lark")], None)
        .await
        .unwrap();
    assert_eq!(held["taskList"][0]["taskId"], old.as_str(), "{held}");
}

/// A request under `/api` as it is sent: the status, the `Retry-After` header and the body.
async fn raw(
    s: &Server,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<(&str, Vec<u8>)>,
) -> (StatusCode, Option<String>, Value) {
    let root = s.base.trim_end_matches("/api").to_string();
    raw_at(s, &root, method, path, token, body, &[]).await
}

/// [`raw`] to the server at `root`, with `headers` too (a browser's `Origin`,
/// `Sec-Fetch-Site`); a body given with no content type (`""`) is sent without one.
async fn raw_at(
    s: &Server,
    root: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<(&str, Vec<u8>)>,
    headers: &[(&str, &str)],
) -> (StatusCode, Option<String>, Value) {
    let mut r = s.http.request(
        reqwest::Method::from_bytes(method.as_bytes()).unwrap(),
        format!("{root}{path}"),
    );
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    if let Some((ct, b)) = body {
        if !ct.is_empty() {
            r = r.header("content-type", ct);
        }
        r = r.body(b);
    }
    for (k, v) in headers {
        r = r.header(*k, *v);
    }
    let resp = r.send().await.unwrap();
    let st = resp.status();
    let h = |n: &str| {
        resp.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let retry = h("retry-after");
    assert_eq!(
        h("content-type").as_deref(),
        Some("application/json"),
        "{method} {path}"
    );
    (st, retry, resp.json().await.unwrap_or(Value::Null))
}

/// Every error under `/api` comes in asyncflow's envelope, whoever refused the request: an
/// unknown route, a method the route does not take, a body that is not JSON or too large, a
/// NUL, no token or one without the scope or queue, a token over its rate; docket's own
/// routes keep docket's shape.
async fn every_error_under_api_in_the_envelope(db: TestStore) {
    let s = start(db, true).await;
    let json = |b: &str| Some(("application/json", b.as_bytes().to_vec()));
    for (method, path, body, want, code) in [
        ("GET", "/api", None, 404, "route_not_found"),
        ("GET", "/api/", None, 404, "route_not_found"),
        ("GET", "/api/nothing", None, 404, "route_not_found"),
        ("POST", "/api/task/nothing", None, 404, "route_not_found"),
        ("POST", "/api/task/getTask", None, 405, "method_not_allowed"),
        (
            "GET",
            "/api/task/createTask",
            None,
            405,
            "method_not_allowed",
        ),
        (
            "DELETE",
            "/api/task/setTask",
            None,
            405,
            "method_not_allowed",
        ),
        (
            "POST",
            "/api/task/createTask",
            json("{"),
            400,
            "invalid_json",
        ),
        (
            "POST",
            "/api/task/createTask",
            json("[]"),
            400,
            "invalid_request",
        ),
        (
            "POST",
            "/api/task/setTask",
            json("\"x\""),
            400,
            "invalid_request",
        ),
        (
            "POST",
            "/api/task/setTask",
            json("{\"taskId\": \"1\", \"status\": \"x\"}"),
            400,
            "invalid_request",
        ),
        (
            "GET",
            "/api/task/getTask?taskId=%00",
            None,
            400,
            "invalid_text",
        ),
        (
            "GET",
            "/api/task/getTask?taskId=%FF",
            None,
            400,
            "invalid_request",
        ),
        (
            "POST",
            "/api/task/createTask",
            Some((
                "application/json",
                vec![b' '; docket_server::MAX_BODY_BYTES + 1],
            )),
            413,
            "payload_too_large",
        ),
    ] {
        let (st, _, v) = raw(&s, method, path, None, body).await;
        assert_envelope(st, &v, want, code, &format!("{method} {path}"));
    }
    // docket's own routes, and paths that only start like /api, keep docket's shape.
    for path in ["/v1/nothing", "/apis", "/api2/task/getTask"] {
        let (st, _, v) = raw(&s, "GET", path, None, None).await;
        assert_eq!(st, StatusCode::NOT_FOUND);
        assert_eq!(v["error"]["code"], "route_not_found", "{path}: {v}");
    }
}

/// Under `--auth required`: no token, an unknown one, one without the scope or the queue, and
/// one over its rate are refused in asyncflow's envelope; a `work` token's queues name the
/// lower-case type.
async fn auth_errors_in_the_envelope(db: TestStore) {
    let s = start_with(db, |st| {
        st.with_compat_asyncflow(true)
            .with_auth(docket_server::auth::AuthMode::Required)
            .with_limits(docket_server::auth::Limits {
                rate_per_second: 1,
                burst: 1,
                long_polls: 64,
            })
    })
    .await;
    let token = |name: &str, scope: Scope, queues: &[&str]| {
        let e = s.engine.clone();
        let t = NewToken {
            name: name.into(),
            scopes: vec![scope],
            queues: queues.iter().map(|q| q.to_string()).collect(),
            ..Default::default()
        };
        async move { e.token_create(t).await.unwrap().0 }
    };
    let reader = token("reader", Scope::Read, &[]).await;
    let enqueuer = token("enqueuer", Scope::Enqueue, &[]).await;
    let lark = token("lark-worker", Scope::Work, &["lark"]).await;
    let mail = token("mail-worker", Scope::Work, &["mail"]).await;
    let create = Some((
        "application/json",
        br#"{"taskData": {"taskType": "Lark", "taskContext": "{}"}}"#.to_vec(),
    ));
    let (st, _, v) = raw(&s, "POST", "/api/task/createTask", None, create.clone()).await;
    assert_envelope(st, &v, 401, "unauthenticated", "no token");
    let (st, _, v) = raw(
        &s,
        "POST",
        "/api/task/createTask",
        Some("dkt_nonsense"),
        create.clone(),
    )
    .await;
    assert_envelope(st, &v, 401, "unauthenticated", "unknown token");
    let (st, _, v) = raw(
        &s,
        "POST",
        "/api/task/createTask",
        Some(&reader),
        create.clone(),
    )
    .await;
    assert_envelope(st, &v, 403, "forbidden", "read token creating");
    let (st, _, v) = raw(
        &s,
        "POST",
        "/api/task/createTask",
        Some(&enqueuer),
        create.clone(),
    )
    .await;
    assert_eq!((st, &v["code"]), (StatusCode::OK, &json!(0)), "{v}");
    let id = v["result"]["taskId"].as_str().unwrap().to_string();
    let (st, _, v) = raw(
        &s,
        "POST",
        "/api/task/hold_task?taskType=Lark",
        Some(&mail),
        None,
    )
    .await;
    assert_envelope(st, &v, 403, "forbidden", "a token of another queue");
    let (st, _, v) = raw(
        &s,
        "POST",
        "/api/task/hold_task?taskType=Lark",
        Some(&lark),
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["result"]["taskList"][0]["taskId"], id.as_str(), "{v}");
    // Over the rate (1 a second, burst 1): 429 with Retry-After, in the envelope.
    let mut limited = 0;
    for _ in 0..5 {
        let (st, retry, v) = raw(
            &s,
            "GET",
            &format!("/api/task/getTask?taskId={id}"),
            Some(&reader),
            None,
        )
        .await;
        if st == StatusCode::TOO_MANY_REQUESTS {
            limited += 1;
            assert_envelope(st, &v, 429, "rate_limited", "over the rate");
            assert!(retry.is_some_and(|r| r.parse::<u64>().unwrap() >= 1));
        } else {
            assert_eq!(v["result"]["taskData"]["taskId"], id.as_str(), "{v}");
        }
    }
    assert!(limited >= 3, "five calls at once, one a second allowed");
}

/// A token made on the server's engine: `name` with `scope`, limited to `queues`.
async fn token(s: &Server, name: &str, scope: Scope, queues: &[&str]) -> String {
    s.engine
        .token_create(NewToken {
            name: name.into(),
            scopes: vec![scope],
            queues: queues.iter().map(|q| q.to_string()).collect(),
            ..Default::default()
        })
        .await
        .unwrap()
        .0
}

/// A JSON body for [`raw`].
fn json_body(v: Value) -> Option<(&'static str, Vec<u8>)> {
    Some(("application/json", v.to_string().into_bytes()))
}

/// The `result` of a call that must succeed, with its envelope.
fn result(what: &str, (st, _, v): (StatusCode, Option<String>, Value)) -> Value {
    assert_eq!((st, &v["code"]), (StatusCode::OK, &json!(0)), "{what}: {v}");
    v["result"].clone()
}

/// getTask of `id` with token `tok`.
async fn get_as(s: &Server, tok: &str, id: &str) -> (StatusCode, Option<String>, Value) {
    let path = format!("/api/task/getTask?taskId={id}");
    raw(s, "GET", &path, Some(tok), None).await
}

/// A queue with `mask_payload` is masked under `/api` as under `/v1`: a `read` token sees
/// `taskContext` and `scheduleLog` as `***` in getTask, getTaskList and getUserTaskList; an
/// admin sees them, and so does the worker that holds the task (it must work on it).
async fn masked_queues_stay_masked(db: TestStore) {
    let s = start_with(db, |st| {
        st.with_compat_asyncflow(true)
            .with_auth(docket_server::auth::AuthMode::Required)
    })
    .await;
    let root = token(&s, "root", Scope::Admin, &[]).await;
    let reader = token(&s, "reader", Scope::Read, &[]).await;
    let enqueuer = token(&s, "enqueuer", Scope::Enqueue, &[]).await;
    let worker = token(&s, "lark-worker", Scope::Work, &["lark"]).await;
    let (st, _, v) = raw(
        &s,
        "PUT",
        "/v1/queues/lark",
        Some(&root),
        json_body(json!({"mask_payload": true})),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let secret = r#"{"Card":"Zq4111-1111"}"#;
    let log = r#"{"LastData":{"ErrMsg":"Zq4111 declined"}}"#;
    let create = |ty: &str| {
        raw(
            &s,
            "POST",
            "/api/task/createTask",
            Some(&enqueuer),
            json_body(json!({"taskData": {"userId": "noob", "taskType": ty,
                "taskStage": "pay", "taskContext": secret, "scheduleLog": log}})),
        )
    };
    let masked = result("create Lark", create("Lark").await)["taskId"]
        .as_str()
        .unwrap()
        .to_string();
    let open = result("create Mail", create("Mail").await)["taskId"]
        .as_str()
        .unwrap()
        .to_string();
    let t = result("reader getTask", get_as(&s, &reader, &masked).await)["taskData"].clone();
    assert_eq!(
        (t["taskContext"].as_str(), t["scheduleLog"].as_str()),
        (Some("***"), Some("***")),
        "{t}"
    );
    assert!(!t.to_string().contains("Zq4111"), "{t}");
    let t = result("reader getTask open", get_as(&s, &reader, &open).await)["taskData"].clone();
    assert_eq!(t["taskContext"], secret, "another queue's is shown: {t}");
    let t = result("admin getTask", get_as(&s, &root, &masked).await)["taskData"].clone();
    assert_eq!(
        (t["taskContext"].as_str(), t["scheduleLog"].as_str()),
        (Some(secret), Some(log)),
        "an admin sees it: {t}"
    );
    for path in [
        "/api/task/getTaskList?taskType=Lark",
        "/api/task/getTaskList?taskType=lark&status=1",
        "/api/task/getUserTaskList?userId=noob",
    ] {
        let list =
            result(path, raw(&s, "GET", path, Some(&reader), None).await)["taskList"].clone();
        let tasks = list.as_array().unwrap();
        let lark = tasks
            .iter()
            .find(|t| t["taskId"] == masked.as_str())
            .unwrap_or_else(|| panic!("{path} lists the masked task: {list}"));
        assert_eq!(
            (lark["taskContext"].as_str(), lark["scheduleLog"].as_str()),
            (Some("***"), Some("***")),
            "{path}: {list}"
        );
        for t in tasks.iter().filter(|t| t["taskType"] == "mail") {
            assert_eq!(t["taskContext"], secret, "{path}: {list}");
        }
        if path.contains("lark") || path.contains("Lark") {
            assert!(!list.to_string().contains("Zq4111"), "{path}: {list}");
        }
    }
    // The worker that holds it gets what it must work on, and reports progress that a reader
    // does not see either.
    let held = result(
        "hold",
        raw(
            &s,
            "POST",
            "/api/task/hold_task?taskType=Lark",
            Some(&worker),
            None,
        )
        .await,
    );
    assert_eq!(held["taskList"][0]["taskId"], masked.as_str(), "{held}");
    assert_eq!(held["taskList"][0]["taskContext"], secret, "{held}");
    let progress = r#"{"LastData":{"ErrMsg":"Zq4111 retrying"}}"#;
    result(
        "setTask",
        raw(
            &s,
            "POST",
            "/api/task/setTask",
            Some(&worker),
            json_body(json!({"taskId": masked, "status": 2, "scheduleLog": progress})),
        )
        .await,
    );
    let t = result("reader getTask held", get_as(&s, &reader, &masked).await)["taskData"].clone();
    assert_eq!(t["status"], 2, "{t}");
    assert!(!t.to_string().contains("Zq4111"), "{t}");
    let t = result("admin getTask held", get_as(&s, &root, &masked).await)["taskData"].clone();
    assert_eq!(t["scheduleLog"], progress, "{t}");
    // Failed without a scheduleLog: the one a client sent before stays masked.
    let fail = |id: &str| {
        raw(
            &s,
            "POST",
            "/api/task/setTask",
            Some(&worker),
            json_body(json!({"taskId": id, "status": 1, "taskStage": "pay"})),
        )
    };
    result("setTask fail", fail(&masked).await);
    let t = result("reader getTask failed", get_as(&s, &reader, &masked).await)["taskData"].clone();
    assert_eq!(
        (t["taskContext"].as_str(), t["scheduleLog"].as_str()),
        (Some("***"), Some("***")),
        "{t}"
    );
    // A task no client sent a scheduleLog for: its log is built from docket's run log, which
    // is not masked (nor is it on `/v1`); its context is.
    let plain = result(
        "create without a log",
        raw(
            &s,
            "POST",
            "/api/task/createTask",
            Some(&enqueuer),
            json_body(json!({"taskData": {"taskType": "Lark", "taskContext": secret}})),
        )
        .await,
    )["taskId"]
        .as_str()
        .unwrap()
        .to_string();
    let held = result(
        "hold",
        raw(
            &s,
            "POST",
            "/api/task/hold_task?taskType=Lark",
            Some(&worker),
            None,
        )
        .await,
    );
    assert_eq!(held["taskList"][0]["taskId"], plain.as_str(), "{held}");
    result("setTask fail", fail(&plain).await);
    let t = result("reader getTask run log", get_as(&s, &reader, &plain).await)["taskData"].clone();
    assert_eq!(t["taskContext"], "***", "{t}");
    let log: Value = serde_json::from_str(t["scheduleLog"].as_str().unwrap())
        .unwrap_or_else(|e| panic!("{e}: {t}"));
    assert!(
        log["LastData"]["TraceId"]
            .as_str()
            .is_some_and(|id| !id.is_empty()),
        "the run log's last attempt: {t}"
    );
}

/// setTask acts as the holder of a task's lease, so a `work` token may set only tasks of its
/// queues, held or waiting, as hold_task may hold only those: a token of another queue is
/// refused (403, in the envelope) and the task is left as it was.
async fn set_task_keeps_to_the_tokens_queues(db: TestStore) {
    let s = start_with(db, |st| {
        st.with_compat_asyncflow(true)
            .with_auth(docket_server::auth::AuthMode::Required)
    })
    .await;
    let enqueuer = token(&s, "enqueuer", Scope::Enqueue, &[]).await;
    let lark = token(&s, "lark-worker", Scope::Work, &["lark"]).await;
    let mail = token(&s, "mail-worker", Scope::Work, &["mail"]).await;
    let create = || {
        raw(
            &s,
            "POST",
            "/api/task/createTask",
            Some(&enqueuer),
            json_body(json!({"taskData": {"taskType": "Lark", "taskStage": "one",
                "taskContext": "{}", "priority": 1}})),
        )
    };
    let a = result("create", create().await)["taskId"]
        .as_str()
        .unwrap()
        .to_string();
    let b = result("create", create().await)["taskId"]
        .as_str()
        .unwrap()
        .to_string();
    // hold_task keeps to the token's queues (the type lower-cased).
    let (st, _, v) = raw(
        &s,
        "POST",
        "/api/task/hold_task?taskType=LARK",
        Some(&mail),
        None,
    )
    .await;
    assert_envelope(st, &v, 403, "forbidden", "hold by a token of another queue");
    let held = result(
        "hold",
        raw(
            &s,
            "POST",
            "/api/task/hold_task?taskType=Lark&limit=1",
            Some(&lark),
            None,
        )
        .await,
    );
    assert_eq!(held["taskList"][0]["taskId"], a.as_str(), "{held}");
    let state = |id: &str| {
        let e = s.engine.clone();
        let n: i64 = number(id).parse().unwrap();
        async move {
            let t = e.task_get(n).await.unwrap().unwrap();
            (t.state, t.priority, t.stage, t.payload)
        }
    };
    let (held_before, waiting_before) = (state(&a).await, state(&b).await);
    assert_eq!(held_before.0, docket_core::TaskState::Running);
    let number_a: i64 = number(&a).parse().unwrap();
    for (what, body) in [
        (
            "complete a held task",
            json!({"taskId": a, "status": 3, "taskContext": "x"}),
        ),
        ("fail a held task", json!({"taskId": a, "status": 4})),
        (
            "hand a held task on",
            json!({"taskId": a, "status": 1, "taskStage": "two"}),
        ),
        (
            "retry a held task",
            json!({"taskId": a, "status": 1, "taskStage": "one"}),
        ),
        (
            "change a held task",
            json!({"taskId": a, "status": 2, "taskContext": "x"}),
        ),
        (
            "by docket's number",
            json!({"taskId": number_a, "status": 3}),
        ),
        ("cancel a waiting task", json!({"taskId": b, "status": 4})),
        (
            "change a waiting task",
            json!({"taskId": b, "priority": 9, "taskStage": "two",
            "taskContext": "x"}),
        ),
    ] {
        let (st, _, v) = raw(
            &s,
            "POST",
            "/api/task/setTask",
            Some(&mail),
            json_body(body),
        )
        .await;
        assert_envelope(st, &v, 403, "forbidden", what);
        assert!(
            v["msg"].as_str().unwrap().contains("\"lark\""),
            "{what}: the message names the queue: {v}"
        );
    }
    // With auth on too, the right token sent from another site's page is refused.
    let root = s.base.trim_end_matches("/api").to_string();
    let (st, _, v) = raw_at(
        &s,
        &root,
        "POST",
        "/api/task/setTask",
        Some(&lark),
        json_body(json!({"taskId": a, "status": 3})),
        &[("origin", "https://evil.example")],
    )
    .await;
    assert_envelope(st, &v, 403, "forbidden", "a cross-site setTask under auth");
    assert_eq!(state(&a).await, held_before, "the held task is as it was");
    assert_eq!(
        state(&b).await,
        waiting_before,
        "the waiting task is as it was"
    );
    // The token of the task's queue may.
    result(
        "complete",
        raw(
            &s,
            "POST",
            "/api/task/setTask",
            Some(&lark),
            json_body(json!({"taskId": a, "status": 3, "taskContext": "done"})),
        )
        .await,
    );
    result(
        "cancel",
        raw(
            &s,
            "POST",
            "/api/task/setTask",
            Some(&lark),
            json_body(json!({"taskId": b, "status": 4})),
        )
        .await,
    );
    assert_eq!(state(&a).await.0, docket_core::TaskState::Completed);
    assert_eq!(state(&b).await.0, docket_core::TaskState::Cancelled);
}

/// A page of another site can make a browser post to docket but not read the answer: `/api`
/// writes get `/v1`'s cross-site check, auth on or off — a body not declared JSON is 415, a
/// write a browser marks as cross-site 403 (unless `--cors-origin` allows its origin), in
/// asyncflow's envelope — and write nothing. (Under auth: `set_task_keeps_to_the_tokens_queues`.)
async fn browsers_cannot_write_to_api(db: TestStore) {
    let s = start(db, true).await;
    let root = s.base.trim_end_matches("/api").to_string();
    // The same database served again, with one origin allowed.
    let cors = {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", l.local_addr().unwrap());
        let state = AppState::new(s.engine.clone(), s.stop.clone())
            .with_compat_asyncflow(true)
            .with_cors_origins(vec!["https://app.example".into()]);
        tokio::spawn(docket_server::serve(l, state));
        base
    };
    let count = || {
        let e = s.engine.clone();
        async move {
            e.task_list(docket_store::TaskListParams {
                limit: 1000,
                ..Default::default()
            })
            .await
            .unwrap()
            .len()
        }
    };
    let create = br#"{"taskData": {"taskType": "Lark", "taskContext": "{}"}}"#.to_vec();
    let id = result(
        "create",
        raw(
            &s,
            "POST",
            "/api/task/createTask",
            None,
            Some(("application/json", create.clone())),
        )
        .await,
    )["taskId"]
        .as_str()
        .unwrap()
        .to_string();
    let before = count().await;
    // Bodies a page can send without a CORS preflight.
    for ct in [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "",
    ] {
        let (st, _, v) = raw(
            &s,
            "POST",
            "/api/task/createTask",
            None,
            Some((ct, create.clone())),
        )
        .await;
        assert_envelope(
            st,
            &v,
            415,
            "unsupported_media_type",
            &format!("createTask as {ct:?}"),
        );
        let set = format!(r#"{{"taskId": "{id}", "status": 4}}"#).into_bytes();
        let (st, _, v) = raw(&s, "POST", "/api/task/setTask", None, Some((ct, set))).await;
        assert_envelope(
            st,
            &v,
            415,
            "unsupported_media_type",
            &format!("setTask as {ct:?}"),
        );
    }
    let (st, _, v) = raw(
        &s,
        "POST",
        "/api/task/hold_task?taskType=Lark",
        None,
        Some(("application/x-www-form-urlencoded", vec![])),
    )
    .await;
    assert_envelope(
        st,
        &v,
        415,
        "unsupported_media_type",
        "a form posted to hold_task",
    );
    // Writes a browser marks as cross-site, even as JSON.
    let json = Some(("application/json", create.clone()));
    for h in [
        [("origin", "https://evil.example")],
        [("sec-fetch-site", "cross-site")],
        [("sec-fetch-site", "same-site")],
        [("origin", "null")],
    ] {
        let what = format!("{h:?}");
        let (st, _, v) = raw_at(
            &s,
            &root,
            "POST",
            "/api/task/createTask",
            None,
            json.clone(),
            &h,
        )
        .await;
        assert_envelope(st, &v, 403, "forbidden", &format!("createTask {what}"));
        let set = json_body(json!({"taskId": id, "status": 4}));
        let (st, _, v) = raw_at(&s, &root, "POST", "/api/task/setTask", None, set, &h).await;
        assert_envelope(st, &v, 403, "forbidden", &format!("setTask {what}"));
        for path in [
            "/api/task/hold_task?taskType=Lark",
            "/api/task_schedule_cfg/list",
        ] {
            let (st, _, v) = raw_at(&s, &root, "POST", path, None, None, &h).await;
            assert_envelope(st, &v, 403, "forbidden", &format!("{path} {what}"));
        }
    }
    assert_eq!(count().await, before, "no refused post made a task");
    assert_eq!(
        s.get_task(&id).await["status"],
        1,
        "no refused post held or cancelled the task"
    );
    // A page may still not read the answers: reads are answered without CORS headers.
    let (st, _, v) = raw_at(
        &s,
        &root,
        "GET",
        &format!("/api/task/getTask?taskId={id}"),
        None,
        None,
        &[("origin", "https://evil.example")],
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    // The same origin, and clients that are not browsers (no Origin, no Sec-Fetch-Site).
    let host = root.trim_start_matches("http://").to_string();
    let same = format!("http://{host}");
    result(
        "same origin",
        raw_at(
            &s,
            &root,
            "POST",
            "/api/task/createTask",
            None,
            json.clone(),
            &[("origin", &same), ("sec-fetch-site", "same-origin")],
        )
        .await,
    );
    // An origin allowed with --cors-origin writes; others still do not.
    result(
        "allowed origin",
        raw_at(
            &s,
            &cors,
            "POST",
            "/api/task/createTask",
            None,
            json.clone(),
            &[
                ("origin", "https://app.example"),
                ("sec-fetch-site", "cross-site"),
            ],
        )
        .await,
    );
    let (st, _, v) = raw_at(
        &s,
        &cors,
        "POST",
        "/api/task/createTask",
        None,
        json.clone(),
        &[("origin", "https://evil.example")],
    )
    .await;
    assert_envelope(st, &v, 403, "forbidden", "an origin not allowed");
    assert_eq!(count().await, before + 2);
    let held = s
        .call("POST", "/task/hold_task", &[("taskType", "Lark")], None)
        .await
        .unwrap();
    assert_eq!(held["taskList"][0]["taskId"], id.as_str(), "{held}");
}

/// createTask checks the scope a task's kind asks for, as `POST /v1/tasks` does: a type
/// `sql` (docket-sql's kind) needs the `sql` scope besides `enqueue`.
async fn create_task_needs_the_kinds_scope(db: TestStore) {
    let s = start_with(db, |st| {
        st.with_compat_asyncflow(true)
            .with_auth(docket_server::auth::AuthMode::Required)
    })
    .await;
    let enqueuer = token(&s, "enqueuer", Scope::Enqueue, &[]).await;
    let sql = {
        let t = NewToken {
            name: "sql".into(),
            scopes: vec![Scope::Enqueue, Scope::Sql],
            ..Default::default()
        };
        s.engine.token_create(t).await.unwrap().0
    };
    let body = || {
        json_body(json!({"taskData": {"taskType": "SQL",
            "taskContext": r#"{"input":"SELECT 1","target":"main"}"#}}))
    };
    let (st, _, v) = raw(&s, "POST", "/api/task/createTask", Some(&enqueuer), body()).await;
    assert_envelope(
        st,
        &v,
        403,
        "forbidden",
        "an sql task without the sql scope",
    );
    assert!(v["msg"].as_str().unwrap().contains("`sql`"), "{v}");
    let none = s
        .engine
        .task_list(docket_store::TaskListParams {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(none.is_empty(), "nothing was written: {none:?}");
    result(
        "with the sql scope",
        raw(&s, "POST", "/api/task/createTask", Some(&sql), body()).await,
    );
}

async fn off_by_default(db: TestStore) {
    let s = start(db, false).await;
    let (st, v) = s
        .call("POST", "/task_schedule_cfg/list", &[], None)
        .await
        .unwrap_err();
    assert_eq!(st, StatusCode::NOT_FOUND);
    assert_eq!(v["error"]["code"], "route_not_found", "{v}");
}

macro_rules! all {
    ($($name:ident),* $(,)?) => {
        mod pg { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name(docket_store::testing::TestStore::postgres().await).await; } )* }
        mod sqlite { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name(docket_store::testing::TestStore::sqlite().await).await; } )* }
        mod mysql { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name(docket_store::testing::TestStore::mysql().await).await; } )* }
    };
}

all!(
    lark_worker_end_to_end,
    off_by_default,
    set_task_takes_every_field,
    task_context_round_trips,
    retries_follow_asyncflows_formula,
    types_and_ids_as_asyncflow_writes_them,
    every_error_under_api_in_the_envelope,
    auth_errors_in_the_envelope,
    masked_queues_stay_masked,
    set_task_keeps_to_the_tokens_queues,
    browsers_cannot_write_to_api,
    create_task_needs_the_kinds_scope,
);
