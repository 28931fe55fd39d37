//! What a command run by `docket worker` tells the worker besides its exit status: JSON lines it
//! appends to the file named by `DOCKET_CONTROL` (one object per line, read in order, a later
//! line overriding an earlier one's keys).
//!
//! | line | when | effect |
//! |---|---|---|
//! | `{"progress": any}` | any time | sent with the next heartbeat (every lease/3) and at the end |
//! | `{"next_stage": "S", "payload"?: any, "priority"?: n, "run_in"?: "10m"}` | exit 0 | the stage is done: the task goes on to stage `S` (asyncflow's multi-stage tasks) with stdout as the stage's result |
//! | `{"retry_in": "30s"}` | non-zero exit | retry after this delay instead of the backoff (node-daemons' overridable `delay()`) |
//! | `{"permanent": true}` | non-zero exit | fail for good: no more attempts |
//! | `{"error": "message"}` | non-zero exit | the failure's message instead of stderr's tail |
//!
//! A line that is not such an object fails the attempt with a message naming the line (it is
//! retried as any failure); the file is read up to [`MAX_CONTROL_BYTES`].

use serde::Deserialize;
use serde_json::Value;
use std::time::Duration;

/// Most bytes of a control file read; past it the attempt fails.
pub const MAX_CONTROL_BYTES: u64 = 1024 * 1024;

/// One line of the control file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    #[serde(default)]
    progress: Option<Value>,
    #[serde(default)]
    next_stage: Option<String>,
    #[serde(default)]
    payload: Option<Value>,
    #[serde(default)]
    priority: Option<i32>,
    #[serde(default, with = "docket_core::duration::serde_opt")]
    run_in: Option<Duration>,
    #[serde(default, with = "docket_core::duration::serde_opt")]
    retry_in: Option<Duration>,
    #[serde(default)]
    permanent: Option<bool>,
    #[serde(default)]
    error: Option<String>,
}

/// Where the task goes next when the command exits 0 with a `next_stage` line.
#[derive(Debug, Clone, PartialEq)]
pub struct Handoff {
    /// The next stage.
    pub stage: String,
    /// The next stage's payload \[kept\].
    pub payload: Option<Value>,
    /// The new priority \[kept\].
    pub priority: Option<i32>,
    /// Start the next stage after this delay \[now\].
    pub run_in: Option<Duration>,
}

/// Everything the control file said.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Control {
    /// The last progress written.
    pub progress: Option<Value>,
    /// Stage hand-off (exit 0).
    pub next: Option<Handoff>,
    /// Retry delay (non-zero exit).
    pub retry_in: Option<Duration>,
    /// Fail for good (non-zero exit).
    pub permanent: bool,
    /// Failure message (non-zero exit).
    pub error: Option<String>,
}

/// Parses a control file's text.
///
/// # Errors
/// A message naming the first bad line (1-based) and what is wrong with it.
pub fn parse(text: &str) -> Result<Control, String> {
    let mut c = Control::default();
    for (i, raw) in text.lines().enumerate() {
        let raw = raw.trim();
        if raw.is_empty() {
            continue;
        }
        let l: Line = serde_json::from_str(raw).map_err(|e| {
            format!("control file line {}: {e} (want a JSON object such as {{\"progress\": 50}}, {{\"next_stage\": \"S\"}}, {{\"retry_in\": \"30s\"}}, {{\"permanent\": true}}, {{\"error\": \"…\"}})", i + 1)
        })?;
        if l.next_stage.is_none()
            && (l.payload.is_some() || l.priority.is_some() || l.run_in.is_some())
        {
            return Err(format!(
                "control file line {}: payload, priority and run_in go with next_stage",
                i + 1
            ));
        }
        if let Some(s) = &l.next_stage {
            docket_core::task::check_name("next_stage", s)
                .map_err(|e| format!("control file line {}: {e}", i + 1))?;
        }
        if let Some(p) = l.progress {
            c.progress = Some(p);
        }
        if let Some(stage) = l.next_stage {
            c.next = Some(Handoff {
                stage,
                payload: l.payload,
                priority: l.priority,
                run_in: l.run_in,
            });
        }
        if l.retry_in.is_some() {
            c.retry_in = l.retry_in;
        }
        if let Some(p) = l.permanent {
            c.permanent = p;
        }
        if l.error.is_some() {
            c.error = l.error;
        }
    }
    Ok(c)
}

/// Reads and parses the control file at `path` (a missing or empty file says nothing).
///
/// # Errors
/// See [`parse`]; a file over [`MAX_CONTROL_BYTES`] or not UTF-8.
pub async fn read(path: &std::path::Path) -> Result<Control, String> {
    use tokio::io::AsyncReadExt;
    let f = match tokio::fs::File::open(path).await {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Control::default()),
        Err(e) => return Err(format!("control file: {e}")),
    };
    let mut bytes = Vec::new();
    f.take(MAX_CONTROL_BYTES + 1)
        .read_to_end(&mut bytes)
        .await
        .map_err(|e| format!("control file: {e}"))?;
    if bytes.len() as u64 > MAX_CONTROL_BYTES {
        return Err(format!("control file: over {MAX_CONTROL_BYTES} bytes"));
    }
    let text = String::from_utf8(bytes).map_err(|_| "control file: not UTF-8".to_string())?;
    parse(&text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lines_in_order_later_keys_win() {
        let c = parse(
            "{\"progress\": 10}\n\n{\"progress\": {\"pct\": 50}}\n{\"next_stage\": \"ship\", \"payload\": {\"n\": 2}, \"run_in\": \"5m\"}\n{\"retry_in\": \"30s\", \"error\": \"smtp down\"}\n{\"permanent\": true}\n",
        )
        .unwrap();
        assert_eq!(c.progress, Some(json!({"pct": 50})));
        assert_eq!(
            c.next,
            Some(Handoff {
                stage: "ship".into(),
                payload: Some(json!({"n": 2})),
                priority: None,
                run_in: Some(Duration::from_secs(300)),
            })
        );
        assert_eq!(c.retry_in, Some(Duration::from_secs(30)));
        assert!(c.permanent);
        assert_eq!(c.error.as_deref(), Some("smtp down"));
        assert_eq!(parse("").unwrap(), Control::default());
    }

    #[test]
    fn bad_lines_are_named() {
        for (text, want) in [
            ("{\"progress\": 1}\nnot json", "line 2"),
            ("{\"stage\": \"x\"}", "unknown field"),
            ("{\"payload\": 1}", "go with next_stage"),
            ("{\"next_stage\": \"\"}", "next_stage"),
            ("{\"retry_in\": \"soon\"}", "line 1"),
            ("[1, 2]", "line 1"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }
}
