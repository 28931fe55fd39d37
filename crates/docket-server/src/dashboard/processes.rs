//! Durable processes: the list by namespace and status, one process with its history, repair.

use super::layout::*;
use super::prelude::*;

#[derive(Deserialize, Default)]
pub(super) struct ProcessFilter {
    ns: Option<String>,
    status: Option<String>,
    after: Option<String>,
}

pub(super) async fn processes(State(s): State<AppState>, Query(f): Query<ProcessFilter>) -> Page {
    let namespaces: Vec<String> = s
        .processes
        .namespaces()
        .await
        .map_err(fail)?
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
pub(super) struct HistoryQuery {
    after: Option<i64>,
}

pub(super) async fn process(
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

pub(super) async fn repair_confirm(
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

pub(super) async fn repair_act(
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
