//! Batches: progress of each (done / total, by state), its callbacks and which were enqueued.

use super::layout::*;
use super::prelude::*;
use docket_core::batch::Batch;

fn status(b: &Batch) -> &'static str {
    if b.settled_at.is_some() {
        "completed"
    } else if b.open {
        "scheduled"
    } else {
        "running"
    }
}

fn status_text(b: &Batch) -> &'static str {
    if b.settled_at.is_some() {
        "settled"
    } else if b.open {
        "open"
    } else {
        "running"
    }
}

fn progress(b: &Batch) -> Markup {
    let label = format!("batch {}: {} of {} tasks finished", b.id, b.done, b.total);
    html! {
        progress max=(b.total.max(1)) value=(b.done) aria-label=(label) {}
        " " (b.done) " / " (b.total)
    }
}

fn fired(b: &Batch) -> Markup {
    html! {
        @for (name, id) in &b.fired {
            a href=(format!("/ui/tasks/{id}")) { (name) } " "
        }
    }
}

pub(super) async fn batches(State(s): State<AppState>) -> Page {
    let list = s.engine.batch_list(None, 100).await.map_err(fail)?;
    Ok(layout(
        "Batches",
        "/ui/batches",
        html! {
            h1 { "Batches" }
            p class="muted" { "Tasks grouped under one id (POST /v1/batches); each batch's callback tasks are enqueued once, when it is sealed and every task finished. The newest 100." }
            @if list.is_empty() { p class="muted" { "No batch yet." } }
            @else {
                table id="batches" {
                    tr { th { "id" } th { "name" } th { "state" } th { "finished" } th { "by state" } th { "callbacks enqueued" } th { "created" } }
                    @for b in &list {
                        tr id=(format!("batch-{}", b.id)) {
                            td { a href=(format!("/ui/batches/{}", b.id)) { (b.id) } }
                            td { (b.name.as_deref().unwrap_or("")) }
                            td { span class=(format!("st st-{}", status(b))) { (status_text(b)) } }
                            td { (progress(b)) }
                            td { @for (st, n) in &b.counts { (st.as_str()) " " (n) " " } }
                            td { (fired(b)) }
                            td { (ts(b.created_at)) }
                        }
                    }
                }
            }
        },
    ))
}

pub(super) async fn batch(
    State(s): State<AppState>,
    Extension(act): Extension<CanAct>,
    Path(id): Path<String>,
) -> Page {
    let Ok(id) = id.parse::<i64>() else {
        return Err(error_page(ApiError::invalid("batch id must be an integer")));
    };
    let b = match s.engine.batch_get(id).await.map_err(fail)? {
        Some(b) => b,
        None => {
            return Err(error_page(ApiError::not_found(format!(
                "batch {id} not found"
            ))))
        }
    };
    let callbacks = serde_json::to_value(&b.callbacks).unwrap_or(Value::Null);
    let graph = s.engine.workflow_get(id).await.map_err(fail)?;
    Ok(layout(
        &format!(
            "{} {id}",
            if graph.is_some() { "Workflow" } else { "Batch" }
        ),
        &format!("/ui/batches/{id}"),
        html! {
            h1 { @if graph.is_some() { "Workflow " } @else { "Batch " } (id) @if let Some(n) = &b.name { " — " (n) } }
            @if let Some(w) = graph.as_ref().filter(|_| act.0) {
                div class="actions" {
                    @for a in workflow_actions(&w.tasks) {
                        a class=(if a == WorkflowAction::Cancel { "btn warn" } else { "btn" }) id=(format!("action-{}", a.as_str()))
                            href=(format!("/ui/batches/{id}/{}", a.as_str())) { (a.label()) " workflow" }
                    }
                }
            }
            dl {
                dt { "state" } dd { span class=(format!("st st-{}", status(&b))) { (status_text(&b)) } }
                dt { "finished" } dd { (progress(&b)) }
                dt { "created" } dd { (ts(b.created_at)) }
                @if let Some(t) = b.settled_at { dt { "settled" } dd { (ts(t)) } }
                dt { "callbacks enqueued" } dd { (fired(&b)) }
            }
            h2 { "Tasks by state" }
            table id="batch-counts" {
                tr { th { "state" } th { "tasks" } }
                @for (st, n) in &b.counts {
                    tr { td { (state_badge(st.as_str())) } td class="n" { (n) } }
                }
            }
            @if let Some(w) = &graph {
                h2 { "Workflow" }
                (workflow_svg(&w.tasks))
                table id="workflow-tasks" {
                    tr { th { "ref" } th { "task" } th { "kind" } th { "state" } th { "depends on" } }
                    @for n in &w.tasks {
                        tr {
                            td { (n.reference) }
                            td { a href=(format!("/ui/tasks/{}", n.id)) { (n.id) } }
                            td { (n.kind) }
                            td { @if n.waiting { (state_badge("waiting")) } @else { (state_badge(n.state.as_str())) } }
                            td { @for d in &n.depends_on { (d.target()) @if d.ignore_failure() { " (ignores failure)" } " " } }
                        }
                    }
                }
            }
            h2 { "Callbacks" }
            (json_block(&callbacks))
        },
    ))
}

/// What an operator may do to a whole workflow from its page (the API's
/// `POST /v1/workflows/{id}/cancel|retry`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum WorkflowAction {
    Cancel,
    Retry,
}

impl WorkflowAction {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "cancel" => Some(Self::Cancel),
            "retry" => Some(Self::Retry),
            _ => None,
        }
    }
    fn as_str(self) -> &'static str {
        match self {
            Self::Cancel => "cancel",
            Self::Retry => "retry",
        }
    }
    fn label(self) -> &'static str {
        match self {
            Self::Cancel => "Cancel",
            Self::Retry => "Retry",
        }
    }
}

/// Cancel while a task is unfinished; retry once a task failed (discarded or cancelled — what
/// waited on it is re-run with it).
fn workflow_actions(nodes: &[docket_core::workflow::WorkflowNode]) -> Vec<WorkflowAction> {
    let mut v = vec![];
    if nodes.iter().any(|n| !n.state.is_finished()) {
        v.push(WorkflowAction::Cancel);
    }
    if nodes
        .iter()
        .any(|n| matches!(n.state, TaskState::Discarded | TaskState::Cancelled))
    {
        v.push(WorkflowAction::Retry);
    }
    v
}

pub(super) async fn workflow_confirm(
    State(s): State<AppState>,
    Extension(csrf): Extension<Csrf>,
    Path((id, action)): Path<(i64, String)>,
) -> Page {
    let a = WorkflowAction::parse(&action).ok_or_else(|| no_action(&action))?;
    let w = s
        .engine
        .workflow_get(id)
        .await
        .map_err(fail)?
        .ok_or_else(|| fail(ApiError::not_found(format!("workflow {id} not found"))))?;
    let open = w.tasks.iter().filter(|n| !n.state.is_finished()).count();
    let failed = w
        .tasks
        .iter()
        .filter(|n| matches!(n.state, TaskState::Discarded | TaskState::Cancelled))
        .count();
    let question = match a {
        WorkflowAction::Cancel => html! {
            "Cancel workflow " b { (id) } "? Its " (open) " unfinished tasks of " (w.tasks.len()) " will be cancelled."
        },
        WorkflowAction::Retry => html! {
            "Retry workflow " b { (id) } "? Its " (failed) " discarded or cancelled tasks run again, and what waited on them waits again."
        },
    };
    Ok(confirm(
        &csrf,
        &format!("{} workflow {id}?", a.label()),
        question,
        &format!("/ui/batches/{id}/{action}"),
        &format!("Yes, {}", a.as_str()),
        &format!("/ui/batches/{id}"),
    ))
}

pub(super) async fn workflow_act(
    State(s): State<AppState>,
    headers: HeaderMap,
    Path((id, action)): Path<(i64, String)>,
) -> Response {
    let Some(a) = WorkflowAction::parse(&action) else {
        return no_action(&action);
    };
    let who = dashboard_actor(&headers);
    let done = match a {
        WorkflowAction::Cancel => s.engine.workflow_cancel(&who, id).await,
        WorkflowAction::Retry => s.engine.workflow_retry(&who, id).await,
    };
    match done {
        Ok(_) => Redirect::to(&format!("/ui/batches/{id}")).into_response(),
        Err(e) => error_page(e.into()),
    }
}

/// Most tasks drawn in a workflow's graph; a bigger one shows its table only.
const MAX_DRAWN: usize = 300;

/// A workflow's graph as server-side SVG: a column per depth (longest chain of dependencies
/// before the task), a box per task coloured by state, a line per edge (dashed when it ignores
/// a failure). The table beside it says the same for screen readers.
fn workflow_svg(nodes: &[docket_core::workflow::WorkflowNode]) -> Markup {
    use std::collections::HashMap;
    if nodes.len() > MAX_DRAWN {
        return html! { p class="muted" { "The graph is drawn for workflows of up to " (MAX_DRAWN) " tasks; the table below lists all " (nodes.len()) "." } };
    }
    let index: HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.reference.as_str(), i))
        .collect();
    // Longest path from a root, by relaxation: the graph is acyclic, so n rounds suffice.
    let mut depth = vec![0usize; nodes.len()];
    for _ in 0..nodes.len() {
        let mut moved = false;
        for (i, n) in nodes.iter().enumerate() {
            for d in &n.depends_on {
                if let Some(&j) = index.get(d.target()) {
                    if depth[i] < depth[j] + 1 {
                        depth[i] = depth[j] + 1;
                        moved = true;
                    }
                }
            }
        }
        if !moved {
            break;
        }
    }
    let (w, h, dx, dy) = (150.0, 34.0, 200.0, 48.0);
    let mut row_of = vec![0usize; nodes.len()];
    let mut rows: HashMap<usize, usize> = HashMap::new();
    for (i, d) in depth.iter().enumerate() {
        let r = rows.entry(*d).or_default();
        row_of[i] = *r;
        *r += 1;
    }
    let pos = |i: usize| (10.0 + depth[i] as f64 * dx, 10.0 + row_of[i] as f64 * dy);
    let width = 20.0 + (depth.iter().max().copied().unwrap_or(0) as f64) * dx + w;
    let height = 20.0 + (rows.values().max().copied().unwrap_or(1) as f64 - 1.0) * dy + h;
    let fill = |n: &docket_core::workflow::WorkflowNode| match (n.waiting, n.state) {
        (true, _) => "#eef0f4",
        (_, TaskState::Completed) => "#d7f0dc",
        (_, TaskState::Running) => "#d9e8ff",
        (_, TaskState::Available) => "#fff4cc",
        (_, TaskState::Discarded) => "#f8d4d4",
        (_, TaskState::Cancelled) => "#e6e0ec",
        _ => "#ffffff",
    };
    html! {
        svg id="workflow-graph" role="img" aria-labelledby="workflow-graph-title" xmlns="http://www.w3.org/2000/svg"
            width=(format!("{width:.0}")) height=(format!("{height:.0}")) style="background:#fff;max-width:100%" {
            title id="workflow-graph-title" { "Workflow graph: " (nodes.len()) " tasks; the table below lists each with its state and dependencies" }
            @for (i, n) in nodes.iter().enumerate() {
                @for d in &n.depends_on {
                    @if let Some(&j) = index.get(d.target()) {
                        @let (x1, y1) = pos(j);
                        @let (x2, y2) = pos(i);
                        line x1=(format!("{:.0}", x1 + w)) y1=(format!("{:.0}", y1 + h / 2.0)) x2=(format!("{x2:.0}")) y2=(format!("{:.0}", y2 + h / 2.0))
                            stroke="#8a93a6" stroke-dasharray=(if d.ignore_failure() { "4 3" } else { "none" }) {}
                    }
                }
            }
            @for (i, n) in nodes.iter().enumerate() {
                @let (x, y) = pos(i);
                g {
                    rect x=(format!("{x:.0}")) y=(format!("{y:.0}")) width=(w) height=(h) rx="5" fill=(fill(n)) stroke="#8a93a6" {}
                    text x=(format!("{:.0}", x + 8.0)) y=(format!("{:.0}", y + 21.0)) font-size="12" {
                        (short(&n.reference, 14)) " · " (if n.waiting { "waiting" } else { n.state.as_str() })
                    }
                }
            }
        }
    }
}
