//! SQL tasks for docket (pg_task, seed 004).
//!
//! - [`pgtask`]: pg_task's `task` table, created and served in any PostgreSQL database from
//!   outside it — no extension, no `shared_preload_libraries`.
//! - [`SqlHandler`]: docket's own `sql` task kind, run by the same executor and formatted the
//!   same way, against targets the server's configuration allows ([`SqlTargets`]).
//! - [`wire`] and [`format`]: the session and pg_task's output/error text they share.

pub mod format;
pub mod pgtask;
pub mod target;
pub mod tls;
pub mod wire;

use async_trait::async_trait;
use docket_core::Task;
use docket_engine::worker::{Handler, Outcome};
use format::{format_error, plain_error, Format, Output};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;
use wire::{Session, WireError};

pub use target::PgTaskConfig;

/// The task kind run by [`SqlHandler`].
pub const SQL_KIND: &str = "sql";

/// The queue `sql` tasks go to when they name none.
pub const SQL_QUEUE: &str = "sql";

/// Which databases `sql` tasks may run on. Running SQL is powerful, so it is opt-in: a task
/// may name a target configured here, or give a raw connection string only when
/// `allow_raw` is set. TOML shape of `[sql]`: `targets = { name = "postgres://..." }`,
/// `allow_raw = false`, `concurrency = 10`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SqlTargets {
    /// Named targets: name → connection string (libpq `key=value` or URL).
    #[serde(default)]
    pub targets: BTreeMap<String, String>,
    /// Whether a task may give a connection string of its own.
    #[serde(default)]
    pub allow_raw: bool,
    /// `sql` tasks each node runs at once [10].
    #[serde(default)]
    pub concurrency: Option<usize>,
}

/// Payload of a `sql` task (JSON). `input` and `target` are required; the formatting fields
/// are pg_task's columns with pg_task's defaults.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SqlPayload {
    /// SQL to run (any number of statements).
    pub input: String,
    /// A configured target's name, or a connection string where the server allows it.
    pub target: String,
    /// Header line for results of more than one column [true].
    #[serde(default = "yes")]
    pub header: bool,
    /// Quote only text-like columns [true].
    #[serde(default = "yes")]
    pub string: bool,
    /// Column separator, one character or empty for none [tab].
    #[serde(default = "tab")]
    pub delimiter: String,
    /// Escape character, one character or empty [empty].
    #[serde(default)]
    pub escape: String,
    /// Quote character, one character or empty [empty].
    #[serde(default)]
    pub quote: String,
    /// Text for SQL NULL [`\N`].
    #[serde(default = "null_text")]
    pub null: String,
}

fn yes() -> bool {
    true
}
fn tab() -> String {
    "\t".into()
}
fn null_text() -> String {
    "\\N".into()
}

fn one(field: &str, s: &str) -> Result<Option<char>, String> {
    let mut it = s.chars();
    match (it.next(), it.next()) {
        (None, _) => Ok(None),
        (Some(c), None) => Ok(Some(c)),
        _ => Err(format!("{field} must be one character or empty")),
    }
}

impl SqlPayload {
    /// The formatting options.
    ///
    /// # Errors
    /// A message naming a field of more than one character.
    pub fn format(&self) -> Result<Format, String> {
        Ok(Format {
            header: self.header,
            string: self.string,
            delimiter: one("delimiter", &self.delimiter)?,
            escape: one("escape", &self.escape)?,
            quote: one("quote", &self.quote)?,
            null: self.null.clone(),
        })
    }
}

/// Why a `sql` task is refused at enqueue.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SqlRefusal {
    /// The payload is not a `sql` payload.
    #[error("invalid sql payload: {0}")]
    Payload(String),
    /// The target is neither configured nor allowed as a raw connection string.
    #[error("{0}")]
    Target(String),
}

impl SqlTargets {
    /// Whether this server runs `sql` tasks at all.
    pub fn enabled(&self) -> bool {
        self.allow_raw || !self.targets.is_empty()
    }

    /// Parses and checks a payload: its shape, its formatting options and its target.
    ///
    /// # Errors
    /// [`SqlRefusal`] with a message for the client.
    pub fn check(&self, payload: &Value) -> Result<(SqlPayload, wire::ConnInfo), SqlRefusal> {
        let p: SqlPayload = serde_json::from_value(payload.clone())
            .map_err(|e| SqlRefusal::Payload(e.to_string()))?;
        if p.input.trim().is_empty() {
            return Err(SqlRefusal::Payload("input is empty".into()));
        }
        p.format().map_err(SqlRefusal::Payload)?;
        let conn = self.resolve(&p.target)?;
        Ok((p, conn))
    }

    fn resolve(&self, target: &str) -> Result<wire::ConnInfo, SqlRefusal> {
        if let Some(url) = self.targets.get(target) {
            return wire::parse_conninfo(url)
                .map(wire::with_env_password)
                .map_err(|e| SqlRefusal::Target(format!("target {target}: {e}")));
        }
        let looks_raw = target.contains("://") || target.contains('=');
        if !looks_raw {
            return Err(SqlRefusal::Target(format!(
                "unknown sql target {target:?}; configured: {}",
                if self.targets.is_empty() {
                    "none".to_string()
                } else {
                    self.targets.keys().cloned().collect::<Vec<_>>().join(", ")
                }
            )));
        }
        if !self.allow_raw {
            return Err(SqlRefusal::Target(
                "raw connection strings are not allowed on this server; name a configured target (sql.allow_raw enables them)".into(),
            ));
        }
        wire::parse_conninfo(target).map_err(|e| SqlRefusal::Target(e.to_string()))
    }
}

/// What one run of SQL produced, in pg_task's words.
#[derive(Debug, Clone, PartialEq)]
pub struct SqlRun {
    /// pg_task's `output` (None: nothing).
    pub output: Option<String>,
    /// pg_task's `error` (None: success).
    pub error: Option<String>,
    /// Whether a retry may help (connection trouble, serialization failure, deadlock).
    pub transient: bool,
    /// Backend pid of the session that ran it (0 when none was opened).
    pub pid: i32,
}

/// Runs `input` in a fresh session on `conn` with pg_task's rules: the statement timeout is
/// `timeout` (zero: the server's), an open transaction is committed and says `COMMIT`.
pub async fn run_sql(
    conn: &wire::ConnInfo,
    input: &str,
    format: Format,
    timeout: Duration,
    application_name: &str,
) -> SqlRun {
    let mut s = match Session::connect(conn, application_name).await {
        Ok(s) => s,
        Err(e) => {
            return SqlRun {
                output: None,
                error: Some(match &e {
                    WireError::Refused(se) => format_error(se, None),
                    other => plain_error(&other.to_string()),
                }),
                transient: !matches!(e, WireError::Config(_) | WireError::Refused(_)),
                pid: 0,
            }
        }
    };
    let pid = s.pid();
    let result = async {
        if !timeout.is_zero() {
            s.execute(&format!("SET statement_timeout = {}", timeout.as_millis()))
                .await?;
        }
        let mut out = Output::new(format);
        let end = s.query(input, &mut out).await?;
        let mut error = end.error.as_ref().map(|e| format_error(e, Some(input)));
        let mut transient = end.error.as_ref().is_some_and(|e| transient_code(e.code()));
        if error.is_none() {
            error = end.copy.map(plain_error);
        }
        if end.status == b'T' && error.is_none() {
            let c = s.query("COMMIT", &mut out).await?;
            if let Some(e) = c.error {
                transient = transient_code(e.code());
                error = Some(format_error(&e, Some(input)));
            }
        }
        let output = match out.finish() {
            Ok(o) => o,
            Err(m) => {
                error = Some(plain_error(&m));
                None
            }
        };
        Ok::<_, WireError>(SqlRun {
            output,
            error,
            transient,
            pid,
        })
    }
    .await;
    match result {
        Ok(r) => {
            s.close().await;
            r
        }
        Err(e) => SqlRun {
            output: None,
            error: Some(match &e {
                WireError::Fatal(se) => format_error(se, Some(input)),
                other => plain_error(&other.to_string()),
            }),
            transient: true,
            pid,
        },
    }
}

/// SQLSTATE classes worth a retry: connection exceptions (08), transaction rollback —
/// serialization failure, deadlock — (40), insufficient resources (53), operator
/// intervention (57).
fn transient_code(code: &str) -> bool {
    matches!(code.get(..2), Some("08" | "40" | "53" | "57")) && code != "57014" // query_canceled: the timeout, which a retry would hit again
}

/// Runs `sql` tasks: the result is the formatted output (a JSON string, or null when the
/// input produced nothing); an SQL error fails the task for good with pg_task's error text,
/// except transient ones (see [`SqlRun::transient`]), which are retried with backoff.
pub struct SqlHandler {
    targets: SqlTargets,
    application_name: String,
}

impl SqlHandler {
    /// A handler running tasks against `targets`.
    pub fn new(targets: SqlTargets, node: &str) -> Self {
        SqlHandler {
            targets,
            application_name: format!("docket sql {node}"),
        }
    }
}

/// The statement timeout of a `sql` task's attempt: what is left of its timeout
/// (`attempted_at + timeout`, the deadline the store enforces) at `now`, less a margin of a
/// tenth of the timeout (at most 500 ms) in which the statement's error reaches the store.
/// Without the margin the statement, which starts after the session connects, would be
/// cancelled after the deadline and the attempt would fail as a bare `timeout` instead of
/// with PostgreSQL's "canceling statement due to statement timeout". At least 1 ms (0 would
/// mean no timeout).
pub fn statement_budget(task: &Task, now: docket_core::Timestamp) -> Duration {
    let margin = (task.timeout / 10).min(Duration::from_millis(500));
    let start = task.attempted_at.unwrap_or(now);
    let deadline = docket_core::time::add(start, task.timeout);
    docket_core::time::since(deadline, now)
        .saturating_sub(margin)
        .max(Duration::from_millis(1))
}

#[async_trait]
impl Handler for SqlHandler {
    async fn run(&self, task: &Task) -> Outcome {
        let (p, conn) = match self.targets.check(&task.payload) {
            Ok(x) => x,
            Err(e) => return Outcome::Discard(e.to_string()),
        };
        let format = p.format().expect("checked");
        let r = run_sql(
            &conn,
            &p.input,
            format,
            statement_budget(task, chrono::Utc::now()),
            &self.application_name,
        )
        .await;
        match r.error {
            None => Outcome::Complete(r.output.map_or(Value::Null, Value::String)),
            Some(e) if r.transient => Outcome::Retry {
                error: e,
                retry_in: None,
            },
            Some(e) => Outcome::Discard(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn statement_budget_ends_before_the_deadline() {
        let at = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
            .unwrap()
            .to_utc();
        let mut t = docket_core::NewTask::new("sql", Value::Null)
            .resolve(None, &docket_core::task::TaskDefaults::default(), at)
            .unwrap()
            .into_task(1, at);
        t.timeout = Duration::from_secs(1);
        t.attempted_at = Some(at);
        let later = |ms| docket_core::time::add_ms(at, ms);
        assert_eq!(statement_budget(&t, at), Duration::from_millis(900));
        assert_eq!(statement_budget(&t, later(50)), Duration::from_millis(850));
        assert_eq!(statement_budget(&t, later(5000)), Duration::from_millis(1));
        t.timeout = Duration::from_secs(3600);
        assert_eq!(
            statement_budget(&t, at),
            Duration::from_secs(3600) - Duration::from_millis(500)
        );
    }

    #[test]
    fn targets_are_opt_in() {
        let mut t = SqlTargets::default();
        assert!(!t.enabled());
        t.targets
            .insert("main".into(), "host=127.0.0.1 user=postgres".into());
        let ok = t.check(&json!({"input": "SELECT 1", "target": "main"}));
        assert!(ok.is_ok());
        let raw = t.check(&json!({"input": "SELECT 1", "target": "postgres://x@127.0.0.1/db"}));
        assert!(matches!(raw, Err(SqlRefusal::Target(m)) if m.contains("not allowed")));
        let unknown = t.check(&json!({"input": "SELECT 1", "target": "other"}));
        assert!(matches!(unknown, Err(SqlRefusal::Target(m)) if m.contains("main")));
        t.allow_raw = true;
        assert!(t
            .check(&json!({"input": "SELECT 1", "target": "postgres://x@127.0.0.1/db"}))
            .is_ok());
        assert!(matches!(
            t.check(&json!({"input": "SELECT 1", "target": "main", "quote": "ab"})),
            Err(SqlRefusal::Payload(_))
        ));
        assert!(matches!(
            t.check(&json!({"input": " ", "target": "main"})),
            Err(SqlRefusal::Payload(_))
        ));
        assert!(matches!(
            t.check(&json!({"sql": "SELECT 1", "target": "main"})),
            Err(SqlRefusal::Payload(_))
        ));
    }
}

/// The `sql` kind's rules for the engine ([`docket_engine::kinds`]): a `sql` task needs the
/// `sql` scope, a configured target and a valid payload, and goes to the `sql` queue when it
/// names none. The codes are the API's (`sql_disabled` 400, `invalid_sql_payload` 400,
/// `sql_target_not_allowed` 403).
#[derive(Debug, Clone)]
pub struct SqlKind(pub std::sync::Arc<SqlTargets>);

impl docket_engine::kinds::KindHook for SqlKind {
    fn kind(&self) -> &str {
        SQL_KIND
    }

    fn scope(&self) -> Option<docket_core::auth::Scope> {
        Some(docket_core::auth::Scope::Sql)
    }

    fn check(&self, t: &mut docket_core::NewTask) -> Result<(), docket_engine::kinds::KindRefusal> {
        use docket_engine::kinds::KindRefusal;
        if !self.0.enabled() {
            return Err(KindRefusal {
                status: 400,
                code: "sql_disabled",
                message: "sql tasks are not enabled on this server: configure [sql] targets".into(),
            });
        }
        match self.0.check(&t.payload) {
            Ok(_) => {}
            Err(e @ SqlRefusal::Payload(_)) => {
                return Err(KindRefusal {
                    status: 400,
                    code: "invalid_sql_payload",
                    message: e.to_string(),
                })
            }
            Err(e @ SqlRefusal::Target(_)) => {
                return Err(KindRefusal {
                    status: 403,
                    code: "sql_target_not_allowed",
                    message: e.to_string(),
                })
            }
        }
        if t.queue.is_none() {
            t.queue = Some(SQL_QUEUE.into());
        }
        Ok(())
    }
}
