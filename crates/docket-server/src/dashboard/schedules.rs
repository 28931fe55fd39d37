//! Schedules, and the panels other crates add (docket-sql: the pg_task tables this node
//! serves), by section.

use super::layout::*;
use super::prelude::*;
use docket_engine::panels::{Cell, View};

/// A panel's title and what it shows (or why it cannot).
type Shown = (String, Result<View, String>);

pub(super) async fn schedules(State(s): State<AppState>) -> Page {
    let now = s.engine.clock.now();
    let list = s.engine.schedule_list().await.map_err(fail)?;
    // Panels by section, in the order they were added.
    let mut sections: Vec<(String, Vec<Shown>)> = vec![];
    for p in s.panels.iter() {
        let v = (p.title(), p.view().await);
        match sections.iter_mut().find(|(name, _)| name == p.section()) {
            Some((_, list)) => list.push(v),
            None => sections.push((p.section().to_string(), vec![v])),
        }
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
            @for (section, panels) in &sections {
                h1 { (section) }
                @for (title, view) in panels {
                    h2 { (title) }
                    @match view {
                        Err(e) => p class="err" { "cannot read it: " (e) },
                        Ok(v) => {
                            p { @for (st, n) in &v.counts { (state_badge(st)) " " (n) "  " } }
                            @for (i, t) in v.tables.iter().enumerate() {
                                table style=[(i > 0).then_some("margin-top:.6em")] {
                                    tr { @for c in &t.columns { th { (c) } } }
                                    @for row in &t.rows { tr { @for c in row { (cell(now, c)) } } }
                                }
                            }
                        }
                    }
                }
            }
        },
    ))
}

/// One panel cell.
fn cell(now: docket_core::Timestamp, c: &Cell) -> Markup {
    html! {
        @match c {
            Cell::Text(t) => td { (t) },
            Cell::Code { text, max } => td { code { (short(text, *max)) } },
            Cell::State(st) => td { (state_badge(st)) },
            Cell::Time(t) => td { (t.map(|t| ago(now, t)).unwrap_or_default()) },
            Cell::Error(e) => td class="err" { (e) },
        }
    }
}
