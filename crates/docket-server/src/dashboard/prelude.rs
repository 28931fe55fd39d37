//! What every dashboard page uses: its imports, the stylesheet and the page size.

pub(super) use crate::actions::{self, TaskAction};
pub(super) use crate::auth::{CanAct, Csrf, CSRF_FIELD};
pub(super) use crate::error::ApiError;
pub(super) use crate::state::AppState;
pub(super) use axum::extract::{Path, Query, State};
pub(super) use axum::http::{header, HeaderMap, StatusCode};
pub(super) use axum::response::{IntoResponse, Redirect, Response};
pub(super) use axum::Extension;
pub(super) use docket_core::api::TaskListParams;
pub(super) use docket_core::process::{Direction, HistoryRange, ProcessStatus};
pub(super) use docket_core::{Task, TaskState, Timestamp};
pub(super) use maud::{html, Markup, DOCTYPE};
pub(super) use serde::Deserialize;
pub(super) use serde_json::Value;

/// Rows per list page.
pub(super) const PAGE: i64 = 50;

/// A button `data-copy="ID"` copies element ID's text (the page's only script of its own; the
/// policy allows scripts from this server only, so it is an asset, not inline).
pub(super) const COPY: &str = "document.addEventListener('click',function(e){var b=e.target.closest('[data-copy]');if(!b)return;var t=document.getElementById(b.getAttribute('data-copy'));if(t&&navigator.clipboard){navigator.clipboard.writeText(t.textContent).then(function(){b.textContent='Copied'})}})";

pub(super) const CLOSE_ON_LEAVE: &str = "addEventListener('pagehide',function(){htmx.trigger(document.body,'htmx:beforeCleanupElement')})";

pub(super) const STYLE: &str = "
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:.6em 1.2em;display:flex;gap:1.4em;align-items:center}
header a{color:#cfd6e4;text-decoration:none}header a:hover{color:#fff}header b{font-size:1.1em;color:#fff}
main{padding:1em 1.2em}h1{font-size:1.3em;margin:.2em 0 .6em}h2{font-size:1.05em;margin:1.2em 0 .4em}
table{border-collapse:collapse;background:#fff;min-width:40%}th,td{padding:.3em .7em;border-bottom:1px solid #e3e6eb;text-align:left;vertical-align:top}
th{background:#eef0f4;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
.st{padding:.05em .45em;border-radius:.3em;font-size:.9em;background:#e3e6eb}
.st-completed,.st-running_{background:#d3f2dc}.st-running{background:#d6e6ff}.st-available{background:#fff2c7}
.st-discarded,.st-error{background:#ffd9d6}.st-cancelled{background:#e9e3f7}.st-retryable{background:#ffe6c7}
pre{background:#fff;border:1px solid #e3e6eb;padding:.6em;overflow:auto;max-height:24em}
form.f{display:flex;gap:.5em;align-items:end;margin-bottom:.8em;flex-wrap:wrap}label{display:flex;flex-direction:column;font-size:.85em}
input,select,button{font:inherit;padding:.25em .4em}button,.btn{background:#1d2330;color:#fff;border:0;border-radius:.3em;padding:.35em .8em;text-decoration:none;cursor:pointer}
.btn.warn,button.warn{background:#b3261e}dl{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:.2em 1em;background:#fff;padding:.8em;border:1px solid #e3e6eb}
.tabs{display:flex;gap:.3em;flex-wrap:wrap;margin:.2em 0 .8em}.tabs a{padding:.25em .6em;border:1px solid #e3e6eb;border-radius:.3em;background:#fff;color:#1d2330;text-decoration:none}
.tabs a[aria-current=page]{background:#1d2330;color:#fff}.tabs .n{font-variant-numeric:tabular-nums;color:inherit;opacity:.8}
dt{color:#5b6476}dd{margin:0}.muted{color:#5b6476}.err{color:#b3261e}.actions{display:flex;gap:.5em;margin:.6em 0}
header{flex-wrap:wrap;row-gap:.3em}table{display:block;overflow-x:auto;max-width:100%;width:max-content}svg{max-width:100%;height:auto}
a:focus-visible,button:focus-visible,input:focus-visible,select:focus-visible{outline:2px solid #2b6cb0;outline-offset:2px}
.skip{position:absolute;left:-999em}.skip:focus{left:.5em;top:.5em;background:#fff;color:#1d2330;padding:.3em .6em;z-index:9}
dd,code,td{overflow-wrap:anywhere}pre{max-width:100%;box-sizing:border-box}
@media (max-width:700px){main{padding:.6em}header{gap:.8em;padding:.5em .8em}dl{grid-template-columns:minmax(0,1fr)}dt{margin-top:.4em}}
";
