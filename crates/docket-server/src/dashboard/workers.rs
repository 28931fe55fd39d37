//! Workers: each one's state (node-daemons' IDLE/WORK/STOP, or lost) and the tasks in hand.

use super::layout::*;
use super::prelude::*;

pub(super) async fn workers(State(s): State<AppState>) -> Page {
    let now = s.engine.clock.now();
    let list = s.engine.worker_list().await.map_err(fail)?;
    Ok(layout(
        "Workers",
        "/ui/workers",
        html! {
            h1 { "Workers" }
            p class="muted" { "What each worker last reported; a worker silent for three of its report intervals is lost." }
            @if list.is_empty() { p class="muted" { "No worker has reported." } }
            @else {
                table id="workers" {
                    tr { th { "name" } th { "state" } th { "queue" } th { "kinds" } th { "labels" } th { "tasks in hand" } th { "concurrency" } th { "host" } th { "pid" } th { "restarts" } th { "reported" } }
                    @for w in &list {
                        @let state = format!("{:?}", w.state).to_lowercase();
                        tr id=(format!("worker-{}", w.name)) {
                            td { (w.name) }
                            td { (state_badge(&state)) }
                            td { (w.report.queue.clone().unwrap_or_default()) }
                            td { (w.report.kinds.join(", ")) }
                            td { (docket_core::labels::display(&w.report.labels)) }
                            td { @for id in &w.report.tasks { a href=(format!("/ui/tasks/{id}")) { (id) } " " } }
                            td class="n" { (w.report.concurrency.map(|c| c.to_string()).unwrap_or_default()) }
                            td { (w.report.host.clone().unwrap_or_default()) }
                            td class="n" { (w.report.pid.map(|p| p.to_string()).unwrap_or_default()) }
                            td class="n" { (w.report.restarts) }
                            td { (ago(now, w.reported_at)) }
                        }
                    }
                }
            }
        },
    ))
}
