//! The dashboard's page frame and the small pieces every page uses: badges, times, JSON,
//! error pages, confirmation forms.

use super::prelude::*;

pub(super) fn layout(title: &str, live_url: &str, body: Markup) -> Markup {
    layout_with_top(title, live_url, html! {}, body)
}

pub(super) fn state_badge(s: &str) -> Markup {
    html! { span class=(format!("st st-{s}")) { (s) } }
}

pub(super) fn ts(t: Timestamp) -> String {
    t.format("%Y-%m-%d %H:%M:%S").to_string()
}

pub(super) fn ago(now: Timestamp, t: Timestamp) -> String {
    let s = (now - t).num_seconds();
    let (v, u) = match s.abs() {
        a if a < 120 => (a, "s"),
        a if a < 7200 => (a / 60, "min"),
        a if a < 172_800 => (a / 3600, "h"),
        a => (a / 86400, "d"),
    };
    if s >= 0 {
        format!("{v} {u} ago")
    } else {
        format!("in {v} {u}")
    }
}

pub(super) fn json_block(v: &Value) -> Markup {
    html! { pre { (serde_json::to_string_pretty(v).unwrap_or_default()) } }
}

pub(super) fn error_page(e: ApiError) -> Response {
    let status = e.status;
    let body = layout(
        "Error",
        "",
        html! {
            h1 { "Error" }
            p class="err" { (e.code) ": " (e.message) }
            p { a href="javascript:history.back()" { "Back" } }
        },
    );
    (status, body).into_response()
}

pub(super) type Page = Result<Markup, Response>;

pub(super) fn fail(e: impl Into<ApiError>) -> Response {
    error_page(e.into())
}

/// A page: `top` (a filter form, say) above the live region, so a refresh never eats what is
/// typed there; `body` is the live region, re-fetched from `live_url` on each change.
pub(super) fn layout_with_top(title: &str, live_url: &str, top: Markup, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " — docket" }
                style { (maud::PreEscaped(STYLE)) }
                script src="/ui/assets/htmx.min.js" {}
                script src="/ui/assets/sse.min.js" {}
                // Close the page's event stream when it is left, so it never holds one of the
                // browser's six connections per host (back/forward cache).
                script src="/ui/assets/close.js" {}
                script src="/ui/assets/copy.js" {}
            }
            body hx-ext="sse" sse-connect="/ui/events" {
                a class="skip" href="#live" { "Skip to the page's content" }
                header aria-label="docket dashboard" {
                    b { "docket" }
                    a href="/" { "Overview" }
                    a href="/ui/tasks" { "Tasks" }
                    a href="/ui/processes" { "Processes" }
                    a href="/ui/schedules" { "Schedules" }
                    a href="/ui/batches" { "Batches" }
                    a href="/ui/runs" { "Runs" }
                    a href="/ui/rate-limits" { "Rate limits" }
                    a href="/ui/workers" { "Workers" }
                    a href="/ui/sinks" { "Sinks" }
                    a href="/ui/dead-letters" { "Dead letters" }
                    a href="/ui/audit" { "Audit" }
                    a href="/metrics" { "Metrics" }
                    a href="/ui/logout" class="right" { "Log out" }
                }
                @if !top.0.is_empty() { div style="padding:1em 1.2em 0" { (top) } }
                main id="live" tabindex="-1" hx-get=(live_url) hx-trigger="sse:changed" hx-select="#live" hx-swap="outerHTML" {
                    (body)
                }
            }
        }
    }
}

pub(super) fn short(s: &str, n: usize) -> String {
    let line = s.lines().next().unwrap_or("");
    if line.chars().count() > n {
        format!("{}…", line.chars().take(n).collect::<String>())
    } else {
        line.to_string()
    }
}

pub(super) fn urlencode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

pub(super) fn confirm(
    csrf: &Csrf,
    title: &str,
    question: Markup,
    action_url: &str,
    yes: &str,
    back: &str,
) -> Markup {
    layout(
        title,
        "",
        html! {
            h1 { (title) }
            p { (question) }
            form method="post" action=(action_url) class="actions" {
                input type="hidden" name=(CSRF_FIELD) value=(csrf.0);
                button type="submit" class="warn" id="confirm" { (yes) }
                a href=(back) { "No, go back" }
            }
        },
    )
}

pub(super) fn dashboard_actor(headers: &HeaderMap) -> String {
    actions::actor(headers, "dashboard")
}

pub(super) fn no_action(action: &str) -> Response {
    fail(ApiError::not_found(format!("no action {action:?}")))
}

/// A form field as a filter: trimmed, `None` when empty.
pub(super) fn some(v: &Option<String>) -> Option<String> {
    v.as_ref()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// `48210` → `48,210`.
pub(super) fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}
