//! Auth required (README "Security"): tokens and scopes, revocation seen at once by another
//! node, expiry, the audit actor, and the dashboard's login session and cross-site defences.
//! Each test on its own PostgreSQL schema or SQLite file.

use docket_core::auth::Scope;
use docket_core::SystemClock;
use docket_engine::auth::NewToken;
use docket_engine::{Engine, EngineConfig};
use docket_server::auth::AuthMode;
use docket_server::AppState;
use docket_store::{connect, ConnectOptions, Store};
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

struct Node {
    base: String,
    engine: Engine,
    stop: CancellationToken,
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn node(store: Arc<dyn Store>, name: &str) -> Node {
    store.migrate().await.unwrap();
    let engine = Engine::new(
        store.clone(),
        Arc::new(SystemClock),
        EngineConfig::new(name, &*store),
    );
    let stop = CancellationToken::new();
    engine.start(stop.clone()).await.unwrap();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", l.local_addr().unwrap());
    let state = AppState::new(engine.clone(), stop.clone()).with_auth(AuthMode::Required);
    tokio::spawn(docket_server::serve(l, state));
    Node { base, engine, stop }
}

/// Two nodes on one database.
async fn pg() -> (Node, Node, Option<tempfile::TempDir>) {
    let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
    let url = std::env::var("DOCKET_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let opts = ConnectOptions {
        url,
        schema: Some(schema),
        max_connections: Some(4),
        relaxed_commit: true,
    };
    let a = node(connect(&opts).await.unwrap(), "a").await;
    let b = node(connect(&opts).await.unwrap(), "b").await;
    (a, b, None)
}

async fn sqlite() -> (Node, Node, Option<tempfile::TempDir>) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let a = node(
        connect(&ConnectOptions::new(url.clone())).await.unwrap(),
        "a",
    )
    .await;
    let b = node(connect(&ConnectOptions::new(url)).await.unwrap(), "b").await;
    (a, b, Some(dir))
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

async fn call(
    n: &Node,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut r = http().request(m, format!("{}{}", n.base, path));
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    if let Some(b) = body {
        r = r.json(&b);
    }
    let resp = r.send().await.unwrap();
    let st = resp.status();
    (st, resp.json().await.unwrap_or(Value::Null))
}

fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("")
}

async fn admin(n: &Node) -> String {
    n.engine
        .token_create(NewToken {
            name: "root".into(),
            scopes: vec![Scope::Admin],
            ..Default::default()
        })
        .await
        .unwrap()
        .0
}

async fn token(n: &Node, admin: &str, body: Value) -> String {
    let (st, v) = call(n, Some(admin), "POST", "/v1/tokens", Some(body)).await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert!(v["info"].get("hash").is_none(), "{v}");
    v["token"].as_str().unwrap().to_string()
}

async fn tokens_scopes_and_revocation((a, b, _dir): (Node, Node, Option<tempfile::TempDir>)) {
    let root = admin(&a).await;
    // Open routes, and everything else refused without a token.
    assert_eq!(
        call(&a, None, "GET", "/healthz", None).await.0,
        StatusCode::OK
    );
    assert_eq!(
        call(&a, None, "GET", "/openapi.json", None).await.0,
        StatusCode::OK
    );
    for (m, p) in [
        ("GET", "/v1/tasks"),
        ("POST", "/v1/tasks"),
        ("GET", "/metrics"),
        ("POST", "/v1/queues/q/claim"),
        ("GET", "/v1/tokens"),
    ] {
        let (st, v) = call(&a, None, m, p, Some(json!({}))).await;
        assert_eq!(
            (st, code(&v)),
            (StatusCode::UNAUTHORIZED, "unauthenticated"),
            "{m} {p}"
        );
    }
    let (st, v) = call(&a, Some("dkt_nope"), "GET", "/v1/tasks", None).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    assert!(
        v["error"]["message"].as_str().unwrap().contains("unknown"),
        "{v}"
    );

    let reader = token(&a, &root, json!({"name": "reader", "scopes": ["read"]})).await;
    let enq = token(&a, &root, json!({"name": "enq", "scopes": ["enqueue"]})).await;
    let worker = token(
        &a,
        &root,
        json!({"name": "w", "scopes": ["work"], "queues": ["emails"]}),
    )
    .await;
    // Names are unique among live tokens; bad requests are 400.
    let (st, v) = call(
        &a,
        Some(&root),
        "POST",
        "/v1/tokens",
        Some(json!({"name": "w", "scopes": ["read"]})),
    )
    .await;
    assert_eq!((st, code(&v)), (StatusCode::CONFLICT, "conflict"), "{v}");
    let (st, _) = call(
        &a,
        Some(&root),
        "POST",
        "/v1/tokens",
        Some(json!({"name": "x", "scopes": []})),
    )
    .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    let (st, _) = call(
        &a,
        Some(&root),
        "POST",
        "/v1/tokens",
        Some(json!({"name": "x", "scopes": ["root"]})),
    )
    .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);

    // read: every GET, nothing else.
    assert_eq!(
        call(&a, Some(&reader), "GET", "/v1/tasks", None).await.0,
        StatusCode::OK
    );
    assert_eq!(
        call(&a, Some(&reader), "GET", "/metrics", None).await.0,
        StatusCode::OK
    );
    let (st, v) = call(
        &a,
        Some(&reader),
        "POST",
        "/v1/tasks",
        Some(json!({"kind": "k"})),
    )
    .await;
    assert_eq!((st, code(&v)), (StatusCode::FORBIDDEN, "forbidden"));
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`enqueue`"),
        "{v}"
    );
    let (st, _) = call(&a, Some(&reader), "GET", "/v1/tokens", None).await;
    assert_eq!(st, StatusCode::FORBIDDEN, "tokens are admin only");
    // A namespace's processor URL makes the server send requests: admin only, not `process`.
    let proc = token(&a, &root, json!({"name": "proc", "scopes": ["process"]})).await;
    let ns = json!({"processor": {"url": "http://127.0.0.1:9/"}});
    let (st, v) = call(
        &a,
        Some(&proc),
        "PUT",
        "/v1/namespaces/n1",
        Some(ns.clone()),
    )
    .await;
    assert_eq!((st, code(&v)), (StatusCode::FORBIDDEN, "forbidden"), "{v}");
    let (st, v) = call(&a, Some(&root), "PUT", "/v1/namespaces/n1", Some(ns)).await;
    assert_eq!(st, StatusCode::OK, "{v}");

    // enqueue: tasks, not sql ones, not reads.
    let (st, t) = call(
        &a,
        Some(&enq),
        "POST",
        "/v1/tasks",
        Some(json!({"queue": "emails", "kind": "k"})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{t}");
    let id = t["id"].as_i64().unwrap();
    let (st, v) = call(
        &a,
        Some(&enq),
        "POST",
        "/v1/tasks",
        Some(json!({"kind": "sql", "payload": {"input": "SELECT 1"}})),
    )
    .await;
    assert_eq!((st, code(&v)), (StatusCode::FORBIDDEN, "forbidden"), "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("`sql`"),
        "{v}"
    );
    assert_eq!(
        call(&a, Some(&enq), "GET", "/v1/tasks", None).await.0,
        StatusCode::FORBIDDEN
    );

    // work, limited to a queue: claims there, not elsewhere; no reads.
    let (st, v) = call(
        &b,
        Some(&worker),
        "POST",
        "/v1/queues/other/claim",
        Some(json!({"worker": "x"})),
    )
    .await;
    assert_eq!((st, code(&v)), (StatusCode::FORBIDDEN, "forbidden"), "{v}");
    let (st, v) = call(
        &b,
        Some(&worker),
        "POST",
        "/v1/queues/emails/claim",
        Some(json!({"worker": "x"})),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["tasks"][0]["id"], id);
    let lease = v["tasks"][0]["lease"]["token"]
        .as_str()
        .unwrap()
        .to_string();
    let (st, _) = call(
        &b,
        Some(&worker),
        "POST",
        &format!("/v1/tasks/{id}/complete"),
        Some(json!({"lease": lease})),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(
        call(&b, Some(&worker), "GET", "/v1/tasks", None).await.0,
        StatusCode::FORBIDDEN
    );

    // The audit log names the token, whatever actor header the client sends.
    let (st, t2) = call(
        &a,
        Some(&enq),
        "POST",
        "/v1/tasks",
        Some(json!({"kind": "k", "run_in": "1h"})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED);
    let resp = http()
        .post(format!("{}/v1/tasks/{}/cancel", a.base, t2["id"]))
        .bearer_auth(&root)
        .header("x-docket-actor", "somebody-else")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let (_, audit) = call(&a, Some(&reader), "GET", "/v1/audit", None).await;
    let cancel = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "task.cancel")
        .unwrap();
    assert_eq!(cancel["actor"], "token:root", "{audit}");

    // The list shows tokens, never the secrets, with their last use.
    let (st, list) = call(&a, Some(&root), "GET", "/v1/tokens", None).await;
    assert_eq!(st, StatusCode::OK);
    let text = list.to_string();
    for secret in [&root, &reader, &enq, &worker] {
        assert!(!text.contains(secret.as_str()));
    }
    let r = list["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "reader")
        .unwrap();
    assert!(r["last_used_at"].is_string(), "{r}");

    // Revoked on node a: refused at once on node b.
    let (st, _) = call(&a, Some(&root), "DELETE", "/v1/tokens/reader", None).await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    let (st, v) = call(&b, Some(&reader), "GET", "/v1/tasks", None).await;
    assert_eq!(
        (st, code(&v)),
        (StatusCode::UNAUTHORIZED, "unauthenticated")
    );
    assert!(
        v["error"]["message"].as_str().unwrap().contains("revoked"),
        "{v}"
    );
    let (st, _) = call(&a, Some(&root), "DELETE", "/v1/tokens/reader", None).await;
    assert_eq!(st, StatusCode::NOT_FOUND);

    // Expiry.
    let brief = token(
        &a,
        &root,
        json!({"name": "brief", "scopes": ["read"], "expires_in": "1s"}),
    )
    .await;
    assert_eq!(
        call(&a, Some(&brief), "GET", "/v1/tasks", None).await.0,
        StatusCode::OK
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (st, v) = call(&b, Some(&brief), "GET", "/v1/tasks", None).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    assert!(
        v["error"]["message"].as_str().unwrap().contains("expired"),
        "{v}"
    );
}

fn form(csrf: Option<&str>) -> String {
    csrf.map_or_else(String::new, |c| format!("csrf={c}"))
}

async fn dashboard_login_and_csrf((a, _b, _dir): (Node, Node, Option<tempfile::TempDir>)) {
    let root = admin(&a).await;
    let reader = token(&a, &root, json!({"name": "reader", "scopes": ["read"]})).await;
    let c = http();
    // Not logged in: the dashboard sends the browser to the login page.
    let r = c.get(format!("{}/", a.base)).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/ui/login");
    let r = c.get(format!("{}/ui/login", a.base)).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
    // A wrong token: the form again, 401.
    let r = c
        .post(format!("{}/ui/login", a.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("token=dkt_wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let login = |t: String| {
        let c = c.clone();
        let base = a.base.clone();
        async move {
            let r = c
                .post(format!("{base}/ui/login"))
                .header("content-type", "application/x-www-form-urlencoded")
                .body(format!("token={t}"))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::SEE_OTHER);
            let set = r.headers()["set-cookie"].to_str().unwrap().to_string();
            assert!(
                set.contains("HttpOnly") && set.contains("SameSite=Strict"),
                "{set}"
            );
            set.split(';').next().unwrap().to_string()
        }
    };
    let read_cookie = login(reader.clone()).await;
    let admin_cookie = login(root.clone()).await;
    // A read-only session sees the pages but no action buttons, and its posts are refused.
    let (_, t) = call(
        &a,
        Some(&root),
        "POST",
        "/v1/tasks",
        Some(json!({"queue": "q", "kind": "k", "run_in": "1h"})),
    )
    .await;
    let id = t["id"].as_i64().unwrap();
    let page = |cookie: &str, path: &str| {
        let r = c
            .get(format!("{}{path}", a.base))
            .header("cookie", cookie)
            .send();
        async move { r.await.unwrap().text().await.unwrap() }
    };
    let overview = page(&read_cookie, "/").await;
    assert!(
        overview.contains("q") && !overview.contains("/ui/queues/q/pause"),
        "{overview}"
    );
    let task_page = page(&read_cookie, &format!("/ui/tasks/{id}")).await;
    assert!(!task_page.contains("action-cancel"), "{task_page}");
    assert!(page(&admin_cookie, &format!("/ui/tasks/{id}"))
        .await
        .contains("action-cancel"));
    assert!(page(&admin_cookie, "/")
        .await
        .contains("/ui/queues/q/pause"));
    // The confirmation page carries the session's CSRF token.
    let confirm = page(&admin_cookie, "/ui/queues/q/pause").await;
    let csrf = confirm
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap()
        .to_string();
    let read_confirm = page(&read_cookie, "/ui/queues/q/pause").await;
    let read_csrf = read_confirm
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap()
        .to_string();
    assert_ne!(csrf, read_csrf, "CSRF tokens are per session");
    let post = |cookie: &str, extra: &[(&str, &str)], body: String| {
        let mut r = c
            .post(format!("{}/ui/queues/q/pause", a.base))
            .header("cookie", cookie)
            .header("content-type", "application/x-www-form-urlencoded");
        for (k, v) in extra {
            r = r.header(*k, *v);
        }
        let r = r.body(body).send();
        async move { r.await.unwrap().status() }
    };
    assert_eq!(
        post(&read_cookie, &[], form(Some(&read_csrf))).await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        post(&admin_cookie, &[], form(None)).await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        post(&admin_cookie, &[], form(Some(&read_csrf))).await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        post(
            &admin_cookie,
            &[("origin", "http://evil.example")],
            form(Some(&csrf))
        )
        .await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        post(
            &admin_cookie,
            &[("sec-fetch-site", "cross-site")],
            form(Some(&csrf))
        )
        .await,
        StatusCode::FORBIDDEN
    );
    let (_, q) = call(&a, Some(&root), "GET", "/v1/queues/q", None).await;
    assert_eq!(
        q["settings"]["paused"], false,
        "no refused post paused the queue"
    );
    assert_eq!(
        post(
            &admin_cookie,
            &[("sec-fetch-site", "same-origin")],
            form(Some(&csrf))
        )
        .await,
        StatusCode::SEE_OTHER
    );
    let (_, q) = call(&a, Some(&root), "GET", "/v1/queues/q", None).await;
    assert_eq!(q["settings"]["paused"], true);
    // The audit log names the session's token.
    let (_, audit) = call(&a, Some(&root), "GET", "/v1/audit", None).await;
    let pause = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "queue.pause")
        .unwrap();
    assert_eq!(pause["actor"], "token:root", "{audit}");
    // The session cookie alone cannot write through the API.
    let r = c
        .post(format!("{}/v1/tasks/{id}/cancel", a.base))
        .header("cookie", &admin_cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // Revoking the token ends the session.
    a.engine.token_revoke("reader").await.unwrap();
    let r = c
        .get(format!("{}/", a.base))
        .header("cookie", &read_cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
}

/// Queue setting mask_payload: read tokens and the dashboard see `***`; admins and the claiming
/// worker see the payload.
async fn masked_payloads((a, _b, _dir): (Node, Node, Option<tempfile::TempDir>)) {
    let root = admin(&a).await;
    let reader = token(&a, &root, json!({"name": "reader", "scopes": ["read"]})).await;
    let worker = token(&a, &root, json!({"name": "w", "scopes": ["work"]})).await;
    let (st, q) = call(
        &a,
        Some(&root),
        "PUT",
        "/v1/queues/secret",
        Some(json!({"mask_payload": true})),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{q}");
    assert_eq!(q["settings"]["mask_payload"], true);
    let add = |queue: &str| {
        call(
            &a,
            Some(&root),
            "POST",
            "/v1/tasks",
            Some(json!({"queue": queue, "kind": "k", "payload": {"card": "4111-1111"}})),
        )
    };
    let (_, hidden) = add("secret").await;
    let (_, open) = add("open").await;
    let hid = hidden["id"].as_i64().unwrap();
    let oid = open["id"].as_i64().unwrap();
    // The worker gets the payload it must work on, and reports a result.
    let (st, c) = call(
        &a,
        Some(&worker),
        "POST",
        "/v1/queues/secret/claim",
        Some(json!({"worker": "x"})),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(c["tasks"][0]["payload"]["card"], "4111-1111");
    let lease = c["tasks"][0]["lease"]["token"]
        .as_str()
        .unwrap()
        .to_string();
    let (st, _) = call(
        &a,
        Some(&worker),
        "POST",
        &format!("/v1/tasks/{hid}/complete"),
        Some(json!({"lease": lease, "result": {"auth": "ok-4111"}})),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    // A read token sees neither payload nor result of the masked queue; the other queue's it does.
    let (_, t) = call(&a, Some(&reader), "GET", &format!("/v1/tasks/{hid}"), None).await;
    assert_eq!(
        (t["payload"].clone(), t["result"].clone()),
        (json!("***"), json!("***")),
        "{t}"
    );
    let (_, t) = call(&a, Some(&reader), "GET", &format!("/v1/tasks/{oid}"), None).await;
    assert_eq!(t["payload"]["card"], "4111-1111");
    let (_, page) = call(&a, Some(&reader), "GET", "/v1/tasks?queue=secret", None).await;
    assert!(!page.to_string().contains("4111"), "{page}");
    // An admin sees it all through the API; the dashboard masks for everyone.
    let (_, t) = call(&a, Some(&root), "GET", &format!("/v1/tasks/{hid}"), None).await;
    assert_eq!(t["result"]["auth"], "ok-4111");
    let html = http()
        .get(format!("{}/ui/tasks/{hid}", a.base))
        .bearer_auth(&root)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(html.contains("Payload") && !html.contains("4111"), "{html}");
}

/// A server on a loopback address answers only requests addressed to a loopback name, so a
/// DNS-rebinding page (evil.example resolving to 127.0.0.1) cannot read it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_host_names_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let store = connect(&ConnectOptions::new(url)).await.unwrap();
    store.migrate().await.unwrap();
    let engine = Engine::new(
        store.clone(),
        Arc::new(SystemClock),
        EngineConfig::new("h", &*store),
    );
    let stop = CancellationToken::new();
    engine.start(stop.clone()).await.unwrap();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let state = AppState::new(engine, stop.clone()).with_allowed_hosts(vec![
        "127.0.0.1".into(),
        "localhost".into(),
        "::1".into(),
    ]);
    tokio::spawn(docket_server::serve(l, state));
    let get = |host: &str| {
        http()
            .get(format!("http://127.0.0.1:{port}/v1/tasks"))
            .header("host", host)
            .send()
    };
    for ok in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "LOCALHOST".into(),
    ] {
        assert_eq!(get(&ok).await.unwrap().status(), StatusCode::OK, "{ok}");
    }
    for bad in [
        format!("evil.example:{port}"),
        "evil.example".into(),
        "127.0.0.2".into(),
    ] {
        let r = get(&bad).await.unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "{bad}");
        let v: Value = r.json().await.unwrap();
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains("rebinding"),
            "{v}"
        );
    }
    stop.cancel();
}

macro_rules! both {
    ($($name:ident),* $(,)?) => {
        mod on_pg { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name(super::pg().await).await; } )* }
        mod on_sqlite { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name(super::sqlite().await).await; } )* }
    };
}

both!(
    tokens_scopes_and_revocation,
    dashboard_login_and_csrf,
    masked_payloads
);
