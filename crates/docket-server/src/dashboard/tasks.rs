//! Tasks: the filtered list, one task with its attempts, and the operator actions on tasks
//! and queues (each behind a confirmation page).

use super::layout::*;
use super::prelude::*;

#[derive(Deserialize, Default)]
pub(super) struct TaskFilter {
    queue: Option<String>,
    kind: Option<String>,
    state: Option<String>,
    text: Option<String>,
    user_id: Option<String>,
    trace_id: Option<String>,
    unique_key: Option<String>,
    tag: Option<String>,
    worker: Option<String>,
    after: Option<i64>,
}

pub(super) async fn tasks(
    State(s): State<AppState>,
    Extension(act): Extension<CanAct>,
    Query(f): Query<TaskFilter>,
) -> Page {
    let now = s.engine.clock.now();
    // Several states (`running,retryable`); one that names no known state matches nothing.
    let (states, none) = match some(&f.state) {
        None => (vec![], false),
        Some(st) => match docket_core::state::parse_filter(&st) {
            Some(v) => (v, false),
            None => (vec![], true),
        },
    };
    // A number in the search box is a task id: straight to its page.
    if let Some(id) = some(&f.text).and_then(|t| t.trim().parse::<i64>().ok()) {
        if s.engine.task_get(id).await.map_err(fail)?.is_some() {
            return Err(Redirect::to(&format!("/ui/tasks/{id}")).into_response());
        }
    }
    let page = if none {
        docket_core::api::TaskPage {
            tasks: vec![],
            next_after: None,
        }
    } else {
        s.engine
            .task_page(TaskListParams {
                queue: some(&f.queue),
                kind: some(&f.kind),
                states,
                text: some(&f.text),
                user_id: some(&f.user_id),
                trace_id: some(&f.trace_id).map(|t| t.to_ascii_lowercase()),
                unique_key: some(&f.unique_key),
                tag: some(&f.tag),
                worker: some(&f.worker),
                after: f.after,
                descending: true,
                limit: PAGE,
                ..Default::default()
            })
            .await
            .map_err(fail)?
    };
    let list = page.tasks;
    // The list's URL with this page's filters, another state and a cursor: the pager and the
    // state tabs share it.
    let url = |state: Option<String>, after: Option<i64>| {
        let mut p = vec![];
        for (k, v) in [
            ("queue", some(&f.queue)),
            ("kind", some(&f.kind)),
            ("state", state),
            ("text", some(&f.text)),
            ("user_id", some(&f.user_id)),
            ("trace_id", some(&f.trace_id)),
            ("unique_key", some(&f.unique_key)),
            ("tag", some(&f.tag)),
            ("worker", some(&f.worker)),
        ] {
            if let Some(v) = v {
                p.push(format!("{k}={}", urlencode(&v)));
            }
        }
        if let Some(a) = after {
            p.push(format!("after={a}"));
        }
        if p.is_empty() {
            "/ui/tasks".to_string()
        } else {
            format!("/ui/tasks?{}", p.join("&"))
        }
    };
    let here = url(some(&f.state), f.after);
    // State tabs with the queue's counts (or all queues'): the kept counts, so they cost the
    // same at 10 million finished tasks as at ten (docs/src/operations/counts.md).
    let counts: std::collections::BTreeMap<TaskState, i64> = match some(&f.queue) {
        Some(q) => s.engine.queue_get(&q).await.map_err(fail)?.counts,
        None => {
            let mut all = std::collections::BTreeMap::new();
            for q in s.engine.queue_list().await.map_err(fail)? {
                for (st, n) in q.counts {
                    *all.entry(st).or_insert(0) += n;
                }
            }
            all
        }
    };
    let tab = |state: Option<&str>| url(state.map(str::to_string), None);
    let current = some(&f.state);
    let total: i64 = counts.values().sum();
    let tabs = html! {
        nav id="state-tabs" class="tabs" aria-label="Tasks by state" {
            a href=(tab(None)) aria-current=[current.is_none().then_some("page")] { "all " span class="n" { (thousands(total)) } }
            @for st in TaskState::ALL {
                a href=(tab(Some(st.as_str()))) id=(format!("tab-{}", st.as_str()))
                    aria-current=[(current.as_deref() == Some(st.as_str())).then_some("page")] {
                    (st.as_str()) " " span class="n" { (thousands(counts.get(&st).copied().unwrap_or(0))) }
                }
            }
        }
    };
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
            label { "id, or text in payload or errors" input name="text" value=(some(&f.text).unwrap_or_default()); }
            label { "user" input name="user_id" value=(some(&f.user_id).unwrap_or_default()); }
            label { "trace id" input name="trace_id" value=(some(&f.trace_id).unwrap_or_default()); }
            label { "unique key" input name="unique_key" value=(some(&f.unique_key).unwrap_or_default()); }
            label { "tag" input name="tag" value=(some(&f.tag).unwrap_or_default()); }
            label { "worker" input name="worker" value=(some(&f.worker).unwrap_or_default()); }
            button type="submit" { "Filter" }
        }
        // Bulk actions take the filters an index serves (docket_core::bulk::BulkFilter).
        @if act.0 && some(&f.text).is_none() && some(&f.trace_id).is_none() && some(&f.worker).is_none() {
            (super::bulk::bulk_form(some(&f.queue), some(&f.kind), some(&f.state), some(&f.user_id), some(&f.unique_key), some(&f.tag)))
        }
    };
    let body = html! {
        h1 { "Tasks" }
        (tabs)
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
        @if list.is_empty() { p class="muted" { "No tasks match" @if page.next_after.is_some() { " among the newest " (thousands(docket_core::api::TEXT_SEARCH_IDS)) " tasks searched" } "." } }
        @if let Some(next) = page.next_after {
            p { a href=(url(some(&f.state), Some(next))) id="older" { "Older →" } }
        }
    };
    // The filter form stays outside the live part, so a refresh never eats what is typed.
    Ok(layout_with_top("Tasks", &here, form, body))
}

/// The actions a task's page offers: the states each action changes are the bulk actions'
/// rule ([`docket_core::bulk::BulkAction::states`]), the single-task actions' own.
pub(super) fn task_actions(t: &Task) -> Vec<TaskAction> {
    use docket_core::bulk::BulkAction;
    [
        (TaskAction::Cancel, BulkAction::Cancel),
        (TaskAction::RunNow, BulkAction::RunNow),
        (TaskAction::Retry, BulkAction::Retry),
    ]
    .into_iter()
    .filter(|(_, b)| b.states().contains(&t.state))
    .map(|(a, _)| a)
    .collect()
}

pub(super) async fn task(
    State(s): State<AppState>,
    Extension(act): Extension<CanAct>,
    headers: HeaderMap,
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
    let workflow = match t.batch_id {
        Some(b) => s.engine.workflow_get(b).await.map_err(fail)?,
        None => None,
    };
    // The server as the browser reached it, for the copy-as-curl.
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1:7070");
    let origin = format!("{}://{host}", if s.tls { "https" } else { "http" });
    let curl = super::timeline::curl(&t, &origin);
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
                @if let Some(u) = &t.user_id { dt { "user" } dd { a href=(format!("/ui/tasks?user_id={}", urlencode(u))) { (u) } } }
                @if let Some(b) = t.batch_id { dt { "batch" } dd { a href=(format!("/ui/batches/{b}")) { "batch " (b) } } }
                @if let Some(r) = &t.rate_limit { dt { "rate limit" } dd { a href="/ui/rate-limits" { (r) } } }
                @if let Some(p) = &t.partition_key { dt { "partition" } dd { (p) } }
                @if let Some(st) = &t.stage {
                    dt { "stage" } dd id="stage" {
                        @for d in &t.stages_done { (d.as_deref().unwrap_or("(first)")) " → " }
                        strong { (st) }
                    }
                }
                dt { "priority" } dd { (t.priority) }
                dt { "attempt" } dd { (t.attempt) " of " (t.max_attempts) }
                dt { "run at" } dd { (ts(t.run_at)) " (" (ago(now, t.run_at)) ")" }
                dt { "expires at" } dd { (opt(t.expires_at)) }
                dt { "timeout" } dd { (humantime::format_duration(t.timeout)) }
                dt { "backoff" } dd { (serde_json::to_string(&t.backoff).unwrap_or_default()) }
                dt { "unique key" } dd { (t.unique_key.clone().unwrap_or_else(|| "—".into())) }
                @if let Some(k) = &t.debounce_key { dt { "debounce key" } dd { (k) } }
                @if let Some(r) = &t.requires {
                    dt { "requires" } dd id="requires" { (docket_core::labels::display(r)) }
                }
                @if let Some(p) = &t.prefer {
                    dt { "prefers" } dd id="prefer" { (docket_core::labels::display(&p.labels)) " for " (docket_core::duration::format(p.for_)) " after it is due" }
                }
                @if !t.tags.is_empty() {
                    dt { "tags" } dd id="tags" { @for tag in &t.tags { a class="tag" href=(format!("/ui/tasks?tag={}", urlencode(tag))) { (tag) } " " } }
                }
                @if let Some(o) = &t.dead_letter_of {
                    dt { "dead letter of" } dd { a href=(format!("/ui/tasks/{}", o.task_id)) { "task " (o.task_id) } " in " (o.queue) " (" (o.attempts) " attempts; last error: " (o.errors.last().map(|e| e.message.as_str()).unwrap_or("—")) ") " a href=(format!("/ui/tasks/{}/retry", o.task_id)) { "retry it" } }
                }
                dt { "concurrency key" } dd { (t.concurrency_key.clone().unwrap_or_else(|| "—".into())) @if let Some(l) = t.concurrency_limit { " (limit " (l) ")" } }
                dt { "node" } dd { (t.node.clone().unwrap_or_else(|| "any".into())) }
                dt { "worker" } dd { (t.worker.clone().unwrap_or_else(|| "—".into())) }
                dt { "trace id" } dd { code { (t.trace_id.clone().unwrap_or_else(|| "—".into())) } }
                dt { "created" } dd { (ts(t.created_at)) }
                dt { "attempted" } dd { (opt(t.attempted_at)) }
                dt { "finished" } dd { (opt(t.finished_at)) }
                dt { "updated" } dd { (ts(t.updated_at)) }
                dt { "lease expires" } dd { (opt(t.lease_expires_at)) }
                dt { "cancel requested" } dd { (opt(t.cancel_requested_at)) }
                @if let Some(name) = &schedule {
                    dt { "schedule" } dd { a href=(format!("/ui/schedules#schedule-{}", urlencode(name))) { (name) } }
                }
                @if let Some((ns, pid)) = &process {
                    dt { "process" } dd { a href=(format!("/ui/processes/{}/{}", urlencode(ns), urlencode(pid))) { (ns) "/" (pid) } }
                }
            }
            h2 { "Timeline" }
            (super::timeline::timeline(&t, now))
            @if let Some(w) = &workflow { (super::timeline::workflow_links(&t, w)) }
            h2 { "Payload" } (json_block(&t.payload))
            @if let Some(r) = &t.result { h2 { "Result" } (json_block(r)) }
            @if let Some(p) = &t.progress { h2 { "Progress" } (json_block(p)) }
            h2 { "Run log" }
            @if t.runs.is_empty() { p class="muted" { "No finished attempts." } }
            @else {
                p class="muted" { "The last " (t.runs.len()) " of " (t.run_count) " attempts." }
                table id="runs" {
                    tr { th { "attempt" } th { "stage" } th { "outcome" } th { "started" } th { "ran" } th { "worker" } th { "node" } th { "trace id" } th { "message" } }
                    @for r in &t.runs {
                        tr { td class="n" { (r.attempt) } td { (r.stage.clone().unwrap_or_default()) }
                             td { (format!("{:?}", r.outcome).to_lowercase()) }
                             td { (opt(r.started_at)) }
                             td class="n" { (r.duration_ms.map(|d| format!("{d} ms")).unwrap_or_default()) }
                             td { (r.worker.clone().unwrap_or_default()) } td { (r.node.clone().unwrap_or_default()) }
                             td { code { (r.trace_id.clone().unwrap_or_default()) } }
                             td { pre { (r.message.clone().unwrap_or_default()) } } }
                    }
                }
            }
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
            h2 { "Enqueue it again" }
            p class="muted" { "The same task as a new one, over the API (a masked payload stays masked):" }
            pre id="curl" { (curl) }
            button type="button" class="btn" data-copy="curl" id="copy-curl" { "Copy" }
        },
    ))
}

pub(super) fn action_label(a: TaskAction) -> &'static str {
    match a {
        TaskAction::Cancel => "Cancel",
        TaskAction::Retry => "Retry",
        TaskAction::RunNow => "Run now",
    }
}

pub(super) async fn task_confirm(
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

pub(super) async fn task_act(
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
pub(super) fn queue_action(action: &str) -> Option<bool> {
    match action {
        "pause" => Some(true),
        "resume" => Some(false),
        _ => None,
    }
}

pub(super) async fn queue_confirm(
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

pub(super) async fn queue_act(
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

/// Labels as the task page shows them: `gpu=a100, region=eu`.
#[cfg(test)]
mod tests {
    #[test]
    fn thousands_are_grouped() {
        use super::thousands;
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(48_210), "48,210");
        assert_eq!(thousands(-1_234_567), "-1,234,567");
        assert_eq!(thousands(i64::MIN), "-9,223,372,036,854,775,808");
    }
}
