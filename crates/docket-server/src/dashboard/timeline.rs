//! A task page's extras (issue 27 item 5): its life as a timeline, a copy-as-curl that
//! enqueues the same task again, and its place in a workflow (what it waits for, what waits for
//! it).

use super::layout::*;
use super::prelude::*;
use docket_core::run::RunOutcome;

fn outcome_fill(o: RunOutcome) -> &'static str {
    match o {
        RunOutcome::Completed => "#3a9b5c",
        RunOutcome::Failed | RunOutcome::Timeout => "#c8443a",
        RunOutcome::Cancelled => "#8a6fb8",
        RunOutcome::Lost => "#d08a2b",
    }
}

/// The task's life from its creation to its end (or now): a bar per attempt of the run log,
/// coloured by outcome and labelled with its stage, marks for created, run at and finished.
/// Server-side SVG; the run log's table below says the same for screen readers.
pub(super) fn timeline(t: &Task, now: Timestamp) -> Markup {
    let start = t.created_at;
    let end = t.finished_at.unwrap_or(now).max(start);
    let mut spans: Vec<(Timestamp, Timestamp, RunOutcome, String)> = t
        .runs
        .iter()
        .map(|r| {
            let from = r.started_at.unwrap_or(r.finished_at).max(start);
            let label = match &r.stage {
                Some(s) => format!("#{} {s}: {}", r.attempt, r.outcome.as_str()),
                None => format!("#{}: {}", r.attempt, r.outcome.as_str()),
            };
            (from, r.finished_at.max(from), r.outcome, label)
        })
        .collect();
    spans.sort_by_key(|s| s.0);
    let total_ms = (end - start).num_milliseconds().max(1) as f64;
    let (w, h) = (600.0, 46.0);
    let x = |at: Timestamp| {
        ((at - start).num_milliseconds().max(0) as f64 / total_ms * (w - 2.0)).clamp(0.0, w - 2.0)
            + 1.0
    };
    let running = (t.state == TaskState::Running).then(|| t.attempted_at.unwrap_or(now));
    let label = format!(
        "{} attempts between {} and {}{}",
        t.runs.len(),
        ts(start),
        ts(end),
        if t.finished_at.is_some() {
            ""
        } else {
            " (now)"
        }
    );
    html! {
        svg id="timeline" width=(w) height=(h + 14.0) viewBox=(format!("0 0 {w} {}", h + 14.0)) role="img" aria-label=(label) {
            rect x="0" y="0" width=(w) height=(h) fill="#fff" stroke="#e3e6eb" {}
            @if t.run_at > start && t.run_at < end {
                line x1=(x(t.run_at)) y1="2" x2=(x(t.run_at)) y2=(h - 2.0) stroke="#8a93a6" stroke-dasharray="3 3" { title { "run at " (ts(t.run_at)) } }
            }
            @for (from, to, o, l) in &spans {
                @let x0 = x(*from);
                rect class="run" x=(x0) y="12" width=((x(*to) - x0).max(3.0)) height="22" fill=(outcome_fill(*o)) { title { (l) " · " (ts(*from)) } }
            }
            @if let Some(a) = running {
                @let x0 = x(a);
                rect class="run" x=(x0) y="12" width=((w - 1.0 - x0).max(3.0)) height="22" fill="#5b8def" { title { "running since " (ts(a)) } }
            }
            text x="2" y=(h + 12.0) font-size="10" fill="#5b6476" { "created " (ts(start)) }
            text x=(w - 2.0) y=(h + 12.0) font-size="10" fill="#5b6476" text-anchor="end" {
                @if let Some(f) = t.finished_at { (t.state.as_str()) " " (ts(f)) } @else { "now" }
            }
        }
    }
}

/// A shell-quoted single-quoted string.
fn sh(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// `curl` that enqueues this task again (what `POST /v1/tasks` takes: queue, kind, payload
/// and the settings the task carries); `origin` is the server as the browser reached it. A
/// masked payload stays masked.
pub(super) fn curl(t: &Task, origin: &str) -> String {
    let mut spec = serde_json::json!({
        "queue": t.queue,
        "kind": t.kind,
        "payload": t.payload,
        "priority": t.priority,
        "max_attempts": t.max_attempts,
        "timeout": humantime::format_duration(t.timeout).to_string(),
    });
    for (k, v) in [
        ("unique_key", &t.unique_key),
        ("concurrency_key", &t.concurrency_key),
        ("user_id", &t.user_id),
        ("node", &t.node),
    ] {
        if let Some(v) = v {
            spec[k] = Value::from(v.clone());
        }
    }
    format!(
        "curl -X POST {} \\\n  -H 'content-type: application/json' \\\n  -H \"authorization: Bearer $DOCKET_TOKEN\" \\\n  -d {}",
        sh(&format!("{origin}/v1/tasks")),
        sh(&spec.to_string())
    )
}

/// The task's place in its workflow: what it waits for and what waits for it, each linked
/// with its state.
pub(super) fn workflow_links(t: &Task, w: &docket_core::workflow::Workflow) -> Markup {
    let Some(me) = w.tasks.iter().find(|n| n.id == t.id) else {
        return html! {};
    };
    let by_ref = |r: &str| w.tasks.iter().find(|n| n.reference == r);
    let needs: Vec<_> = me
        .depends_on
        .iter()
        .filter_map(|d| by_ref(d.target()))
        .collect();
    let needed_by: Vec<_> = w
        .tasks
        .iter()
        .filter(|n| n.depends_on.iter().any(|d| d.target() == me.reference))
        .collect();
    let link = |n: &docket_core::workflow::WorkflowNode| {
        html! {
            li { a href=(format!("/ui/tasks/{}", n.id)) { (n.reference) " (task " (n.id) ")" } " " (state_badge(if n.waiting { "waiting" } else { n.state.as_str() })) }
        }
    };
    html! {
        section id="workflow-links" aria-labelledby="workflow-links-h" {
            h2 id="workflow-links-h" { "In workflow " a href=(format!("/ui/batches/{}", w.batch.id)) { (w.batch.id) } " as " code { (me.reference) } }
            p { "Waits for: " @if needs.is_empty() { span class="muted" { "nothing" } } }
            @if !needs.is_empty() { ul id="depends-on" { @for n in &needs { (link(n)) } } }
            p { "Needed by: " @if needed_by.is_empty() { span class="muted" { "nothing" } } }
            @if !needed_by.is_empty() { ul id="needed-by" { @for n in &needed_by { (link(n)) } } }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curl_quotes_what_the_shell_would_split() {
        let mut t = docket_core::NewTask::new("mail", serde_json::json!({"to": "o'brien"}))
            .resolve(
                None,
                &docket_core::TaskDefaults::default(),
                docket_core::time::min(),
            )
            .unwrap()
            .into_task(7, docket_core::time::min());
        t.user_id = Some("u 1".into());
        let c = curl(&t, "http://h:7070");
        assert!(
            c.starts_with("curl -X POST 'http://h:7070/v1/tasks'"),
            "{c}"
        );
        // The payload's quote is closed, escaped and reopened: the shell gets it back intact.
        assert!(c.contains(r#""to":"o'\''brien""#), "{c}");
        assert!(c.contains(r#""user_id":"u 1""#), "{c}");
    }
}
