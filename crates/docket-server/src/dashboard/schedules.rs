//! Schedules and the pg_task tables this node serves.

use super::*;

pub(super) async fn schedules(State(s): State<AppState>) -> Page {
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
