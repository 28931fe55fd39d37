//! Rate limits: each limit, what it admitted and delayed, how many of its keys wait now.

use super::layout::*;
use super::prelude::*;

pub(super) async fn rate_limits(State(s): State<AppState>) -> Page {
    let list = s.engine.rate_limit_list().await.map_err(fail)?;
    Ok(layout(
        "Rate limits",
        "/ui/rate-limits",
        html! {
            h1 { "Rate limits" }
            p class="muted" { "Named limits that tasks count against (their rate_limit: a name, or name:partition for one budget per partition), enforced when tasks are claimed, cluster-wide. Change them with PUT /v1/rate-limits/{name} or docket rate-limit set." }
            @if list.is_empty() { p class="muted" { "No rate limit yet." } }
            @else {
                table id="rate-limits" {
                    tr {
                        th { "name" } th { "kind" } th { "limit" } th { "period" } th { "keys" }
                        th { "admitted" }
                        th title="claims that met a key at its limit" { "delayed" }
                        th title="keys waiting for their next window or token now" { "blocked now" }
                        th { "changed" }
                    }
                    @for l in &list {
                        tr id=(format!("rate-limit-{}", l.name)) {
                            td { (l.name) }
                            td { (l.kind.as_str()) }
                            td { (l.limit) }
                            td { (l.period.map(docket_core::duration::format).unwrap_or_else(|| "—".into())) }
                            td { (l.keys) }
                            td { (l.admitted) }
                            td { (l.delayed) }
                            td {
                                @if l.blocked > 0 { span class="st st-scheduled" { (l.blocked) } }
                                @else { "0" }
                            }
                            td { (ts(l.updated_at)) }
                        }
                    }
                }
            }
        },
    ))
}
