//! The dashboard, served at `/`: server-rendered HTML (maud), readable with JavaScript off.
//! With JavaScript, the vendored htmx and its SSE extension (embedded in the binary) refresh
//! the live part of a page whenever the engine's change feed ticks — one server-sent event
//! stream per browser, no polling of the database while nothing changes.
//!
//! Actions (cancel, retry, run now, pause/resume a queue, repair a process) go through a
//! confirmation page and then the same code as the API ([`crate::actions`]), which records
//! them in the audit log.

use crate::actions::{self, TaskAction};
use crate::auth::{CanAct, Csrf, CSRF_FIELD};
use crate::error::ApiError;
use crate::AppState;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Extension, Router};
use docket_core::process::{Direction, HistoryRange, ProcessStatus};
use docket_core::{Task, TaskState, Timestamp};
use docket_store::TaskListParams;
use maud::{html, Markup, DOCTYPE};
use serde::Deserialize;
use serde_json::Value;

const HTMX: &[u8] = include_bytes!("../assets/htmx-2.0.11.min.js");
const HTMX_SSE: &[u8] = include_bytes!("../assets/htmx-ext-sse-2.2.4.min.js");

/// Rows per list page.
const PAGE: i64 = 50;

/// The dashboard's routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(overview))
        .route("/ui/tasks", get(tasks))
        .route("/ui/tasks/{id}", get(task))
        .route("/ui/tasks/{id}/{action}", get(task_confirm).post(task_act))
        .route(
            "/ui/queues/{queue}/{action}",
            get(queue_confirm).post(queue_act),
        )
        .route("/ui/processes", get(processes))
        .route("/ui/processes/{ns}/{id}", get(process))
        .route(
            "/ui/processes/{ns}/{id}/repair",
            get(repair_confirm).post(repair_act),
        )
        .route("/ui/schedules", get(schedules))
        .route("/ui/audit", get(audit))
        .route("/ui/events", get(events))
        .route("/ui/assets/{file}", get(asset))
        .route(
            "/ui/login",
            get(crate::auth::login_page).post(crate::auth::login),
        )
        .route("/ui/logout", get(crate::auth::logout))
        .layer(axum::middleware::map_response(no_store))
        .layer(axum::middleware::map_response(
            crate::auth::security_headers,
        ))
}

/// Live pages must not go to the back/forward cache: a cached page keeps its event stream
/// open, and a browser has only six connections per host.
async fn no_store(mut r: Response) -> Response {
    let h = r.headers_mut();
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(
            header::CACHE_CONTROL,
            header::HeaderValue::from_static("no-store"),
        );
    }
    r
}

const CLOSE_ON_LEAVE: &str = "addEventListener('pagehide',function(){htmx.trigger(document.body,'htmx:beforeCleanupElement')})";

const STYLE: &str = "
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:.6em 1.2em;display:flex;gap:1.4em;align-items:center}
header a{color:#cfd6e4;text-decoration:none}header a:hover{color:#fff}header b{font-size:1.1em;color:#fff}
main{padding:1em 1.2em}h1{font-size:1.3em;margin:.2em 0 .6em}h2{font-size:1.05em;margin:1.2em 0 .4em}
table{border-collapse:collapse;background:#fff;min-width:40%}th,td{padding:.3em .7em;border-bottom:1px solid #e3e6eb;text-align:left;vertical-align:top}
th{background:#eef0f4;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
.st{padding:.05em .45em;border-radius:.3em;font-size:.9em;background:#e3e6eb}
.st-completed,.st-running_{background:#d3f2dc}.st-running{background:#d6e6ff}.st-available{background:#fff2c7}
.st-discarded,.st-error{background:#ffd9d6}.st-cancelled{background:#e9e3f7}.st-retryable{background:#ffe6c7}
pre{background:#fff;border:1px solid #e3e6eb;padding:.6em;overflow:auto;max-height:24em}
form.f{display:flex;gap:.5em;align-items:end;margin-bottom:.8em;flex-wrap:wrap}label{display:flex;flex-direction:column;font-size:.85em}
input,select,button{font:inherit;padding:.25em .4em}button,.btn{background:#1d2330;color:#fff;border:0;border-radius:.3em;padding:.35em .8em;text-decoration:none;cursor:pointer}
.btn.warn,button.warn{background:#b3261e}dl{display:grid;grid-template-columns:max-content 1fr;gap:.2em 1em;background:#fff;padding:.8em;border:1px solid #e3e6eb}
dt{color:#5b6476}dd{margin:0}.muted{color:#5b6476}.err{color:#b3261e}.actions{display:flex;gap:.5em;margin:.6em 0}
";

fn layout(title: &str, live_url: &str, body: Markup) -> Markup {
    layout_with_top(title, live_url, html! {}, body)
}

fn state_badge(s: &str) -> Markup {
    html! { span class=(format!("st st-{s}")) { (s) } }
}

fn ts(t: Timestamp) -> String {
    t.format("%Y-%m-%d %H:%M:%S").to_string()
}

fn ago(now: Timestamp, t: Timestamp) -> String {
    let s = (now - t).num_seconds();
    let (v, u) = match s.abs() {
        a if a < 120 => (a, "s"),
        a if a < 7200 => (a / 60, "min"),
        a if a < 172_800 => (a / 3600, "h"),
        a => (a / 86400, "d"),
    };
    if s >= 0 {
        format!("{v} {u} ago")
    } else {
        format!("in {v} {u}")
    }
}

fn json_block(v: &Value) -> Markup {
    html! { pre { (serde_json::to_string_pretty(v).unwrap_or_default()) } }
}

fn error_page(e: ApiError) -> Response {
    let status = e.status;
    let body = layout(
        "Error",
        "",
        html! {
            h1 { "Error" }
            p class="err" { (e.code) ": " (e.message) }
            p { a href="javascript:history.back()" { "Back" } }
        },
    );
    (status, body).into_response()
}

type Page = Result<Markup, Response>;

fn fail(e: impl Into<ApiError>) -> Response {
    error_page(e.into())
}

/// An SVG bar chart of completed (green) and failed (red) tasks per minute, last hour.
fn throughput_chart(now: Timestamp, rows: &[docket_store::Throughput]) -> Markup {
    let start = docket_core::time::sub(now, std::time::Duration::from_secs(3600));
    let mut bins = [(0i64, 0i64); 60];
    for r in rows {
        let i = (r.minute - start).num_minutes();
        if (0..60).contains(&i) {
            bins[i as usize].0 += r.completed;
            bins[i as usize].1 += r.failed;
        }
    }
    let max = bins.iter().map(|(c, f)| c + f).max().unwrap_or(0).max(1) as f64;
    let total_c: i64 = bins.iter().map(|b| b.0).sum();
    let total_f: i64 = bins.iter().map(|b| b.1).sum();
    let (w, h) = (600.0, 80.0);
    html! {
        svg id="throughput" width=(w) height=(h + 14.0) viewBox=(format!("0 0 {w} {}", h + 14.0)) role="img"
            aria-label=(format!("{total_c} completed, {total_f} failed in the last hour")) {
            rect x="0" y="0" width=(w) height=(h) fill="#fff" stroke="#e3e6eb" {}
            @for (i, (c, f)) in bins.iter().enumerate() {
                @let x = i as f64 * 10.0 + 1.0;
                @let hc = *c as f64 / max * (h - 4.0);
                @let hf = *f as f64 / max * (h - 4.0);
                rect x=(x) y=(h - hc) width="8" height=(hc) fill="#3a9b5c" { title { (format!("{c} completed")) } }
                rect x=(x) y=(h - hc - hf) width="8" height=(hf) fill="#c8443a" { title { (format!("{f} failed")) } }
            }
            text x="0" y=(h + 12.0) font-size="10" fill="#5b6476" { "−60 min" }
            text x=(w - 30.0) y=(h + 12.0) font-size="10" fill="#5b6476" { "now" }
        }
        p class="muted" { (total_c) " completed, " (total_f) " failed (discarded) in the last hour; peak " (max as i64) "/min" }
    }
}

async fn overview(State(s): State<AppState>, Extension(act): Extension<CanAct>) -> Page {
    let now = s.engine.clock.now();
    let engine = &s.engine;
    let queues = engine.queue_list().await.map_err(fail)?;
    let oldest = engine.queue_oldest_available().await.map_err(fail)?;
    let nodes = engine.node_list().await.map_err(fail)?;
    let through = engine
        .task_throughput(docket_core::time::sub(
            now,
            std::time::Duration::from_secs(3600),
        ))
        .await
        .map_err(fail)?;
    let schedules = engine.schedule_list().await.map_err(fail)?;
    let states = [
        TaskState::Scheduled,
        TaskState::Available,
        TaskState::Running,
        TaskState::Retryable,
        TaskState::Completed,
        TaskState::Discarded,
        TaskState::Cancelled,
    ];
    Ok(layout(
        "Overview",
        "/",
        html! {
            h1 { "Overview" }
            h2 { "Queues" }
            @if queues.is_empty() { p class="muted" { "No queues yet: enqueue a task." } }
            @else {
                table id="queues" {
                    tr {
                        th { "queue" } th { "state" }
                        @for st in &states { th { (st.as_str()) } }
                        th { "oldest available" } th {}
                    }
                    @for q in &queues {
                        tr data-queue=(q.name) {
                            td { a href=(format!("/ui/tasks?queue={}", urlencode(&q.name))) { (q.name) } }
                            td { @if q.settings.paused { (state_badge("paused")) } @else { "active" } }
                            @for st in &states {
                                td class="n" {
                                    @let n = q.counts.get(st).copied().unwrap_or(0);
                                    @if n > 0 { a href=(format!("/ui/tasks?queue={}&state={}", urlencode(&q.name), st.as_str())) { (n) } } @else { span class="muted" { "0" } }
                                }
                            }
                            td {
                                @match oldest.iter().find(|o| o.queue == q.name) {
                                    Some(o) => (ago(now, o.run_at)),
                                    None => span class="muted" { "—" },
                                }
                            }
                            td {
                                @if !act.0 {
                                } @else if q.settings.paused {
                                    a class="btn" href=(format!("/ui/queues/{}/resume", urlencode(&q.name))) { "Resume" }
                                } @else {
                                    a class="btn warn" href=(format!("/ui/queues/{}/pause", urlencode(&q.name))) { "Pause" }
                                }
                            }
                        }
                    }
                }
            }
            h2 { "Throughput, last hour" }
            (throughput_chart(now, &through))
            h2 { "Nodes" }
            table id="nodes" {
                tr { th { "node" } th { "state" } th { "last heartbeat" } th { "started" } th { "version" } }
                @for n in &nodes {
                    @let state = crate::node_state(&s, n);
                    tr {
                        td { (n.name) } td { (state_badge(state)) }
                        td { (ago(now, n.heartbeat_at)) } td { (ts(n.started_at)) } td { (n.version) }
                    }
                }
            }
            h2 { "Schedules" }
            p { (schedules.len()) " schedules, " (schedules.iter().filter(|s| s.paused).count()) " paused — "
                a href="/ui/schedules" { "see them and the pg_task tables" } }
        },
    ))
}

#[derive(Deserialize, Default)]
struct TaskFilter {
    queue: Option<String>,
    kind: Option<String>,
    state: Option<String>,
    text: Option<String>,
    after: Option<i64>,
}

fn some(v: &Option<String>) -> Option<String> {
    v.as_ref()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

async fn tasks(State(s): State<AppState>, Query(f): Query<TaskFilter>) -> Page {
    let now = s.engine.clock.now();
    // Several states (`running,retryable`); one that names no known state matches nothing.
    let (states, none) = match some(&f.state) {
        None => (vec![], false),
        Some(st) => match docket_core::state::parse_filter(&st) {
            Some(v) => (v, false),
            None => (vec![], true),
        },
    };
    let list = if none {
        vec![]
    } else {
        s.engine
            .task_list(TaskListParams {
                queue: some(&f.queue),
                kind: some(&f.kind),
                states,
                text: some(&f.text),
                after: f.after,
                descending: true,
                limit: PAGE,
                ..Default::default()
            })
            .await
            .map_err(fail)?
    };
    let qs = |after: Option<i64>| {
        let mut p = vec![];
        for (k, v) in [
            ("queue", some(&f.queue)),
            ("kind", some(&f.kind)),
            ("state", some(&f.state)),
            ("text", some(&f.text)),
        ] {
            if let Some(v) = v {
                p.push(format!("{k}={}", urlencode(&v)));
            }
        }
        if let Some(a) = after {
            p.push(format!("after={a}"));
        }
        if p.is_empty() {
            String::new()
        } else {
            format!("?{}", p.join("&"))
        }
    };
    let here = format!("/ui/tasks{}", qs(f.after));
    let form = html! {
        form class="f" method="get" action="/ui/tasks" id="filter" {
            label { "queue" input name="queue" value=(some(&f.queue).unwrap_or_default()); }
            label { "kind" input name="kind" value=(some(&f.kind).unwrap_or_default()); }
            label { "state"
                select name="state" {
                    option value="" { "any" }
                    @for st in ["scheduled", "available", "running", "retryable", "completed", "discarded", "cancelled"] {
                        option value=(st) selected[some(&f.state).as_deref() == Some(st)] { (st) }
                    }
                }
            }
            label { "text in payload or errors" input name="text" value=(some(&f.text).unwrap_or_default()); }
            button type="submit" { "Filter" }
        }
    };
    let body = html! {
        h1 { "Tasks" }
        table id="tasks" {
            tr { th { "id" } th { "queue" } th { "kind" } th { "state" } th { "attempt" } th { "run at" } th { "last error" } }
            @for t in &list {
                tr data-id=(t.id) {
                    td { a href=(format!("/ui/tasks/{}", t.id)) { (t.id) } }
                    td { (t.queue) } td { (t.kind) } td { (state_badge(t.state.as_str())) }
                    td class="n" { (t.attempt) "/" (t.max_attempts) }
                    td { (ago(now, t.run_at)) }
                    td class="err" { (t.errors.last().map(|e| short(&e.message, 80)).unwrap_or_default()) }
                }
            }
        }
        @if list.is_empty() { p class="muted" { "No tasks match." } }
        @if list.len() as i64 == PAGE {
            p { a href=(format!("/ui/tasks{}", qs(list.last().map(|t| t.id)))) { "Older →" } }
        }
    };
    // The filter form stays outside the live part, so a refresh never eats what is typed.
    Ok(layout_with_top("Tasks", &here, form, body))
}

/// A page: `top` (a filter form, say) above the live region, so a refresh never eats what is
/// typed there; `body` is the live region, re-fetched from `live_url` on each change.
fn layout_with_top(title: &str, live_url: &str, top: Markup, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " — docket" }
                style { (maud::PreEscaped(STYLE)) }
                script src="/ui/assets/htmx.min.js" {}
                script src="/ui/assets/sse.min.js" {}
                // Close the page's event stream when it is left, so it never holds one of the
                // browser's six connections per host (back/forward cache).
                script src="/ui/assets/close.js" {}
            }
            body hx-ext="sse" sse-connect="/ui/events" {
                header {
                    b { "docket" }
                    a href="/" { "Overview" }
                    a href="/ui/tasks" { "Tasks" }
                    a href="/ui/processes" { "Processes" }
                    a href="/ui/schedules" { "Schedules" }
                    a href="/ui/audit" { "Audit" }
                    a href="/metrics" { "Metrics" }
                    a href="/ui/logout" class="right" { "Log out" }
                }
                @if !top.0.is_empty() { div style="padding:1em 1.2em 0" { (top) } }
                main id="live" hx-get=(live_url) hx-trigger="sse:changed" hx-select="#live" hx-swap="outerHTML" {
                    (body)
                }
            }
        }
    }
}

fn short(s: &str, n: usize) -> String {
    let line = s.lines().next().unwrap_or("");
    if line.chars().count() > n {
        format!("{}…", line.chars().take(n).collect::<String>())
    } else {
        line.to_string()
    }
}

fn urlencode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn task_actions(t: &Task) -> Vec<TaskAction> {
    let mut v = vec![];
    if !t.state.is_finished() {
        v.push(TaskAction::Cancel);
    }
    if matches!(t.state, TaskState::Scheduled | TaskState::Retryable) {
        v.push(TaskAction::RunNow);
    }
    if matches!(
        t.state,
        TaskState::Discarded | TaskState::Cancelled | TaskState::Completed
    ) {
        v.push(TaskAction::Retry);
    }
    v
}

async fn task(
    State(s): State<AppState>,
    Extension(act): Extension<CanAct>,
    Path(id): Path<i64>,
) -> Page {
    let now = s.engine.clock.now();
    let t = s
        .engine
        .task_get(id)
        .await
        .map_err(fail)?
        .ok_or_else(|| fail(ApiError::not_found(format!("task {id} not found"))))?;
    let mut t = t;
    crate::auth::mask_tasks(&s, [&mut t]).await.map_err(fail)?;
    let schedule = t
        .unique_key
        .as_deref()
        .and_then(|k| k.strip_prefix("schedule:"))
        .and_then(|rest| rest.split(':').next())
        .map(str::to_string);
    let process = t
        .queue
        .strip_prefix("process:")
        .and(t.concurrency_key.as_deref())
        .and_then(|k| k.split_once(':'))
        .map(|(ns, pid)| (ns.to_string(), pid.to_string()));
    let opt = |v: Option<Timestamp>| v.map(ts).unwrap_or_else(|| "—".into());
    Ok(layout(
        &format!("Task {id}"),
        &format!("/ui/tasks/{id}"),
        html! {
            h1 { "Task " (t.id) " " (state_badge(t.state.as_str())) }
            div class="actions" {
                @for a in task_actions(&t).into_iter().filter(|_| act.0) {
                    a class=(if a == TaskAction::Cancel { "btn warn" } else { "btn" }) id=(format!("action-{}", a.as_str()))
                        href=(format!("/ui/tasks/{id}/{}", a.as_str())) { (action_label(a)) }
                }
            }
            dl id="fields" {
                dt { "queue" } dd { a href=(format!("/ui/tasks?queue={}", urlencode(&t.queue))) { (t.queue) } }
                dt { "kind" } dd { (t.kind) }
                dt { "state" } dd id="state" { (t.state.as_str()) }
                dt { "priority" } dd { (t.priority) }
                dt { "attempt" } dd { (t.attempt) " of " (t.max_attempts) }
                dt { "run at" } dd { (ts(t.run_at)) " (" (ago(now, t.run_at)) ")" }
                dt { "expires at" } dd { (opt(t.expires_at)) }
                dt { "timeout" } dd { (humantime::format_duration(t.timeout)) }
                dt { "backoff" } dd { (serde_json::to_string(&t.backoff).unwrap_or_default()) }
                dt { "unique key" } dd { (t.unique_key.clone().unwrap_or_else(|| "—".into())) }
                dt { "concurrency key" } dd { (t.concurrency_key.clone().unwrap_or_else(|| "—".into())) @if let Some(l) = t.concurrency_limit { " (limit " (l) ")" } }
                dt { "node" } dd { (t.node.clone().unwrap_or_else(|| "any".into())) }
                dt { "worker" } dd { (t.worker.clone().unwrap_or_else(|| "—".into())) }
                dt { "trace id" } dd { code { (t.trace_id.clone().unwrap_or_else(|| "—".into())) } }
                dt { "created" } dd { (ts(t.created_at)) }
                dt { "attempted" } dd { (opt(t.attempted_at)) }
                dt { "finished" } dd { (opt(t.finished_at)) }
                dt { "lease expires" } dd { (opt(t.lease_expires_at)) }
                dt { "cancel requested" } dd { (opt(t.cancel_requested_at)) }
                @if let Some(name) = &schedule {
                    dt { "schedule" } dd { a href=(format!("/ui/schedules#schedule-{}", urlencode(name))) { (name) } }
                }
                @if let Some((ns, pid)) = &process {
                    dt { "process" } dd { a href=(format!("/ui/processes/{}/{}", urlencode(ns), urlencode(pid))) { (ns) "/" (pid) } }
                }
            }
            h2 { "Payload" } (json_block(&t.payload))
            @if let Some(r) = &t.result { h2 { "Result" } (json_block(r)) }
            @if let Some(p) = &t.progress { h2 { "Progress" } (json_block(p)) }
            h2 { "Attempts and errors" }
            @if t.errors.is_empty() { p class="muted" { "No failed attempts." } }
            @else {
                table id="errors" {
                    tr { th { "attempt" } th { "at" } th { "ran" } th { "worker" } th { "error" } }
                    @for e in &t.errors {
                        tr { td class="n" { (e.attempt) } td { (ts(e.at)) }
                             td class="n" { (e.duration_ms.map(|d| format!("{d} ms")).unwrap_or_default()) }
                             td { (e.worker.clone().unwrap_or_default()) } td { pre { (e.message) } } }
                    }
                }
            }
        },
    ))
}

fn action_label(a: TaskAction) -> &'static str {
    match a {
        TaskAction::Cancel => "Cancel",
        TaskAction::Retry => "Retry",
        TaskAction::RunNow => "Run now",
    }
}

fn confirm(
    csrf: &Csrf,
    title: &str,
    question: Markup,
    action_url: &str,
    yes: &str,
    back: &str,
) -> Markup {
    layout(
        title,
        "",
        html! {
            h1 { (title) }
            p { (question) }
            form method="post" action=(action_url) class="actions" {
                input type="hidden" name=(CSRF_FIELD) value=(csrf.0);
                button type="submit" class="warn" id="confirm" { (yes) }
                a href=(back) { "No, go back" }
            }
        },
    )
}

async fn task_confirm(
    State(s): State<AppState>,
    Extension(csrf): Extension<Csrf>,
    Path((id, action)): Path<(i64, String)>,
) -> Page {
    let a = TaskAction::parse(&action)
        .ok_or_else(|| fail(ApiError::not_found(format!("no action {action:?}"))))?;
    let t = s
        .engine
        .task_get(id)
        .await
        .map_err(fail)?
        .ok_or_else(|| fail(ApiError::not_found(format!("task {id} not found"))))?;
    Ok(confirm(
        &csrf,
        &format!("{} task {id}?", action_label(a)),
        html! { (action_label(a)) " task " b { (id) } " (" (t.kind) " in " (t.queue) ", " (t.state.as_str()) ")?" },
        &format!("/ui/tasks/{id}/{action}"),
        &format!("Yes, {}", action_label(a).to_lowercase()),
        &format!("/ui/tasks/{id}"),
    ))
}

fn dashboard_actor(headers: &HeaderMap) -> String {
    actions::actor(headers, "dashboard")
}

async fn task_act(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path((id, action)): Path<(i64, String)>,
) -> Response {
    let Some(a) = TaskAction::parse(&action) else {
        return fail(ApiError::not_found(format!("no action {action:?}")));
    };
    match actions::task(&s, &dashboard_actor(&headers), id, a).await {
        Ok(_) => Redirect::to(&format!("/ui/tasks/{id}")).into_response(),
        Err(e) => error_page(e),
    }
}

/// `pause` → true, `resume` → false.
fn queue_action(action: &str) -> Option<bool> {
    match action {
        "pause" => Some(true),
        "resume" => Some(false),
        _ => None,
    }
}

fn no_action(action: &str) -> Response {
    fail(ApiError::not_found(format!("no action {action:?}")))
}

async fn queue_confirm(
    Extension(csrf): Extension<Csrf>,
    Path((queue, action)): Path<(String, String)>,
) -> Page {
    let paused = queue_action(&action).ok_or_else(|| no_action(&action))?;
    let verb = if paused { "Pause" } else { "Resume" };
    Ok(confirm(
        &csrf,
        &format!("{verb} queue {queue}?"),
        html! { (verb) " queue " b { (queue) } "? " @if paused { "Nothing of it will be claimed until it is resumed." } },
        &format!("/ui/queues/{}/{action}", urlencode(&queue)),
        &format!("Yes, {}", verb.to_lowercase()),
        "/",
    ))
}

async fn queue_act(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path((queue, action)): Path<(String, String)>,
) -> Response {
    let Some(paused) = queue_action(&action) else {
        return no_action(&action);
    };
    match actions::queue_paused(&s, &dashboard_actor(&headers), &queue, paused).await {
        Ok(_) => Redirect::to("/").into_response(),
        Err(e) => error_page(e),
    }
}

#[derive(Deserialize, Default)]
struct ProcessFilter {
    ns: Option<String>,
    status: Option<String>,
    after: Option<String>,
}

async fn processes(State(s): State<AppState>, Query(f): Query<ProcessFilter>) -> Page {
    let namespaces: Vec<String> = s
        .processes
        .namespaces()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let ns = some(&f.ns).or_else(|| namespaces.first().cloned());
    let status = match some(&f.status) {
        None => None,
        Some(st) => Some(
            ProcessStatus::parse(&st)
                .ok_or_else(|| fail(ApiError::invalid(format!("unknown status {st:?}"))))?,
        ),
    };
    let list = match &ns {
        Some(ns) => s
            .processes
            .list(ns, status, some(&f.after).as_deref(), PAGE)
            .await
            .map_err(fail)?,
        None => vec![],
    };
    let now = s.engine.clock.now();
    let here = format!(
        "/ui/processes?ns={}&status={}",
        urlencode(&ns.clone().unwrap_or_default()),
        some(&f.status).unwrap_or_default()
    );
    let form = html! {
        form class="f" method="get" action="/ui/processes" {
            label { "namespace"
                select name="ns" {
                    @for n in &namespaces { option value=(n) selected[ns.as_deref() == Some(n.as_str())] { (n) } }
                }
            }
            label { "status"
                select name="status" {
                    option value="" { "any" }
                    @for st in ["init", "running", "error"] {
                        option value=(st) selected[some(&f.status).as_deref() == Some(st)] { (st) }
                    }
                }
            }
            button type="submit" { "Filter" }
        }
    };
    let body = html! {
        h1 { "Processes" }
        @if namespaces.is_empty() { p class="muted" { "No namespaces: add one in the config file or with PUT /v1/namespaces/{ns}." } }
        table id="processes" {
            tr { th { "id" } th { "status" } th { "detail" } th { "events" } th { "status changed" } }
            @for p in &list {
                tr {
                    td { a href=(format!("/ui/processes/{}/{}", urlencode(&p.namespace), urlencode(&p.id))) { (p.id) } }
                    td { (state_badge(p.status.as_str())) }
                    td class="err" { (p.detail.as_deref().map(|d| short(d, 80)).unwrap_or_default()) }
                    td class="n" { (p.last_event_id) }
                    td { (ago(now, p.status_changed_at)) }
                }
            }
        }
        @if list.len() as i64 == PAGE {
            p { a href=(format!("{here}&after={}", urlencode(&list.last().map(|p| p.id.clone()).unwrap_or_default()))) { "Next →" } }
        }
    };
    Ok(layout_with_top("Processes", &here, form, body))
}

#[derive(Deserialize, Default)]
struct HistoryQuery {
    after: Option<i64>,
}

async fn process(
    State(s): State<AppState>,
    Path((ns, id)): Path<(String, String)>,
    Query(q): Query<HistoryQuery>,
    Extension(act): Extension<CanAct>,
) -> Page {
    let (p, events) = s
        .processes
        .get(
            &ns,
            &id,
            HistoryRange {
                offset: q.after,
                limit: Some(PAGE),
                direction: Direction::Forward,
            },
        )
        .await
        .map_err(fail)?;
    let trace = s.processes.trace(&ns, &id).await.map_err(fail)?;
    let now = s.engine.clock.now();
    let here = format!("/ui/processes/{}/{}", urlencode(&ns), urlencode(&id));
    Ok(layout(
        &format!("Process {ns}/{id}"),
        &here,
        html! {
            h1 { "Process " (ns) "/" (id) " " (state_badge(p.status.as_str())) }
            @if p.status == ProcessStatus::Error && act.0 {
                div class="actions" { a class="btn warn" id="action-repair" href=(format!("{here}/repair")) { "Repair (simple-repair)" } }
            }
            dl {
                dt { "status" } dd { (p.status.as_str()) @if let Some(prev) = p.previous_status { span class="muted" { " (was " (prev.as_str()) ")" } } }
                dt { "status changed" } dd { (ts(p.status_changed_at)) " (" (ago(now, p.status_changed_at)) ")" }
                dt { "detail" } dd class="err" { (p.detail.clone().unwrap_or_else(|| "—".into())) }
                dt { "corrupted by" } dd { @match p.corrupted_by { Some(t) => a href=(format!("/ui/tasks/{t}")) { "task " (t) }, None => "—" } }
                dt { "created" } dd { (ts(p.created_at)) }
                dt { "events" } dd { (p.last_event_id) }
            }
            h2 { "Aux state" } (json_block(&p.aux_state))
            h2 { "Metadata" } (json_block(&p.metadata))
            h2 { "History" }
            table id="history" {
                tr { th { "event" } th { "at" } th { "task" } th { "payload" } }
                @for e in &events {
                    tr {
                        td class="n" { (e.event_id) } td { (ts(e.timestamp)) }
                        td { @if let Some(t) = e.task_id { a href=(format!("/ui/tasks/{t}")) { (t) } } }
                        td { pre { (serde_json::to_string(&e.payload).unwrap_or_default()) } }
                    }
                }
            }
            @if events.len() as i64 == PAGE {
                p { a href=(format!("{here}?after={}", events.last().map_or(0, |e| e.event_id))) { "Later events →" } }
            }
            h2 { "Tasks (trace)" }
            table id="trace" {
                tr { th { "task" } th { "kind" } th { "state" } th { "attempt" } th { "events" } th { "last error" } }
                @for t in &trace {
                    tr {
                        td { a href=(format!("/ui/tasks/{}", t.task.id)) { (t.task.id) } }
                        td { (t.task.kind) }
                        td { (state_badge(t.task.state.as_str())) }
                        td class="n" { (t.task.attempt) }
                        td class="n" { (t.events.len()) }
                        td class="err" { (t.task.errors.last().map(|e| short(&e.message, 60)).unwrap_or_default()) }
                    }
                }
            }
        },
    ))
}

async fn repair_confirm(
    Extension(csrf): Extension<Csrf>,
    Path((ns, id)): Path<(String, String)>,
) -> Markup {
    confirm(
        &csrf,
        &format!("Repair process {ns}/{id}?"),
        html! { "Put process " b { (ns) "/" (id) } " back to running without calling the processor (simple-repair)?" },
        &format!("/ui/processes/{}/{}/repair", urlencode(&ns), urlencode(&id)),
        "Yes, repair",
        &format!("/ui/processes/{}/{}", urlencode(&ns), urlencode(&id)),
    )
}

async fn repair_act(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path((ns, id)): Path<(String, String)>,
) -> Response {
    match actions::process_repair(&s, &dashboard_actor(&headers), &ns, &id).await {
        Ok(()) => Redirect::to(&format!(
            "/ui/processes/{}/{}",
            urlencode(&ns),
            urlencode(&id)
        ))
        .into_response(),
        Err(e) => error_page(e),
    }
}

async fn schedules(State(s): State<AppState>) -> Page {
    let now = s.engine.clock.now();
    let list = s.engine.schedule_list().await.map_err(fail)?;
    let mut tables = vec![];
    for v in s.pg_tasks.iter() {
        tables.push((v.name().to_string(), v.summary(5).await));
    }
    Ok(layout(
        "Schedules",
        "/ui/schedules",
        html! {
            h1 { "Schedules" }
            @if list.is_empty() { p class="muted" { "No schedules: docket schedule add NAME --every 5m --kind K" } }
            @else {
                table id="schedules" {
                    tr { th { "name" } th { "when" } th { "task" } th { "state" } th { "next run" } th { "last run" } th { "last task" } }
                    @for sc in &list {
                        tr id=(format!("schedule-{}", sc.spec.name)) {
                            td { (sc.spec.name) }
                            td { @if let Some(e) = sc.spec.every { "every " (humantime::format_duration(e)) @if sc.spec.drift { " (drift)" } }
                                 @if let Some(c) = &sc.spec.cron { "cron " code { (c) } " " (sc.spec.timezone.clone().unwrap_or_else(|| "UTC".into())) } }
                            td { (sc.spec.task.kind) " in " (sc.spec.task.queue_name()) }
                            td { @if sc.paused { (state_badge("paused")) } @else { "active" } }
                            td { (ts(sc.next_run_at)) " (" (ago(now, sc.next_run_at)) ")" }
                            td { (sc.last_run_at.map(|t| ago(now, t)).unwrap_or_else(|| "never".into())) }
                            td { @if let Some(t) = sc.last_task_id { a href=(format!("/ui/tasks/{t}")) { (t) } } }
                        }
                    }
                }
            }
            h1 { "pg_task tables" }
            @if tables.is_empty() { p class="muted" { "This node serves no pg_task table (docket serve --pg-task URL)." } }
            @for (name, summary) in &tables {
                h2 { (name) }
                @match summary {
                    Err(e) => p class="err" { "cannot read it: " (e) },
                    Ok(sum) => {
                        p { @for (st, n) in &sum.counts { (state_badge(st)) " " (n) "  " } }
                        table {
                            tr { th { "next planned" } th { "group" } th { "input" } th { "plan" } }
                            @for r in &sum.next { tr { td { (r.id) } td { (r.group) } td { code { (short(&r.input, 80)) } } td { (ago(now, r.plan)) } } }
                        }
                        table style="margin-top:.6em" {
                            tr { th { "last finished" } th { "group" } th { "state" } th { "input" } th { "stop" } th { "error" } }
                            @for r in &sum.last { tr { td { (r.id) } td { (r.group) } td { (state_badge(&r.state)) } td { code { (short(&r.input, 60)) } }
                                td { (r.stop.map(|t| ago(now, t)).unwrap_or_default()) } td class="err" { (r.error.clone().unwrap_or_default()) } } }
                        }
                    }
                }
            }
        },
    ))
}

async fn audit(State(s): State<AppState>) -> Page {
    let entries = s.engine.audit_list(200).await.map_err(fail)?;
    Ok(layout(
        "Audit",
        "/ui/audit",
        html! {
            h1 { "Audit log" }
            p class="muted" { "Every action taken through the dashboard, the CLI or the API: who, when, what." }
            table id="audit" {
                tr { th { "when" } th { "who" } th { "action" } th { "target" } th { "detail" } }
                @for e in &entries {
                    tr { td { (ts(e.at)) } td { (e.actor) } td { (e.action) } td { (e.target) }
                         td { (e.detail.as_ref().map(|d| d.to_string()).unwrap_or_default()) } }
                }
            }
        },
    ))
}

/// One `changed` event per burst of engine changes (at most about 3 a second), for htmx to
/// refresh the page's live part; also served as `GET /v1/changes` for other clients
/// (`docket task watch`).
#[utoipa::path(
    get, path = "/v1/changes",
    tag = "status",
    responses((status = 200, description = "text/event-stream", content_type = "text/event-stream", body = crate::openapi::SseEvent)),
    summary = "Server-sent events: `changed` whenever tasks changed (debounced, no payload)"
)]
pub async fn changes(
    State(s): State<AppState>,
    caller: Option<axum::Extension<docket_engine::auth::Caller>>,
) -> Response {
    events(State(s), caller).await
}

async fn events(
    State(s): State<AppState>,
    caller: Option<axum::Extension<docket_engine::auth::Caller>>,
) -> Response {
    use axum::response::sse::{Event, KeepAlive, Sse};
    let slot = match crate::auth::long_poll(&s, caller.as_ref().map(|c| &c.0)) {
        Ok(slot) => slot,
        Err(e) => return e.into_response(),
    };
    let rx = s.engine.waker.changes();
    let stop = s.shutdown.clone();
    let stream = futures::stream::unfold((rx, stop, slot), |(mut rx, stop, slot)| async move {
        use tokio::sync::broadcast::error::RecvError;
        tokio::select! {
            _ = stop.cancelled() => return None,
            r = rx.recv() => if let Err(RecvError::Closed) = r { return None },
        }
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        while let Ok(()) | Err(tokio::sync::broadcast::error::TryRecvError::Lagged(_)) =
            rx.try_recv()
        {}
        Some((
            Ok::<_, std::convert::Infallible>(Event::default().event("changed").data("1")),
            (rx, stop, slot),
        ))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

async fn asset(Path(file): Path<String>) -> Response {
    let body = match file.as_str() {
        "htmx.min.js" => HTMX,
        "sse.min.js" => HTMX_SSE,
        "close.js" => CLOSE_ON_LEAVE.as_bytes(),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    (
        [
            (header::CONTENT_TYPE, "application/javascript"),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        body,
    )
        .into_response()
}

/// The login page (auth required): a token field; `error` says why the last try failed.
pub(crate) fn login_form(error: Option<&str>) -> Response {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "Log in — docket" }
                style { (maud::PreEscaped(STYLE)) }
            }
            body {
                header { b { "docket" } }
                main {
                    h1 { "Log in" }
                    @if let Some(e) = error { p class="err" id="login-error" { (e) } }
                    p { "Paste an API token (" code { "docket token create NAME --scope read" } "). A "
                        code { "read" } " token shows everything; actions need " code { "admin" } "." }
                    form method="post" action="/ui/login" class="f" {
                        input type="password" name="token" id="token" autocomplete="off" placeholder="dkt_…" required;
                        button type="submit" id="login" { "Log in" }
                    }
                }
            }
        }
    }
    .into_response()
}
