//! The overview: queues with counts and oldest waiting task, nodes, last hour's throughput.

use super::layout::*;
use super::prelude::*;

/// An SVG bar chart of completed (green) and failed (red) tasks per minute, last hour.
pub(super) fn throughput_chart(now: Timestamp, rows: &[docket_core::api::Throughput]) -> Markup {
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

pub(super) async fn overview(
    State(s): State<AppState>,
    Extension(act): Extension<CanAct>,
    Query(q): Query<super::charts::RangeQuery>,
) -> Page {
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
    let range = q.range();
    let bins = engine.queue_history(None, range).await.map_err(fail)?;
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
        &format!("/?range={}", range.as_str()),
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
                            td { a href=(format!("/ui/queues/{}", urlencode(&q.name))) { (q.name) } }
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
            h2 { "All queues over time" }
            p class="muted" { "Each queue's own: its name above." }
            (super::charts::charts(&bins, range, "/"))
            h2 { "Nodes" }
            table id="nodes" {
                tr { th { "node" } th { "state" } th { "last heartbeat" } th { "started" } th { "version" } }
                @for n in &nodes {
                    @let state = s.engine.node_state(n);
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
