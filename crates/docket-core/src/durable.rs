//! Durable functions (issue 41): workflows written as code in a client, whose runs docket keeps.
//!
//! A **run** is one execution of a workflow function registered by name in a worker; docket
//! keeps the run and its **journal** (what the function recorded: steps' results, sleeps,
//! events received, children started, `now`/`random`/`uuid` values, patch markers). One task
//! drives each run (queue: the run's, kind: the workflow's name, payload
//! `{"workflow_run": id, "input": …}`): a worker that claims it runs the function from the top,
//! and every call already in the journal returns what was recorded (replay) — Temporal's and
//! DBOS's model. Sleeping and waiting hand the task back (`scheduled` at the wake time, stage
//! [`RESUME_STAGE`]), so a waiting run holds no worker.
//!
//! The rules, each written here once:
//! - [`check_id`], [`check_event_name`], [`Entry`] bounds: what a request may hold.
//! - [`replay_conflict`]: a journal entry and the call a replay made must agree (kind, name),
//!   else the non-determinism error names both.
//! - [`wait_outcome`]: what a sleep or a wait for an event becomes, given its entry, the
//!   mailbox and the time.
//! - [`child_event`] / [`child_id`]: how a child's end reaches its parent, and a child's id.

use crate::task::MAX_NAME_LEN;
use crate::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

/// The queue runs go to when a start names none.
pub const DEFAULT_QUEUE: &str = "workflows";
/// The stage of a run's task once it has been handed back (a replay needs the journal).
pub const RESUME_STAGE: &str = "resume";
/// Longest run id (characters).
pub const MAX_ID_LEN: usize = 200;
/// Most entries in one run's journal.
pub const MAX_ENTRIES: i64 = 100_000;
/// Most entries one request may record.
pub const MAX_ENTRIES_PER_CALL: usize = 1_000;
/// How often a run's task may fail (a crashed or timed-out worker) and be replayed, unless the
/// start says otherwise.
pub const DEFAULT_MAX_ATTEMPTS: i32 = 25;
/// A run's task's attempt timeout unless the start gives one [1 h]: one execution (from a claim
/// to a suspend or finish) may take this long, its steps' retries included. A worker that
/// dies is noticed by its lease (workers claim runs with a short lease and heartbeat), not by
/// this.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3600);
/// Event names starting with this are docket's own (a child's end); a `send` may not use it.
pub const RESERVED_PREFIX: &str = "docket:";
/// Longest `wait` of a result request.
pub const MAX_RESULT_WAIT: Duration = Duration::from_secs(60);

/// A run's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Started or resumed: its task waits for a worker or runs.
    Running,
    /// In `ctx.sleep` until `wake_at`.
    Sleeping,
    /// Waiting for the event `waiting_for` until `wake_at` (its timeout; none: forever).
    Waiting,
    /// The function returned; `result` holds its value.
    Completed,
    /// The function raised (or replay met another call than the journal's): `error`.
    Failed,
    /// Cancelled by a user (or with its parent).
    Cancelled,
}

impl RunState {
    /// Its name as stored and answered.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Sleeping => "sleeping",
            RunState::Waiting => "waiting",
            RunState::Completed => "completed",
            RunState::Failed => "failed",
            RunState::Cancelled => "cancelled",
        }
    }

    /// The state named `s`.
    ///
    /// # Errors
    /// A message for an unknown name.
    pub fn parse(s: &str) -> Result<RunState, String> {
        Ok(match s {
            "running" => RunState::Running,
            "sleeping" => RunState::Sleeping,
            "waiting" => RunState::Waiting,
            "completed" => RunState::Completed,
            "failed" => RunState::Failed,
            "cancelled" => RunState::Cancelled,
            _ => return Err(format!("unknown run state {s:?}")),
        })
    }

    /// Completed, failed or cancelled: nothing runs it again (but a retry).
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            RunState::Completed | RunState::Failed | RunState::Cancelled
        )
    }
}

/// What a journal entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// `ctx.step(name, fn)`: the function's result (or its last error).
    Step,
    /// `ctx.sleep(d)`.
    Sleep,
    /// `ctx.wait_for_event(name, timeout)`: the event's payload, or a timeout.
    Event,
    /// `ctx.start_child(workflow, input)`: the child's id.
    Child,
    /// Awaiting a child's end: `{state, result, error}`.
    ChildWait,
    /// `ctx.now()`: an RFC 3339 time.
    Now,
    /// `ctx.random()`: a number in [0, 1).
    Random,
    /// `ctx.uuid()`: a UUID.
    Uuid,
    /// `ctx.patched(id)`: the marker that this run took the patched path.
    Patch,
}

impl EntryKind {
    /// Its name as stored and answered.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Step => "step",
            EntryKind::Sleep => "sleep",
            EntryKind::Event => "event",
            EntryKind::Child => "child",
            EntryKind::ChildWait => "child_wait",
            EntryKind::Now => "now",
            EntryKind::Random => "random",
            EntryKind::Uuid => "uuid",
            EntryKind::Patch => "patch",
        }
    }

    /// The kind named `s`.
    ///
    /// # Errors
    /// A message for an unknown name.
    pub fn parse(s: &str) -> Result<EntryKind, String> {
        Ok(match s {
            "step" => EntryKind::Step,
            "sleep" => EntryKind::Sleep,
            "event" => EntryKind::Event,
            "child" => EntryKind::Child,
            "child_wait" => EntryKind::ChildWait,
            "now" => EntryKind::Now,
            "random" => EntryKind::Random,
            "uuid" => EntryKind::Uuid,
            "patch" => EntryKind::Patch,
            _ => return Err(format!("unknown entry kind {s:?}")),
        })
    }

    /// Kinds a worker records with `steps` (the others come from `suspend`).
    pub fn is_recorded(self) -> bool {
        !matches!(
            self,
            EntryKind::Sleep | EntryKind::Event | EntryKind::ChildWait
        )
    }
}

/// Where a journal entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum EntryState {
    /// Done: `output` holds its value.
    Completed,
    /// A step that spent its attempts: `error` holds the last error.
    Failed,
    /// A sleep or a wait not over yet (until `wake_at`).
    Waiting,
    /// A wait for an event whose timeout passed first.
    TimedOut,
}

impl EntryState {
    /// Its name as stored and answered.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryState::Completed => "completed",
            EntryState::Failed => "failed",
            EntryState::Waiting => "waiting",
            EntryState::TimedOut => "timed_out",
        }
    }

    /// The state named `s`.
    ///
    /// # Errors
    /// A message for an unknown name.
    pub fn parse(s: &str) -> Result<EntryState, String> {
        Ok(match s {
            "completed" => EntryState::Completed,
            "failed" => EntryState::Failed,
            "waiting" => EntryState::Waiting,
            "timed_out" => EntryState::TimedOut,
            _ => return Err(format!("unknown entry state {s:?}")),
        })
    }
}

/// A workflow run as docket keeps and answers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct WorkflowRun {
    /// Its id (1..=200 characters; a UUID v7 when the start gave none).
    pub id: String,
    /// The workflow's name (the function registered under it).
    pub workflow: String,
    /// The queue its task runs in.
    pub queue: String,
    /// Where it is.
    pub state: RunState,
    /// What it was started with.
    pub input: Value,
    /// What the function returned (completed runs).
    pub result: Option<Value>,
    /// Why it failed or was cancelled.
    pub error: Option<String>,
    /// The run that started it as a child.
    pub parent_id: Option<String>,
    /// The task that drives it.
    pub task_id: i64,
    /// Entries in its journal.
    pub steps: i64,
    /// The event it waits for (state `waiting`).
    pub waiting_for: Option<String>,
    /// When its sleep ends or its wait times out.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub wake_at: Option<Timestamp>,
    /// When it was started.
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Timestamp,
    /// When it last changed.
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: Timestamp,
    /// When it finished.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub finished_at: Option<Timestamp>,
}

/// One journal entry as docket keeps and answers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Entry {
    /// Its place in the run's calls, from 0.
    pub seq: i64,
    /// What it records.
    pub kind: EntryKind,
    /// The step's, event's or child workflow's name (`sleep`, `now`, … for the others; the
    /// patch id for a patch marker).
    pub name: String,
    /// Where it is.
    pub state: EntryState,
    /// Its value.
    pub output: Option<Value>,
    /// A failed step's last error.
    pub error: Option<String>,
    /// A step's attempts.
    pub attempts: i32,
    /// The child run it started or awaits.
    pub child_id: Option<String>,
    /// When it started.
    #[schema(value_type = String, format = DateTime)]
    pub started_at: Timestamp,
    /// When it ended.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub finished_at: Option<Timestamp>,
    /// When a sleep ends or a wait times out.
    #[schema(value_type = Option<String>, format = DateTime)]
    pub wake_at: Option<Timestamp>,
}

/// A child to start with a `child` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ChildSpec {
    /// Its id [`<parent id>:<seq>`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Its input [null].
    #[serde(default)]
    pub input: Value,
    /// Its queue [the parent's].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
}

/// An entry a worker records (`POST /v1/workflow-runs/{id}/steps`, and the `steps` of
/// `suspend` and `finish`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewEntry {
    /// Its place, from 0 (< 100,000).
    #[schema(minimum = 0, maximum = 99_999)]
    pub seq: i64,
    /// `step`, `child`, `now`, `random`, `uuid` or `patch`.
    pub kind: EntryKind,
    /// The step's name, the child's workflow, the patch id (1..=256 characters, no control
    /// characters).
    pub name: String,
    /// The value (a step's result; ≤ 1 MiB of JSON, no NUL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// A step that spent its attempts: its last error (then `output` is absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A step's attempts [1].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub attempts: Option<i32>,
    /// When the step started [now].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub started_at: Option<Timestamp>,
    /// With kind `child`: the child to start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child: Option<ChildSpec>,
}

/// Longest error text kept (characters); longer ones are cut.
pub const MAX_ERROR_LEN: usize = 64 * 1024;

/// Cuts an error text to [`MAX_ERROR_LEN`] characters.
pub fn clip_error(e: &str) -> String {
    if e.chars().count() <= MAX_ERROR_LEN {
        return e.to_string();
    }
    e.chars().take(MAX_ERROR_LEN).collect()
}

fn check_value(field: &str, v: &Value) -> Result<(), String> {
    if crate::task::has_nul(v) {
        return Err(format!("{field} must not contain NUL characters (\\u0000)"));
    }
    Ok(())
}

fn check_text(field: &str, v: &str) -> Result<(), String> {
    if v.contains('\0') {
        return Err(format!("{field} must not contain NUL characters"));
    }
    Ok(())
}

/// Checks a run id: 1 to [`MAX_ID_LEN`] characters, no control characters.
///
/// # Errors
/// A message naming the field.
pub fn check_id(field: &str, v: &str) -> Result<(), String> {
    if v.is_empty() {
        return Err(format!("{field} must not be empty"));
    }
    if v.chars().count() > MAX_ID_LEN {
        return Err(format!("{field} is longer than {MAX_ID_LEN} characters"));
    }
    if v.chars().any(char::is_control) {
        return Err(format!("{field} must not contain control characters"));
    }
    Ok(())
}

/// Checks an event name a user sends: a name ([`crate::task::check_name`]) not starting with
/// [`RESERVED_PREFIX`].
///
/// # Errors
/// A message naming the field.
pub fn check_event_name(field: &str, v: &str) -> Result<(), String> {
    crate::task::check_name(field, v)?;
    if v.starts_with(RESERVED_PREFIX) {
        return Err(format!(
            "{field} must not start with {RESERVED_PREFIX:?} (docket's own events)"
        ));
    }
    Ok(())
}

impl NewEntry {
    /// Checks the entry's fields.
    ///
    /// # Errors
    /// A message naming the bad field (`steps[i].…`).
    pub fn check(&self, at: &str) -> Result<(), String> {
        if !(0..MAX_ENTRIES).contains(&self.seq) {
            return Err(format!("{at}.seq must be in 0..{MAX_ENTRIES}"));
        }
        if !self.kind.is_recorded() {
            return Err(format!(
                "{at}.kind {} is recorded by suspend, not here",
                self.kind.as_str()
            ));
        }
        crate::task::check_name(&format!("{at}.name"), &self.name)?;
        if let Some(v) = &self.output {
            check_value(&format!("{at}.output"), v)?;
        }
        if let Some(e) = &self.error {
            check_text(&format!("{at}.error"), e)?;
            if self.kind != EntryKind::Step {
                return Err(format!("{at}.error goes only with a step"));
            }
            if self.output.is_some() {
                return Err(format!("{at}: give output or error, not both"));
            }
        }
        if let Some(a) = self.attempts {
            if a < 1 {
                return Err(format!("{at}.attempts must be at least 1"));
            }
        }
        if let Some(t) = self.started_at {
            crate::time::check(&format!("{at}.started_at"), t)?;
        }
        match (&self.child, self.kind) {
            (Some(c), EntryKind::Child) => {
                if let Some(id) = &c.id {
                    check_id(&format!("{at}.child.id"), id)?;
                }
                if let Some(q) = &c.queue {
                    crate::task::check_name(&format!("{at}.child.queue"), q)?;
                }
                check_value(&format!("{at}.child.input"), &c.input)?;
            }
            (None, EntryKind::Child) => return Err(format!("{at}.child is required")),
            (Some(_), _) => return Err(format!("{at}.child goes only with kind child")),
            (None, _) => {}
        }
        Ok(())
    }
}

/// Checks a list of entries to record: each ([`NewEntry::check`]), at most
/// [`MAX_ENTRIES_PER_CALL`], no seq twice.
///
/// # Errors
/// A message naming the bad entry.
pub fn check_entries(entries: &[NewEntry]) -> Result<(), String> {
    if entries.len() > MAX_ENTRIES_PER_CALL {
        return Err(format!(
            "steps: at most {MAX_ENTRIES_PER_CALL} entries per call"
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for (i, e) in entries.iter().enumerate() {
        e.check(&format!("steps[{i}]"))?;
        if !seen.insert(e.seq) {
            return Err(format!("steps[{i}].seq {} is given twice", e.seq));
        }
    }
    Ok(())
}

/// The id of the child a `child` entry at `seq` of run `parent` starts when it names none.
pub fn child_id(parent: &str, seq: i64) -> String {
    let id = format!("{parent}:{seq}");
    // A parent id near the limit: keep the child's within it, still unique by its tail.
    if id.chars().count() <= MAX_ID_LEN {
        return id;
    }
    let tail = format!(":{seq}");
    let keep = MAX_ID_LEN - tail.chars().count();
    format!("{}{tail}", parent.chars().take(keep).collect::<String>())
}

/// The event that tells a parent its child `child` ended.
pub fn child_event(child: &str) -> String {
    format!("{RESERVED_PREFIX}child:{child}")
}

/// The payload of a child's end event: `{"state", "result", "error"}`.
pub fn child_event_payload(run: &WorkflowRun) -> Value {
    serde_json::json!({
        "state": run.state.as_str(),
        "result": run.result,
        "error": run.error,
    })
}

/// The payload of a run's task.
pub fn task_payload(id: &str, input: &Value) -> Value {
    serde_json::json!({ "workflow_run": id, "input": input })
}

/// The non-determinism error when a replay asks for `kind`/`name` at `seq` and the journal
/// holds `entry` there; `None` when they agree.
pub fn replay_conflict(
    workflow: &str,
    run: &str,
    entry: (&str, &str),
    asked: (EntryKind, &str),
    seq: i64,
) -> Option<String> {
    let (ek, en) = entry;
    if ek == asked.0.as_str() && en == asked.1 {
        return None;
    }
    Some(format!(
        "non-determinism: workflow {workflow} run {run}: journal entry {seq} is {ek} {en:?} but the code asked for {} {:?}",
        asked.0.as_str(),
        asked.1
    ))
}

/// What a wait became ([`wait_outcome`]).
#[derive(Debug, Clone, PartialEq)]
pub enum WaitOutcome {
    /// Over: go on (a sleep past its end).
    Due,
    /// The event (or a child's end) arrived: go on with its payload.
    Event(Value),
    /// The wait's timeout passed first.
    TimedOut,
    /// Not over: hand the task back until `until`.
    Suspend {
        /// When the task runs again whatever happens (the sleep's end, the timeout; the
        /// far future for a wait without one).
        until: Timestamp,
    },
}

/// What a sleep or wait is, given its entry's `wake_at` (its end or timeout; `None`: wait
/// forever), whether an event it waits for is in the mailbox, and now. An event that arrived
/// wins over a timeout that passed at the same moment: nothing is lost that was sent in time.
pub fn wait_outcome(
    kind: EntryKind,
    wake_at: Option<Timestamp>,
    event: Option<Value>,
    now: Timestamp,
) -> WaitOutcome {
    if kind != EntryKind::Sleep {
        if let Some(p) = event {
            return WaitOutcome::Event(p);
        }
    }
    let until = wake_at.unwrap_or_else(crate::time::max);
    if until <= now {
        return if kind == EntryKind::Sleep {
            WaitOutcome::Due
        } else {
            WaitOutcome::TimedOut
        };
    }
    WaitOutcome::Suspend { until }
}

/// `POST /v1/workflow-runs`: start a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StartRequest {
    /// The workflow's name (1..=256 characters, no control characters).
    pub workflow: String,
    /// Its input (any JSON, ≤ 1 MiB, no NUL) [null].
    #[serde(default)]
    pub input: Value,
    /// The run's id (1..=200 characters): starting an id twice answers the first run
    /// [a UUID v7].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The queue its task runs in [`workflows`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Its task's priority [0].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// How often its task may crash or time out and be replayed [25].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub max_attempts: Option<i32>,
    /// Its task's attempt timeout: how long one execution (a claim to a suspend or finish) may
    /// take [1 h].
    #[serde(
        default,
        with = "crate::duration::serde_opt",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, example = "5m")]
    pub timeout: Option<Duration>,
}

impl StartRequest {
    /// Checks the request.
    ///
    /// # Errors
    /// A message naming the bad field.
    pub fn check(&self) -> Result<(), String> {
        crate::task::check_name("workflow", &self.workflow)?;
        check_value("input", &self.input)?;
        if let Some(id) = &self.id {
            check_id("id", id)?;
        }
        if let Some(q) = &self.queue {
            crate::task::check_name("queue", q)?;
        }
        if let Some(m) = self.max_attempts {
            if m < 1 {
                return Err("max_attempts must be at least 1".into());
            }
        }
        if let Some(t) = self.timeout {
            crate::duration::check_timeout("timeout", t)?;
        }
        Ok(())
    }
}

/// The answer to a start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Started {
    /// The run (the one started before, when its id was).
    pub run: WorkflowRun,
    /// Whether this request started it.
    pub created: bool,
}

/// `POST /v1/workflow-runs/{id}/steps`: record entries under the run's task's lease.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StepsRequest {
    /// The lease token of the run's task.
    pub lease: String,
    /// The entries (≤ 1,000).
    pub steps: Vec<NewEntry>,
}

/// The answer to a record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Recorded {
    /// Entries written (an entry already there with the same kind and name is not counted).
    pub recorded: usize,
}

/// The wait of a `suspend`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Wait {
    /// Its place in the journal.
    #[schema(minimum = 0, maximum = 99_999)]
    pub seq: i64,
    /// `sleep`, `event` or `child_wait`.
    pub kind: EntryKind,
    /// The event's name, the child's workflow, or `sleep`.
    pub name: String,
    /// A sleep's end (used when the journal has no entry at `seq` yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = DateTime)]
    pub until: Option<Timestamp>,
    /// A wait's timeout [none: forever].
    #[serde(
        default,
        with = "crate::duration::serde_opt",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<String>, example = "1h")]
    pub timeout: Option<Duration>,
    /// The child awaited (kind `child_wait`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_id: Option<String>,
}

impl Wait {
    /// Checks the wait.
    ///
    /// # Errors
    /// A message naming the bad field.
    pub fn check(&self) -> Result<(), String> {
        if !(0..MAX_ENTRIES).contains(&self.seq) {
            return Err(format!("wait.seq must be in 0..{MAX_ENTRIES}"));
        }
        crate::task::check_name("wait.name", &self.name)?;
        match self.kind {
            EntryKind::Sleep => {
                let Some(t) = self.until else {
                    return Err("wait.until is required for a sleep".into());
                };
                crate::time::check("wait.until", t)?;
            }
            EntryKind::Event => check_event_name("wait.name", &self.name)?,
            EntryKind::ChildWait => {
                let Some(c) = &self.child_id else {
                    return Err("wait.child_id is required for a child_wait".into());
                };
                check_id("wait.child_id", c)?;
            }
            k => {
                return Err(format!(
                    "wait.kind must be sleep, event or child_wait, not {}",
                    k.as_str()
                ))
            }
        }
        Ok(())
    }

    /// The event name this wait takes from the mailbox (`None` for a sleep).
    pub fn event(&self) -> Option<String> {
        match self.kind {
            EntryKind::Event => Some(self.name.clone()),
            EntryKind::ChildWait => self.child_id.as_deref().map(child_event),
            _ => None,
        }
    }
}

/// `POST /v1/workflow-runs/{id}/suspend`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SuspendRequest {
    /// The lease token of the run's task.
    pub lease: String,
    /// Entries to record first (as `steps`).
    #[serde(default)]
    pub steps: Vec<NewEntry>,
    /// What to wait for.
    pub wait: Wait,
}

/// What a suspend answers: go on (`due`, `event`, `timed_out`) or stop (`suspended`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SuspendOutcome {
    /// The task was handed back: the worker stops running the function.
    Suspended,
    /// The sleep is over.
    Due,
    /// The event (or the child's end) arrived: `payload`.
    Event,
    /// The wait's timeout passed.
    TimedOut,
}

/// The answer to a suspend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Suspended {
    /// What happened.
    pub outcome: SuspendOutcome,
    /// The event's payload (`event`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    /// The wait's journal entry.
    pub entry: Entry,
}

/// `POST /v1/workflow-runs/{id}/finish`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FinishRequest {
    /// The lease token of the run's task.
    pub lease: String,
    /// Entries to record first (as `steps`).
    #[serde(default)]
    pub steps: Vec<NewEntry>,
    /// What the function returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Why it failed (then the run fails; `result` must be absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl FinishRequest {
    /// Checks the request.
    ///
    /// # Errors
    /// A message naming the bad field.
    pub fn check(&self) -> Result<(), String> {
        check_entries(&self.steps)?;
        if self.result.is_some() && self.error.is_some() {
            return Err("give result or error, not both".into());
        }
        if let Some(r) = &self.result {
            check_value("result", r)?;
        }
        if let Some(e) = &self.error {
            check_text("error", e)?;
        }
        Ok(())
    }
}

/// `POST /v1/workflow-runs/{id}/resume`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResumeRequest {
    /// The lease token of the run's task.
    pub lease: String,
}

/// The answer to a resume: the run, its journal, and the server's time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Resumed {
    /// The run.
    pub run: WorkflowRun,
    /// Its journal, by seq.
    pub steps: Vec<Entry>,
    /// The server's time (a sleep whose `wake_at` is not after it is over).
    #[schema(value_type = String, format = DateTime)]
    pub now: Timestamp,
}

/// `POST /v1/workflow-runs/{id}/events`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EventRequest {
    /// The event's name (1..=256 characters; not `docket:…`).
    pub name: String,
    /// Its payload (any JSON, ≤ 1 MiB, no NUL) [null].
    #[serde(default)]
    pub payload: Value,
}

impl EventRequest {
    /// Checks the request.
    ///
    /// # Errors
    /// A message naming the bad field.
    pub fn check(&self) -> Result<(), String> {
        check_event_name("name", &self.name)?;
        check_value("payload", &self.payload)
    }
}

/// The answer to a sent event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EventSent {
    /// The event's id in the mailbox.
    pub id: i64,
    /// Whether the run was waiting for it and was woken.
    pub delivered: bool,
}

/// The journal of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EntryList {
    /// Entries by seq.
    pub steps: Vec<Entry>,
}

/// A page of runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RunList {
    /// Runs, newest first.
    pub runs: Vec<WorkflowRun>,
}

/// `GET /v1/workflow-runs` filters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct RunListParams {
    /// Only runs of this workflow.
    pub workflow: Option<String>,
    /// Only runs in this state.
    pub state: Option<RunState>,
    /// Only children of this run.
    pub parent_id: Option<String>,
    /// Only runs started at or after this time.
    #[param(value_type = Option<String>, format = DateTime)]
    pub created_after: Option<Timestamp>,
    /// Only runs started before this time (the next page: the last run's `created_at`).
    #[param(value_type = Option<String>, format = DateTime)]
    pub created_before: Option<Timestamp>,
    /// At most this many (1..=1000) [100].
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
}

impl RunListParams {
    /// Checks the filters.
    ///
    /// # Errors
    /// A message naming the bad field.
    pub fn check(&self) -> Result<(), String> {
        if let Some(w) = &self.workflow {
            crate::task::check_name("workflow", w)?;
        }
        if let Some(p) = &self.parent_id {
            check_id("parent_id", p)?;
        }
        for (f, t) in [
            ("created_after", self.created_after),
            ("created_before", self.created_before),
        ] {
            if let Some(t) = t {
                crate::time::check(f, t)?;
            }
        }
        if let Some(l) = self.limit {
            if !(1..=1000).contains(&l) {
                return Err("limit must be in 1..=1000".into());
            }
        }
        Ok(())
    }
}

const _: () = assert!(MAX_ID_LEN <= MAX_NAME_LEN);

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(s: i64) -> Timestamp {
        chrono::Utc.timestamp_opt(1_800_000_000 + s, 0).unwrap()
    }

    #[test]
    fn an_event_in_the_mailbox_wins_over_a_timeout() {
        let p = serde_json::json!({"ok": true});
        assert_eq!(
            wait_outcome(EntryKind::Event, Some(at(0)), Some(p.clone()), at(5)),
            WaitOutcome::Event(p)
        );
        assert_eq!(
            wait_outcome(EntryKind::Event, Some(at(0)), None, at(5)),
            WaitOutcome::TimedOut
        );
        assert_eq!(
            wait_outcome(EntryKind::Event, Some(at(10)), None, at(5)),
            WaitOutcome::Suspend { until: at(10) }
        );
        assert_eq!(
            wait_outcome(EntryKind::Event, None, None, at(5)),
            WaitOutcome::Suspend {
                until: crate::time::max()
            }
        );
    }

    #[test]
    fn a_sleep_is_due_at_its_end_and_ignores_events() {
        assert_eq!(
            wait_outcome(EntryKind::Sleep, Some(at(5)), None, at(5)),
            WaitOutcome::Due
        );
        assert_eq!(
            wait_outcome(
                EntryKind::Sleep,
                Some(at(6)),
                Some(serde_json::json!(1)),
                at(5)
            ),
            WaitOutcome::Suspend { until: at(6) }
        );
    }

    #[test]
    fn replay_conflicts_name_both_calls() {
        assert_eq!(
            replay_conflict("w", "r", ("step", "a"), (EntryKind::Step, "a"), 0),
            None
        );
        let e = replay_conflict(
            "checkout",
            "r1",
            ("step", "charge"),
            (EntryKind::Step, "refund"),
            2,
        )
        .unwrap();
        assert!(e.contains("journal entry 2 is step \"charge\""), "{e}");
        assert!(e.contains("asked for step \"refund\""), "{e}");
    }

    #[test]
    fn child_ids_stay_within_the_limit() {
        assert_eq!(child_id("p", 3), "p:3");
        let long = "x".repeat(MAX_ID_LEN);
        let c = child_id(&long, 12);
        assert_eq!(c.chars().count(), MAX_ID_LEN);
        assert!(c.ends_with(":12"));
        check_id("id", &c).unwrap();
    }

    #[test]
    fn bad_entries_are_refused() {
        let ok = NewEntry {
            seq: 0,
            kind: EntryKind::Step,
            name: "a".into(),
            output: Some(serde_json::json!(1)),
            error: None,
            attempts: None,
            started_at: None,
            child: None,
        };
        check_entries(std::slice::from_ref(&ok)).unwrap();
        let cases = [
            NewEntry {
                seq: -1,
                ..ok.clone()
            },
            NewEntry {
                seq: MAX_ENTRIES,
                ..ok.clone()
            },
            NewEntry {
                name: String::new(),
                ..ok.clone()
            },
            NewEntry {
                name: "a\0".into(),
                ..ok.clone()
            },
            NewEntry {
                kind: EntryKind::Sleep,
                ..ok.clone()
            },
            NewEntry {
                output: Some(serde_json::json!("\0")),
                ..ok.clone()
            },
            NewEntry {
                error: Some("e".into()),
                ..ok.clone()
            },
            NewEntry {
                attempts: Some(0),
                ..ok.clone()
            },
            NewEntry {
                kind: EntryKind::Child,
                ..ok.clone()
            },
            NewEntry {
                child: Some(ChildSpec::default()),
                ..ok.clone()
            },
        ];
        for c in cases {
            assert!(check_entries(std::slice::from_ref(&c)).is_err(), "{c:?}");
        }
        assert!(check_entries(&[ok.clone(), ok.clone()]).is_err());
        assert!(check_event_name("name", "docket:child:x").is_err());
        assert!(check_id("id", &"y".repeat(MAX_ID_LEN + 1)).is_err());
    }
}

#[cfg(test)]
mod floats {
    /// A replay must see the number the first run recorded: JSON floats read back exactly
    /// (serde_json's `float_roundtrip`; without it `0.49860269306373284` read back one unit off).
    #[test]
    fn recorded_floats_read_back_exactly() {
        for text in [
            "0.49860269306373284",
            "0.1",
            "1e-300",
            "0.30000000000000004",
        ] {
            let v: serde_json::Value = serde_json::from_str(text).unwrap();
            let f: f64 = text.parse().unwrap();
            assert_eq!(v.as_f64(), Some(f), "{text}");
            assert_eq!(
                serde_json::to_string(&v).unwrap().parse::<f64>().unwrap(),
                f
            );
        }
    }
}
