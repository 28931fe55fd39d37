//! The audit log: who did what, when.

use super::layout::*;
use super::prelude::*;

pub(super) async fn audit(State(s): State<AppState>) -> Page {
    let entries = s.engine.audit_list(200).await.map_err(fail)?;
    Ok(layout(
        "Audit",
        "/ui/audit",
        html! {
            h1 { "Audit log" }
            p class="muted" { "Every action taken through the dashboard, the CLI or the API: who, when, what." }
            table id="audit" {
                tr { th { "when" } th { "who" } th { "action" } th { "target" } th { "detail" } }
                @for e in &entries {
                    tr { td { (ts(e.at)) } td { (e.actor) } td { (e.action) } td { (e.target) }
                         td { (e.detail.as_ref().map(|d| d.to_string()).unwrap_or_default()) } }
                }
            }
        },
    ))
}
