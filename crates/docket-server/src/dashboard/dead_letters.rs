//! Dead letters (issue 43): the tasks of every queue some queue names as its `dead_letter`,
//! each with the task it stands for, that task's last error, and the way back: retry the
//! original (its own confirmation), or drop the dead letters of a queue in bulk (cancel the
//! waiting ones, delete the finished ones — the bulk actions' confirmations name the count).

use super::layout::*;
use super::prelude::*;

/// Most dead letters shown per dead-letter queue (newest first).
const SHOWN: i64 = 100;

pub(super) async fn dead_letters(State(s): State<AppState>) -> Page {
    let now = s.engine.clock.now();
    let queues = s.engine.queue_list().await.map_err(fail)?;
    // Which queues are dead-letter queues, and of which queues.
    let mut of: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for q in &queues {
        if let Some(d) = &q.settings.dead_letter {
            of.entry(d.clone()).or_default().push(q.name.clone());
        }
    }
    let mut lists = vec![];
    for (dlq, sources) in &of {
        let tasks = s
            .engine
            .task_list(TaskListParams {
                queue: Some(dlq.clone()),
                descending: true,
                limit: SHOWN,
                ..Default::default()
            })
            .await
            .map_err(fail)?;
        let letters: Vec<Task> = tasks
            .into_iter()
            .filter(|t| t.dead_letter_of.is_some())
            .collect();
        lists.push((dlq, sources, letters));
    }
    Ok(layout(
        "Dead letters",
        "/ui/dead-letters",
        html! {
            h1 { "Dead letters" }
            p class="muted" { "Tasks discarded after their last attempt in a queue with a dead-letter queue (docket queue set Q --dead-letter D) are also enqueued there, linked to the original and its errors. Retry an original, or drop a queue's dead letters in bulk." }
            @if of.is_empty() { p class="muted" { "No queue has a dead-letter queue." } }
            @for (dlq, sources, letters) in &lists {
                section id=(format!("dlq-{dlq}")) {
                    h2 { "Queue " a href=(format!("/ui/queues/{}", urlencode(dlq))) { (dlq) } span class="muted" { " — dead letters of " (sources.join(", ")) } }
                    p {
                        a class="button" href=(format!("/ui/bulk?action=cancel&queue={}&state=available,scheduled,retryable", urlencode(dlq))) { "Drop the waiting ones (cancel)" }
                        " "
                        a class="button" href=(format!("/ui/bulk?action=delete&queue={}", urlencode(dlq))) { "Delete the finished ones" }
                    }
                    @if letters.is_empty() { p class="muted" { "None." } }
                    @else {
                        table class="dead-letters" {
                            tr { th { "dead letter" } th { "state" } th { "kind" } th { "original" } th { "attempts" } th { "last error" } th { "discarded" } th { "" } }
                            @for t in letters {
                                @if let Some(o) = &t.dead_letter_of {
                                    tr id=(format!("dead-letter-{}", t.id)) {
                                        td { a href=(format!("/ui/tasks/{}", t.id)) { (t.id) } }
                                        td { (state_badge(t.state.as_str())) }
                                        td { (t.kind) }
                                        td { a href=(format!("/ui/tasks/{}", o.task_id)) { (o.task_id) } " in " (o.queue) }
                                        td class="n" { (o.attempts) }
                                        td { @if let Some(e) = o.errors.last() { (short(&e.message, 160)) } }
                                        td { (ago(now, o.discarded_at)) }
                                        td { a href=(format!("/ui/tasks/{}/retry", o.task_id)) { "Retry original" } }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        },
    ))
}
