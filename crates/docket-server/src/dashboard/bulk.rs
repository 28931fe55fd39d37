//! Bulk actions from the task list: "Retry all 48,210 matching" behind a confirmation naming
//! the count, then the bulk action's own page with its progress (live). The engine does the
//! work ([`docket_engine::bulk`]); the API's `POST /v1/tasks/bulk` is the same call.

use super::layout::*;
use super::prelude::*;
use docket_core::bulk::{BulkAction, BulkFilter, BulkJob};

/// The task list's filters a bulk action takes, and the action (query string of the
/// confirmation and of its post).
#[derive(Deserialize, Default)]
pub(super) struct BulkQuery {
    action: Option<String>,
    queue: Option<String>,
    kind: Option<String>,
    state: Option<String>,
    user_id: Option<String>,
    unique_key: Option<String>,
    tag: Option<String>,
}

impl BulkQuery {
    /// The action; else the page refusing it.
    fn action(&self) -> Result<BulkAction, Box<Response>> {
        let a = some(&self.action).unwrap_or_default();
        BulkAction::parse(&a).ok_or_else(|| Box::new(no_action(&a)))
    }

    /// The filter; else the page refusing it.
    fn filter(&self) -> Result<BulkFilter, Box<Response>> {
        let states = match some(&self.state) {
            None => vec![],
            Some(s) => docket_core::state::parse_filter(&s)
                .ok_or_else(|| Box::new(fail(ApiError::invalid(format!("no state in {s:?}")))))?,
        };
        Ok(BulkFilter {
            queue: some(&self.queue),
            states,
            kind: some(&self.kind),
            user_id: some(&self.user_id),
            unique_key: some(&self.unique_key),
            concurrency_key: None,
            tag: some(&self.tag),
        })
    }

    /// The filter as a query string (without the action).
    fn filter_query(&self) -> String {
        [
            ("queue", &self.queue),
            ("kind", &self.kind),
            ("state", &self.state),
            ("user_id", &self.user_id),
            ("unique_key", &self.unique_key),
            ("tag", &self.tag),
        ]
        .into_iter()
        .filter_map(|(k, v)| some(v).map(|v| format!("{k}={}", urlencode(&v))))
        .collect::<Vec<_>>()
        .join("&")
    }
}

/// The filter in words ("queue emails, state discarded"), for the confirmation.
fn described(f: &BulkFilter) -> String {
    let mut parts = vec![];
    for (k, v) in [
        ("queue", &f.queue),
        ("kind", &f.kind),
        ("user", &f.user_id),
        ("unique key", &f.unique_key),
        ("tag", &f.tag),
    ] {
        if let Some(v) = v {
            parts.push(format!("{k} {v}"));
        }
    }
    if !f.states.is_empty() {
        let s: Vec<&str> = f.states.iter().map(|s| s.as_str()).collect();
        parts.push(format!("state {}", s.join(" or ")));
    }
    if parts.is_empty() {
        "every task".into()
    } else {
        parts.join(", ")
    }
}

fn done_word(a: BulkAction) -> &'static str {
    match a {
        BulkAction::Cancel => "cancelled",
        BulkAction::Retry => "retried",
        BulkAction::RunNow => "run now",
        BulkAction::Delete => "deleted",
    }
}

fn label(a: BulkAction) -> &'static str {
    match a {
        BulkAction::Cancel => "Cancel",
        BulkAction::Retry => "Retry",
        BulkAction::RunNow => "Run now",
        BulkAction::Delete => "Delete",
    }
}

/// The task list's "act on all matching" form: the list's filters as hidden fields, an action.
pub(super) fn bulk_form(
    queue: Option<String>,
    kind: Option<String>,
    state: Option<String>,
    user_id: Option<String>,
    unique_key: Option<String>,
    tag: Option<String>,
) -> Markup {
    html! {
        form class="f" method="get" action="/ui/bulk" id="bulk" aria-label="Act on every matching task" {
            @for (k, v) in [("queue", queue), ("kind", kind), ("state", state), ("user_id", user_id), ("unique_key", unique_key), ("tag", tag)] {
                @if let Some(v) = v { input type="hidden" name=(k) value=(v); }
            }
            label { "act on every matching task"
                select name="action" id="bulk-action" {
                    @for a in BulkAction::ALL { option value=(a.as_str()) { (label(a)) } }
                }
            }
            button type="submit" id="bulk-go" { "Apply to all matching…" }
        }
    }
}

pub(super) async fn bulk_confirm(
    State(s): State<AppState>,
    Extension(csrf): Extension<Csrf>,
    Query(q): Query<BulkQuery>,
) -> Page {
    let action = q.action().map_err(|r| *r)?;
    let filter = q.filter().map_err(|r| *r)?;
    let (total, more) = s.engine.bulk_count(&filter, action).await.map_err(fail)?;
    let back = format!("/ui/tasks?{}", q.filter_query());
    let what = described(&filter);
    let count = if more {
        format!("more than {}", thousands(total))
    } else {
        thousands(total)
    };
    if total == 0 {
        return Ok(layout(
            "Nothing to do",
            "",
            html! {
                h1 { "Nothing to do" }
                p id="bulk-count" data-n="0" { "No task matching " (what) " can be " (done_word(action)) "." }
                p { a href=(back) { "Back to the list" } }
            },
        ));
    }
    let question = html! {
        span id="bulk-count" data-n=(total) { (label(action)) " all " b { (count) } " matching tasks" }
        " (" (what) ")? It runs in the background in batches of " (docket_core::bulk::BATCH)
        "; tasks that change state meanwhile are skipped, tasks enqueued from now on are not touched."
        @if action == BulkAction::Delete { " Deleted tasks are gone for good." }
    };
    Ok(confirm(
        &csrf,
        &format!("{} {count} tasks?", label(action)),
        question,
        &format!("/ui/bulk?action={}&{}", action.as_str(), q.filter_query()),
        &format!("Yes, {} all {count}", label(action).to_lowercase()),
        &back,
    ))
}

pub(super) async fn bulk_act(
    State(s): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<BulkQuery>,
) -> Response {
    let (action, filter) = match (q.action(), q.filter()) {
        (Ok(a), Ok(f)) => (a, f),
        (Err(r), _) | (_, Err(r)) => return *r,
    };
    let who = dashboard_actor(&headers);
    match s.engine.bulk_start(&who, filter, action).await {
        Ok(job) => Redirect::to(&format!("/ui/bulk/{}", job.id)).into_response(),
        Err(e) => error_page(e.into()),
    }
}

/// A bulk action's page: what it does, its progress (live), where it stands.
pub(super) async fn bulk_page(State(s): State<AppState>, Path(id): Path<i64>) -> Page {
    let j: BulkJob = s
        .engine
        .bulk_get(id)
        .await
        .map_err(fail)?
        .ok_or_else(|| fail(ApiError::not_found(format!("no bulk action {id}"))))?;
    let now = s.engine.clock.now();
    let finished = j.state.is_finished();
    let body = html! {
        h1 { (label(j.action)) " " (described(&j.filter)) }
        dl {
            dt { "state" } dd id="bulk-state" { (state_badge(j.state.as_str())) }
            dt { "progress" } dd {
                progress id="bulk-progress" max=(j.total.max(1)) value=(j.done.saturating_add(j.skipped).min(j.total.max(1)))
                    aria-label="tasks looked at" {}
                " " span id="bulk-done" data-n=(j.done) { (thousands(j.done)) } " changed of "
                (thousands(j.total)) (if j.more { "+" } else { "" }) " matching"
                @if j.skipped > 0 { ", " (thousands(j.skipped)) " skipped (they had moved on)" }
            }
            dt { "asked" } dd { (ago(now, j.created_at)) }
            @if let Some(f) = j.finished_at { dt { "finished" } dd { (ago(now, f)) } }
            @if let Some(e) = &j.error { dt { "last error" } dd class="err" { (e) } }
            dt { "its task" } dd { a href=(format!("/ui/tasks/{id}")) { "task " (id) } " (run log, lease)" }
        }
        @if !finished { p class="muted" { "This page follows it as it goes." } }
    };
    Ok(layout(
        &format!("Bulk action {id}"),
        &format!("/ui/bulk/{id}"),
        body,
    ))
}
