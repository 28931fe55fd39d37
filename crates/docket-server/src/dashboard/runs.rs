//! Durable functions' runs (issue 41): the list by workflow and state, one run with its journal
//! as a timeline (steps with their outputs and errors, sleeps, waits, children), cancel and
//! retry.

use super::layout::*;
use super::prelude::*;
use docket_core::durable::{Entry, RunListParams, RunState, WorkflowRun};

#[derive(Deserialize, Default)]
pub(super) struct RunFilter {
    workflow: Option<String>,
    state: Option<String>,
}

const STATES: [&str; 6] = [
    "running",
    "sleeping",
    "waiting",
    "completed",
    "failed",
    "cancelled",
];

/// The badge class of a run's state (the task states' colours).
fn badge(s: RunState) -> Markup {
    let class = match s {
        RunState::Running => "running",
        RunState::Sleeping | RunState::Waiting => "scheduled",
        RunState::Completed => "completed",
        RunState::Failed => "discarded",
        RunState::Cancelled => "cancelled",
    };
    html! { span class=(format!("st st-{class}")) { (s.as_str()) } }
}

fn run_href(id: &str) -> String {
    format!("/ui/runs/{}", urlencode(id))
}

pub(super) async fn runs(State(s): State<AppState>, Query(f): Query<RunFilter>) -> Page {
    let state = match some(&f.state) {
        None => None,
        Some(st) => Some(RunState::parse(&st).map_err(|e| fail(ApiError::invalid(e)))?),
    };
    let list = s
        .engine
        .run_list(RunListParams {
            workflow: some(&f.workflow),
            state,
            limit: Some(100),
            ..RunListParams::default()
        })
        .await
        .map_err(fail)?;
    let here = format!(
        "/ui/runs?workflow={}&state={}",
        urlencode(&some(&f.workflow).unwrap_or_default()),
        some(&f.state).unwrap_or_default()
    );
    Ok(layout(
        "Workflow runs",
        &here,
        html! {
            h1 { "Workflow runs" }
            p class="muted" { "Durable functions' runs (POST /v1/workflow-runs), newest first; the newest 100 of the filter." }
            form class="f" method="get" action="/ui/runs" {
                label { "workflow" input name="workflow" value=(some(&f.workflow).unwrap_or_default()); }
                label { "state"
                    select name="state" {
                        option value="" { "any" }
                        @for st in STATES {
                            option value=(st) selected[some(&f.state).as_deref() == Some(st)] { (st) }
                        }
                    }
                }
                button type="submit" { "Filter" }
            }
            @if list.is_empty() { p class="muted" { "No run." } }
            @else {
                table id="runs" {
                    tr { th { "id" } th { "workflow" } th { "state" } th { "steps" } th { "waiting for" } th { "wakes" } th { "started" } th { "finished" } }
                    @for r in &list {
                        tr {
                            td { a href=(run_href(&r.id)) { (short(&r.id, 40)) } }
                            td { (r.workflow) }
                            td { (badge(r.state)) }
                            td class="n" { (r.steps) }
                            td { (r.waiting_for.as_deref().unwrap_or("")) }
                            td { @if let Some(t) = r.wake_at { (ts(t)) } }
                            td { (ts(r.created_at)) }
                            td { @if let Some(t) = r.finished_at { (ts(t)) } }
                        }
                    }
                }
            }
        },
    ))
}

fn took(e: &Entry) -> String {
    match e.finished_at {
        Some(end) => {
            let ms = (end - e.started_at).num_milliseconds().max(0);
            if ms < 1000 {
                format!("{ms} ms")
            } else {
                format!("{:.1} s", ms as f64 / 1000.0)
            }
        }
        None => String::new(),
    }
}

fn timeline(entries: &[Entry]) -> Markup {
    html! {
        table id="journal" {
            tr { th { "#" } th { "kind" } th { "name" } th { "state" } th { "attempts" } th { "started" } th { "took" } th { "wakes" } th { "output / error" } }
            @for e in entries {
                tr id=(format!("entry-{}", e.seq)) {
                    td class="n" { (e.seq) }
                    td { (e.kind.as_str()) }
                    td {
                        (e.name)
                        @if let Some(c) = &e.child_id { " → " a href=(run_href(c)) { (short(c, 40)) } }
                    }
                    td { (state_badge(match e.state.as_str() { "failed" => "discarded", "waiting" => "scheduled", "timed_out" => "cancelled", s => s })) " " (e.state.as_str()) }
                    td class="n" { (e.attempts) }
                    td { (ts(e.started_at)) }
                    td { (took(e)) }
                    td { @if let Some(t) = e.wake_at { (ts(t)) } }
                    td {
                        @if let Some(err) = &e.error { pre class="err" { (short(err, 2000)) } }
                        @else if let Some(v) = &e.output { (json_block(v)) }
                    }
                }
            }
        }
    }
}

/// What an operator may do to a run from its page.
fn actions(r: &WorkflowRun) -> Vec<&'static str> {
    match r.state {
        RunState::Failed | RunState::Cancelled => vec!["retry"],
        s if !s.is_finished() => vec!["cancel"],
        _ => vec![],
    }
}

pub(super) async fn run(
    State(s): State<AppState>,
    Extension(act): Extension<CanAct>,
    Path(id): Path<String>,
) -> Page {
    let r = s
        .engine
        .run_get(&id)
        .await
        .map_err(fail)?
        .ok_or_else(|| fail(ApiError::not_found(format!("workflow run {id} not found"))))?;
    let entries = s.engine.run_entries(&id).await.map_err(fail)?;
    let here = run_href(&id);
    Ok(layout(
        &format!("Run {}", short(&id, 40)),
        &here,
        html! {
            h1 { "Run " (id) }
            @if act.0 {
                div class="actions" {
                    @for a in actions(&r) {
                        a class=(if a == "cancel" { "btn warn" } else { "btn" }) id=(format!("action-{a}"))
                            href=(format!("{here}/{a}")) { (if a == "cancel" { "Cancel run" } else { "Retry run" }) }
                    }
                }
            }
            dl {
                dt { "workflow" } dd { a href=(format!("/ui/runs?workflow={}", urlencode(&r.workflow))) { (r.workflow) } }
                dt { "state" } dd { (badge(r.state)) @if let Some(w) = &r.waiting_for { " for event " b { (w) } } @if let Some(t) = r.wake_at { " until " (ts(t)) } }
                dt { "task" } dd { a href=(format!("/ui/tasks/{}", r.task_id)) { (r.task_id) } " (queue " (r.queue) ")" }
                @if let Some(p) = &r.parent_id { dt { "parent" } dd { a href=(run_href(p)) { (p) } } }
                dt { "started" } dd { (ts(r.created_at)) }
                @if let Some(t) = r.finished_at { dt { "finished" } dd { (ts(t)) } }
            }
            @if let Some(e) = &r.error { h2 { "Error" } pre class="err" { (e) } }
            @if let Some(v) = &r.result { h2 { "Result" } (json_block(v)) }
            h2 { "Journal" }
            @if entries.is_empty() { p class="muted" { "Nothing recorded yet." } }
            @else { (timeline(&entries)) }
            h2 { "Input" }
            (json_block(&r.input))
        },
    ))
}

fn parse_action(a: &str) -> Option<&'static str> {
    match a {
        "cancel" => Some("cancel"),
        "retry" => Some("retry"),
        _ => None,
    }
}

pub(super) async fn run_confirm(
    State(s): State<AppState>,
    Extension(csrf): Extension<Csrf>,
    Path((id, action)): Path<(String, String)>,
) -> Page {
    let a = parse_action(&action).ok_or_else(|| no_action(&action))?;
    let r = s
        .engine
        .run_get(&id)
        .await
        .map_err(fail)?
        .ok_or_else(|| fail(ApiError::not_found(format!("workflow run {id} not found"))))?;
    let question = if a == "cancel" {
        html! { "Cancel run " b { (id) } " of " (r.workflow) "? Its task and its unfinished children are cancelled; a worker running it is stopped at its next call." }
    } else {
        html! { "Retry run " b { (id) } " of " (r.workflow) "? It runs again: the next worker replays its journal, so recorded steps do not run again." }
    };
    let here = run_href(&id);
    Ok(confirm(
        &csrf,
        &format!(
            "{} run {}?",
            if a == "cancel" { "Cancel" } else { "Retry" },
            short(&id, 40)
        ),
        question,
        &format!("{here}/{a}"),
        &format!("Yes, {a}"),
        &here,
    ))
}

pub(super) async fn run_act(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path((id, action)): Path<(String, String)>,
) -> Response {
    let Some(a) = parse_action(&action) else {
        return no_action(&action);
    };
    let who = dashboard_actor(&headers);
    let done = if a == "cancel" {
        s.engine.run_cancel(&id).await
    } else {
        s.engine.run_retry(&id).await
    };
    match done {
        Ok(r) => {
            s.engine
                .audit(
                    &who,
                    &format!("workflow_run.{a}"),
                    &format!("workflow_run:{id}"),
                    Some(serde_json::json!({"workflow": r.workflow, "state": r.state})),
                )
                .await;
            Redirect::to(&run_href(&id)).into_response()
        }
        Err(e) => error_page(e.into()),
    }
}
