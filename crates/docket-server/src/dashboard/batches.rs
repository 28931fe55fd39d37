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

pub(super) async fn batch(State(s): State<AppState>, Path(id): Path<String>) -> Page {
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
    Ok(layout(
        &format!("Batch {id}"),
        &format!("/ui/batches/{id}"),
        html! {
            h1 { "Batch " (id) @if let Some(n) = &b.name { " — " (n) } }
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
            h2 { "Callbacks" }
            (json_block(&callbacks))
        },
    ))
}
