//! Charts over the kept history ([`docket_core::history`]): finished tasks, queue depth and
//! pickup latency p50/p99, per queue or for all, over the last hour or day. Server-side SVG
//! (no charting library, nothing to build), each with a label that says what it shows for
//! screen readers, redrawn live with the page.

use super::layout::*;
use super::prelude::*;
use docket_core::history::{bucket_label, percentile, Bin, Range, BUCKETS};

const W: f64 = 600.0;
const H: f64 = 80.0;

fn frame(id: &str, label: &str, range: Range, body: Markup) -> Markup {
    let left = match range {
        Range::Hour => "−60 min",
        Range::Day => "−24 h",
    };
    html! {
        svg id=(id) class="chart" width=(W) height=(H + 14.0) viewBox=(format!("0 0 {W} {}", H + 14.0)) role="img" aria-label=(label) {
            rect x="0" y="0" width=(W) height=(H) fill="#fff" stroke="#e3e6eb" {}
            (body)
            text x="0" y=(H + 12.0) font-size="10" fill="#5b6476" { (left) }
            text x=(W - 30.0) y=(H + 12.0) font-size="10" fill="#5b6476" { "now" }
        }
    }
}

/// Completed (green) and failed (red: discarded or cancelled) per bin, stacked.
fn throughput(bins: &[Bin], range: Range) -> Markup {
    let step = W / bins.len().max(1) as f64;
    let max = bins
        .iter()
        .map(|b| b.completed + b.failed)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let (c, f): (i64, i64) = bins
        .iter()
        .fold((0, 0), |(c, f), b| (c + b.completed, f + b.failed));
    let label = format!(
        "{} completed and {} failed over the last {}",
        thousands(c),
        thousands(f),
        range.as_str()
    );
    frame(
        "chart-throughput",
        &label,
        range,
        html! {
            @for (i, b) in bins.iter().enumerate() {
                @let x = i as f64 * step + 0.5;
                @let hc = b.completed as f64 / max * (H - 4.0);
                @let hf = b.failed as f64 / max * (H - 4.0);
                rect x=(format!("{x:.1}")) y=(format!("{:.1}", H - hc)) width=(format!("{:.1}", step - 1.0)) height=(format!("{hc:.1}")) fill="#3a9b5c" { title { (b.completed) " completed" } }
                rect x=(format!("{x:.1}")) y=(format!("{:.1}", H - hc - hf)) width=(format!("{:.1}", step - 1.0)) height=(format!("{hf:.1}")) fill="#c8443a" { title { (b.failed) " failed" } }
            }
        },
    )
}

/// Available (amber) and running (blue) tasks sampled at each minute's start (the most in a
/// bin), side by side.
fn depth(bins: &[Bin], range: Range) -> Markup {
    let step = W / bins.len().max(1) as f64;
    let max = bins
        .iter()
        .map(|b| b.available.unwrap_or(0).max(b.running.unwrap_or(0)))
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let peak = bins.iter().filter_map(|b| b.available).max();
    let label = match peak {
        Some(p) => format!(
            "queue depth over the last {}: at most {} available",
            range.as_str(),
            thousands(p)
        ),
        None => format!(
            "queue depth over the last {}: not sampled yet",
            range.as_str()
        ),
    };
    frame(
        "chart-depth",
        &label,
        range,
        html! {
            @for (i, b) in bins.iter().enumerate() {
                @let x = i as f64 * step + 0.5;
                @let half = (step - 1.0) / 2.0;
                @if let Some(a) = b.available {
                    @let h = a as f64 / max * (H - 4.0);
                    rect x=(format!("{x:.1}")) y=(format!("{:.1}", H - h)) width=(format!("{half:.1}")) height=(format!("{h:.1}")) fill="#e0a52b" { title { (a) " available" } }
                }
                @if let Some(r) = b.running {
                    @let h = r as f64 / max * (H - 4.0);
                    rect x=(format!("{:.1}", x + half)) y=(format!("{:.1}", H - h)) width=(format!("{half:.1}")) height=(format!("{h:.1}")) fill="#5b8def" { title { (r) " running" } }
                }
            }
        },
    )
}

/// Pickup latency p50 (dark) and p99 (red) per bin, on the buckets' scale (each bucket a
/// step: the scale is close to logarithmic).
fn latency(bins: &[Bin], range: Range) -> Markup {
    let step = W / bins.len().max(1) as f64;
    let y = |b: usize| H - 6.0 - (b as f64) / (BUCKETS as f64 - 1.0) * (H - 12.0);
    let mut all = [0i64; BUCKETS];
    for b in bins {
        for (a, n) in all.iter_mut().zip(b.latency) {
            *a += n;
        }
    }
    let label = match (percentile(&all, 0.5), percentile(&all, 0.99)) {
        (Some(p50), Some(p99)) => format!(
            "pickup latency over the last {}: p50 {}, p99 {}",
            range.as_str(),
            bucket_label(p50),
            bucket_label(p99)
        ),
        _ => format!(
            "pickup latency over the last {}: nothing finished",
            range.as_str()
        ),
    };
    frame(
        "chart-latency",
        &label,
        range,
        html! {
            @for t in [1usize, 5, 9, 12] {
                line x1="0" x2=(W) y1=(format!("{:.1}", y(t))) y2=(format!("{:.1}", y(t))) stroke="#eef0f4" {}
                text x="3" y=(format!("{:.1}", y(t) - 2.0)) font-size="9" fill="#8a93a6" { (bucket_label(t)) }
            }
            @for (i, b) in bins.iter().enumerate() {
                @let x = i as f64 * step + step / 2.0;
                @if let Some(p) = percentile(&b.latency, 0.99) {
                    circle class="p99" cx=(format!("{x:.1}")) cy=(format!("{:.1}", y(p))) r="2.5" fill="#c8443a" { title { "p99 " (bucket_label(p)) } }
                }
                @if let Some(p) = percentile(&b.latency, 0.5) {
                    circle class="p50" cx=(format!("{x:.1}")) cy=(format!("{:.1}", y(p))) r="2.5" fill="#1d2330" { title { "p50 " (bucket_label(p)) } }
                }
            }
        },
    )
}

/// The three charts with their range switch; `base` is the page's URL without a query.
pub(super) fn charts(bins: &[Bin], range: Range, base: &str) -> Markup {
    html! {
        nav class="tabs" aria-label="Chart range" id="chart-range" {
            @for r in [Range::Hour, Range::Day] {
                a href=(format!("{base}?range={}", r.as_str())) aria-current=[(r == range).then_some("page")] { "last " (r.as_str()) }
            }
        }
        h2 { "Completed and failed" }
        (throughput(bins, range))
        h2 { "Depth: available and running" }
        (depth(bins, range))
        h2 { "Pickup latency: p50 and p99" }
        (latency(bins, range))
        p class="muted" { "From the kept history (a day, a few seconds behind): depth is sampled at each minute's start; latency is from a task's run at to the start of its last attempt, for the tasks that finished, in buckets (a percentile is its bucket's bound)." }
    }
}

#[derive(Deserialize, Default)]
pub(super) struct RangeQuery {
    range: Option<String>,
}

impl RangeQuery {
    pub(super) fn range(&self) -> Range {
        self.range
            .as_deref()
            .and_then(Range::parse)
            .unwrap_or(Range::Hour)
    }
}

/// A queue's page: its counts by state (each linked to its tasks), its settings, its charts.
pub(super) async fn queue_page(
    State(s): State<AppState>,
    Path(queue): Path<String>,
    Query(q): Query<RangeQuery>,
) -> Page {
    let range = q.range();
    let stats = s.engine.queue_get(&queue).await.map_err(fail)?;
    let bins = s
        .engine
        .queue_history(Some(&queue), range)
        .await
        .map_err(fail)?;
    let base = format!("/ui/queues/{}", urlencode(&queue));
    let body = html! {
        h1 { "Queue " (queue) @if stats.settings.paused { " " (state_badge("paused")) } }
        nav class="tabs" id="queue-counts" aria-label="Tasks by state" {
            @for st in TaskState::ALL {
                a href=(format!("/ui/tasks?queue={}&state={}", urlencode(&queue), st.as_str())) {
                    (st.as_str()) " " span class="n" { (thousands(stats.counts.get(&st).copied().unwrap_or(0))) }
                }
            }
        }
        (charts(&bins, range, &base))
        h2 { "Settings" }
        (json_block(&serde_json::to_value(&stats.settings).unwrap_or_default()))
    };
    Ok(layout(
        &format!("Queue {queue}"),
        &format!("{base}?range={}", range.as_str()),
        body,
    ))
}
