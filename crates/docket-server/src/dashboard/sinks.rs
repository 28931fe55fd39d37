//! Event sinks: each (sink, namespace) this node delivers — who holds its cursor, how far it
//! got, what waits, the last failure.

use super::layout::*;
use super::prelude::*;

pub(super) async fn sinks(State(s): State<AppState>) -> Page {
    let now = s.engine.clock.now();
    let list = s.processes.sink_status();
    Ok(layout(
        "Sinks",
        "/ui/sinks",
        html! {
            h1 { "Event sinks" }
            p class="muted" { "Process events and lifecycle changes, and task events of the queues asked for, published to brokers ([[sinks]] in the config file). One node holds each cursor and publishes; the others wait to take over. Figures are this node's." }
            @if list.is_empty() { p class="muted" { "No sink is configured, or no namespace is covered by one yet." } }
            @else {
                table id="sinks" {
                    tr { th { "sink" } th { "type" } th { "namespace / queue" } th { "cursor here" } th { "delivered up to" } th { "waiting" } th { "oldest waiting" } th { "published" } th { "failures" } th { "last failure" } }
                    @for st in &list {
                        tr id=(format!("sink-{}-{}", st.sink, st.queue.as_deref().unwrap_or(&st.namespace))) {
                            td { (st.sink) }
                            td { (st.kind) }
                            td {
                                @if let Some(q) = &st.queue { "tasks of queue " a href=(format!("/ui/tasks?queue={}", urlencode(q))) { (q) } }
                                @else { a href=(format!("/ui/processes?ns={}", urlencode(&st.namespace))) { (st.namespace) } }
                            }
                            td { @if st.holder { (state_badge("running")) } @else { span class="muted" { "another node" } } }
                            td class="n" { (st.delivered_seq) }
                            td class="n" { @if st.holder { (st.backlog) } }
                            td { @if let Some(a) = st.oldest_age_s { (format!("{a:.1} s")) } }
                            td class="n" { (st.published) }
                            td class="n" { (st.failures) }
                            td { @if let Some((e, at)) = &st.last_error { (short(e, 160)) " " span class="muted" { (ago(now, *at)) } } }
                        }
                    }
                }
            }
        },
    ))
}
