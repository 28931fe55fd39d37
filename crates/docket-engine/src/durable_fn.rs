//! Durable functions in Rust (issue 41): a workflow written as an `async` function, run by an
//! in-process [`WorkerPool`](crate::worker::WorkerPool) on the same runs, journal and rules as
//! the Python, TypeScript and Go clients (docs/src/durable/rust.md).
//!
//! ```ignore
//! let pool = WorkerPool::new(engine.clone(), WorkerConfig::new("workflows"))
//!     .workflow("checkout", |ctx: WorkflowContext, input: Value| async move {
//!         let charge: i64 = ctx.step("charge", || async { Ok::<_, String>(42) }).await?;
//!         ctx.sleep(Duration::from_secs(3600)).await?;
//!         let paid = ctx.wait_for_event("paid", Some(Duration::from_secs(86_400))).await?;
//!         Ok(json!({"charge": charge, "paid": paid.is_some()}))
//!     });
//! engine.run_start(StartRequest { workflow: "checkout".into(), ..Default::default() }).await?;
//! ```
//!
//! A run's task is claimed like any other (kind = the workflow's name); the function runs from
//! the top with a [`WorkflowContext`] that numbers every durable call (seq 0, 1, 2, …). A call the
//! journal already holds returns what was recorded (replay); past the journal's end it is made
//! and recorded: a step's outcome before the next step runs, or with the run's next call to the
//! engine (a wait, a child's start, the end) — so a worker that dies in step 3 leaves steps 1
//! and 2 recorded, and they never run again. A sleep or wait that is not over hands the task
//! back ([`crate::Engine::run_suspend`]): the function's future is dropped at that `await` and
//! the run is replayed from the top when the wait ends, holding no worker meanwhile.

use crate::worker::{Handler, Outcome, WorkerPool};
use crate::{Engine, EngineError};
use docket_core::backoff::Backoff;
use docket_core::durable::{
    self, ChildSpec, Entry, EntryKind, EntryState, FinishRequest, NewEntry, StepsRequest,
    SuspendOutcome, SuspendRequest, Wait,
};
use docket_core::{Task, Timestamp};
use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Display;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// How a durable function's own call may fail. Propagate them with `?`: the run then fails
/// with the error's text (catching [`WorkflowError::StepFailed`] or
/// [`WorkflowError::ChildFailed`] and going on is allowed; a caught
/// [`WorkflowError::Nondeterministic`] fails the run all the same).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WorkflowError {
    /// A step spent its attempts (on the first execution and on every replay).
    #[error("step {step:?} failed after {attempts} attempt(s): {error}")]
    StepFailed {
        /// The step's name.
        step: String,
        /// Its last error, as recorded.
        error: String,
        /// Its attempts.
        attempts: i32,
    },
    /// A child run awaited did not complete.
    #[error("child run {child_id} {state}: {}", error.as_deref().unwrap_or(""))]
    ChildFailed {
        /// The child's id.
        child_id: String,
        /// `failed` or `cancelled`.
        state: String,
        /// Its error.
        error: Option<String>,
    },
    /// The code asked for another durable call than the journal holds at that place (the
    /// message names both): guard changes with [`WorkflowContext::patched`].
    #[error("{0}")]
    Nondeterministic(String),
    /// docket refused what the run recorded (a value too large, a bad name, a child's id
    /// taken by another run).
    #[error("docket refused the run's record: {0}")]
    Refused(String),
    /// A recorded value does not decode as the type asked for.
    #[error("{0}")]
    Decode(String),
    /// The function's own error ([`WorkflowError::msg`]).
    #[error("{0}")]
    Failed(String),
}

impl WorkflowError {
    /// The function's own error, from anything that displays.
    pub fn msg(e: impl Display) -> Self {
        WorkflowError::Failed(e.to_string())
    }
}

/// How a step retries in process before its error is recorded (defaults: 3 attempts, 1 s
/// doubling to at most 60 s between them, no jitter — the clients' defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepOptions {
    /// Attempts in all (≥ 1).
    pub max_attempts: i32,
    /// The pause after attempt n failed ([`Backoff::base_delay`] and its jitter).
    pub backoff: Backoff,
}

impl Default for StepOptions {
    fn default() -> Self {
        StepOptions {
            max_attempts: 3,
            backoff: Backoff {
                initial: Duration::from_secs(1),
                max: Duration::from_secs(60),
                jitter: 0.0,
                ..Backoff::default()
            },
        }
    }
}

/// A workflow function: `async fn(WorkflowContext, input) -> Result<result, WorkflowError>`;
/// closures of that shape are ones.
pub trait WorkflowFn: Send + Sync + 'static {
    /// Runs (or replays) the function.
    fn call(&self, ctx: WorkflowContext, input: Value) -> BoxFuture<'static, WorkflowResult>;
}

/// What a workflow function returns: its result (JSON), or why it failed.
pub type WorkflowResult = Result<Value, WorkflowError>;

impl<F, Fut> WorkflowFn for F
where
    F: Fn(WorkflowContext, Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = WorkflowResult> + Send + 'static,
{
    fn call(&self, ctx: WorkflowContext, input: Value) -> BoxFuture<'static, WorkflowResult> {
        Box::pin(self(ctx, input))
    }
}

/// Why an execution ended early: its future is dropped and nothing more is reported.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Halt {
    /// The run sleeps or waits: the engine took the task back.
    Suspended,
    /// The task is not this worker's any more (lease lost, run cancelled, engine unreachable).
    Stopped,
}

/// What changes while an execution runs.
#[derive(Default)]
struct Progress {
    seq: i64,
    /// Entries made but not yet sent (sent with the next call to the engine).
    pending: Vec<NewEntry>,
    /// A step's outcome is in `pending` (sent before the next step runs).
    step_pending: bool,
    /// A non-determinism met: the run ends with it even when the function caught it.
    poison: Option<String>,
    halt: Option<Halt>,
}

/// One execution of a run.
struct Execution {
    engine: Engine,
    workflow: String,
    run_id: String,
    queue: String,
    lease: String,
    journal: BTreeMap<i64, Entry>,
    journal_len: i64,
    /// The engine's time at the resume: a sleep whose end is not after it is over.
    server_now: Option<Timestamp>,
    eager: bool,
    progress: Mutex<Progress>,
    halted: Notify,
}

/// How long calls to the engine are retried when the database cannot serve (then the
/// execution stops; the task's lease runs out and another worker replays the run).
const UNAVAILABLE_FOR: Duration = Duration::from_secs(30);

impl Execution {
    fn lock(&self) -> std::sync::MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Ends this execution here: the function's future is dropped at this `await`.
    async fn halt<T>(&self, h: Halt) -> T {
        {
            let mut p = self.lock();
            if p.halt.is_none() {
                p.halt = Some(h);
            }
        }
        self.halted.notify_one();
        std::future::pending().await
    }

    /// Halts at once when the execution already ended, fails on a poisoned run.
    async fn live(&self) -> Result<(), WorkflowError> {
        let (halt, poison) = {
            let p = self.lock();
            (p.halt, p.poison.clone())
        };
        if let Some(h) = halt {
            return self.halt(h).await;
        }
        match poison {
            Some(m) => Err(WorkflowError::Nondeterministic(m)),
            None => Ok(()),
        }
    }

    /// The next seq for a call of `kind`/`name`: its journal entry (replay) or `None` (a call
    /// to make); a non-determinism error when the journal holds another call there.
    async fn next(
        &self,
        kind: EntryKind,
        name: &str,
    ) -> Result<(i64, Option<Entry>), WorkflowError> {
        self.live().await?;
        let mut p = self.lock();
        let seq = p.seq;
        let entry = self.journal.get(&seq).cloned();
        if let Some(e) = &entry {
            if let Some(m) = durable::replay_conflict(
                &self.workflow,
                &self.run_id,
                (e.kind.as_str(), &e.name),
                (kind, name),
                seq,
            ) {
                p.poison = Some(m.clone());
                return Err(WorkflowError::Nondeterministic(m));
            }
        }
        p.seq = seq + 1;
        Ok((seq, entry))
    }

    fn take_pending(&self) -> Vec<NewEntry> {
        let mut p = self.lock();
        p.step_pending = false;
        std::mem::take(&mut p.pending)
    }

    fn push(&self, e: NewEntry, step: bool) {
        let mut p = self.lock();
        p.pending.push(e);
        p.step_pending |= step;
    }

    /// Calls the engine until it answers: a lease refusal stops the execution quietly, a
    /// non-determinism poisons the run, bad input is the run's error; a database that
    /// cannot serve is retried for [`UNAVAILABLE_FOR`].
    async fn send<T, F, Fut>(&self, call: F) -> Result<T, WorkflowError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, EngineError>>,
    {
        let started = std::time::Instant::now();
        let mut delay = Duration::from_millis(100);
        loop {
            // Only a halt stops a call here: a poisoned run still sends its end.
            let halt = self.lock().halt;
            if let Some(h) = halt {
                return self.halt(h).await;
            }
            match call().await {
                Ok(v) => return Ok(v),
                Err(EngineError::Nondeterministic(m)) => {
                    let mut p = self.lock();
                    p.poison = Some(m.clone());
                    p.pending.clear();
                    p.step_pending = false;
                    return Err(WorkflowError::Nondeterministic(m));
                }
                Err(
                    e @ (EngineError::LeaseLost
                    | EngineError::Cancelled
                    | EngineError::TimedOut
                    | EngineError::NotFound(_)),
                ) => {
                    tracing::debug!(run = %self.run_id, error = %e, "the run's task is not ours any more; stopping");
                    return self.halt(Halt::Stopped).await;
                }
                Err(e @ EngineError::Unavailable(_)) => {
                    if started.elapsed() + delay > UNAVAILABLE_FOR {
                        tracing::warn!(run = %self.run_id, error = %e, "the database stayed unavailable; stopping (the run is replayed when its lease ends)");
                        return self.halt(Halt::Stopped).await;
                    }
                    tracing::warn!(run = %self.run_id, error = %e, "call failed; retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(2));
                }
                Err(e) => return Err(WorkflowError::Refused(e.to_string())),
            }
        }
    }

    /// Sends what waits (before a step runs: the last step's outcome is recorded before the
    /// next one's effects).
    async fn flush(&self) -> Result<(), WorkflowError> {
        let steps = self.take_pending();
        if steps.is_empty() {
            return Ok(());
        }
        self.send(|| {
            self.engine.run_record(
                &self.run_id,
                StepsRequest {
                    lease: self.lease.clone(),
                    steps: steps.clone(),
                },
            )
        })
        .await
        .map(|_| ())
    }

    /// A sleep, a wait for an event or for a child: its outcome and payload; halts when the
    /// engine took the task back.
    async fn wait(&self, w: Wait) -> Result<(SuspendOutcome, Option<Value>), WorkflowError> {
        let (seq, entry) = self.next(w.kind, &w.name).await?;
        if let Some(e) = entry {
            match (w.kind, e.state) {
                (EntryKind::Sleep, EntryState::Completed) => {
                    return Ok((SuspendOutcome::Due, None))
                }
                (EntryKind::Sleep, _)
                    if e.wake_at.zip(self.server_now).is_some_and(|(w, n)| w <= n) =>
                {
                    return Ok((SuspendOutcome::Due, None))
                }
                (EntryKind::Sleep, _) => {}
                (_, EntryState::Completed) => return Ok((SuspendOutcome::Event, e.output)),
                (_, EntryState::TimedOut) => return Ok((SuspendOutcome::TimedOut, None)),
                _ => {}
            }
        }
        let wait = Wait { seq, ..w };
        let steps = self.take_pending();
        let out = self
            .send(|| {
                self.engine.run_suspend(
                    &self.run_id,
                    SuspendRequest {
                        lease: self.lease.clone(),
                        steps: steps.clone(),
                        wait: wait.clone(),
                    },
                )
            })
            .await?;
        if out.outcome == SuspendOutcome::Suspended {
            return self.halt(Halt::Suspended).await;
        }
        Ok((out.outcome, out.payload))
    }

    /// Ends the run (its result or error) and its task.
    async fn finish(&self, outcome: Result<Value, String>) -> Result<(), WorkflowError> {
        let steps = self.take_pending();
        let req = |steps: Vec<NewEntry>, outcome: &Result<Value, String>| FinishRequest {
            lease: self.lease.clone(),
            steps,
            result: outcome.as_ref().ok().cloned(),
            error: outcome.as_ref().err().map(|e| durable::clip_error(e)),
        };
        let first = self
            .send(|| {
                self.engine
                    .run_finish(&self.run_id, req(steps.clone(), &outcome))
            })
            .await;
        match first {
            Ok(_) => Ok(()),
            // What waited (or the result) was refused: the run fails with the refusal.
            Err(e) => self
                .send(|| {
                    self.engine
                        .run_finish(&self.run_id, req(vec![], &Err(e.to_string())))
                })
                .await
                .map(|_| ()),
        }
    }

    /// At the function's return: the journal's entries it did not ask for (the code changed).
    fn leftover(&self) -> Option<String> {
        let seq = self.lock().seq;
        let e = self.journal.range(seq..).next()?.1;
        Some(format!(
            "non-determinism: workflow {} run {}: the code returned after {seq} call(s) but the journal has {}; entry {} is {} {:?}",
            self.workflow,
            self.run_id,
            self.journal_len,
            e.seq,
            e.kind.as_str(),
            e.name
        ))
    }
}

/// What a workflow function gets: the run and its durable calls. Cheap to clone; every
/// clone is the same execution.
#[derive(Clone)]
pub struct WorkflowContext {
    exe: Arc<Execution>,
}

/// A child run started with [`WorkflowContext::start_child`].
#[derive(Debug, Clone, PartialEq)]
pub struct ChildHandle {
    /// The child's id (`"<parent id>:<seq>"` unless given).
    pub id: String,
    /// Its workflow.
    pub workflow: String,
}

impl WorkflowContext {
    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.exe.run_id
    }

    /// The workflow's name.
    pub fn workflow(&self) -> &str {
        &self.exe.workflow
    }

    /// True while the function replays calls the journal holds (for logging: never branch
    /// on it).
    pub fn is_replaying(&self) -> bool {
        self.exe.lock().seq < self.exe.journal_len
    }

    /// Runs `f` once for the run with [`StepOptions::default`]: see [`WorkflowContext::step_with`].
    ///
    /// # Errors
    /// As [`WorkflowContext::step_with`].
    pub async fn step<T, E, F, Fut>(&self, name: &str, f: F) -> Result<T, WorkflowError>
    where
        T: Serialize + DeserializeOwned,
        E: Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        self.step_with(name, StepOptions::default(), f).await
    }

    /// Runs `f` once for the run: its result is recorded and a replay returns it without
    /// running `f`. An `Err` retries it here after the backoff, up to `opts.max_attempts`;
    /// then the error's text is recorded and [`WorkflowError::StepFailed`] returned (on every
    /// replay too). The result goes through JSON before it is returned, so the first execution
    /// sees what a replay will.
    ///
    /// # Errors
    /// [`WorkflowError::StepFailed`]; [`WorkflowError::Nondeterministic`] when the journal holds
    /// another call here; [`WorkflowError::Decode`] when the result is not JSON or a recorded
    /// one does not decode as `T`; [`WorkflowError::Refused`].
    pub async fn step_with<T, E, F, Fut>(
        &self,
        name: &str,
        opts: StepOptions,
        mut f: F,
    ) -> Result<T, WorkflowError>
    where
        T: Serialize + DeserializeOwned,
        E: Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let exe = &self.exe;
        let (seq, entry) = exe.next(EntryKind::Step, name).await?;
        if let Some(e) = entry {
            if e.state == EntryState::Failed || e.error.is_some() {
                return Err(WorkflowError::StepFailed {
                    step: name.into(),
                    error: e.error.unwrap_or_default(),
                    attempts: e.attempts,
                });
            }
            return decode(name, e.output.unwrap_or(Value::Null));
        }
        if exe.lock().step_pending {
            exe.flush().await?;
        }
        let started = exe.engine.clock.now();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let out = f().await;
            exe.live().await?;
            let (output, error) = match out {
                Ok(v) => match serde_json::to_value(&v) {
                    Ok(v) => (Some(v), None),
                    Err(e) => {
                        return Err(WorkflowError::Decode(format!(
                            "step {name:?}'s result is not JSON: {e}"
                        )))
                    }
                },
                Err(e) if attempt < opts.max_attempts.max(1) => {
                    tracing::info!(run = %exe.run_id, step = name, attempt, error = %e, "step failed; retrying");
                    tokio::time::sleep(opts.backoff.delay(attempt)).await;
                    exe.live().await?;
                    continue;
                }
                Err(e) => (None, Some(durable::clip_error(&e.to_string()))),
            };
            exe.push(
                NewEntry {
                    seq,
                    kind: EntryKind::Step,
                    name: name.into(),
                    output: output.clone(),
                    error: error.clone(),
                    attempts: Some(attempt),
                    started_at: Some(started),
                    child: None,
                },
                true,
            );
            if exe.eager {
                exe.flush().await?;
            }
            return match (output, error) {
                (_, Some(error)) => Err(WorkflowError::StepFailed {
                    step: name.into(),
                    error,
                    attempts: attempt,
                }),
                (output, None) => decode(name, output.unwrap_or(Value::Null)),
            };
        }
    }

    /// Sleeps `d` durably: the task goes back to docket and the function runs again
    /// (replaying) once the time has come; survives worker and server restarts.
    ///
    /// # Errors
    /// [`WorkflowError::Nondeterministic`]; [`WorkflowError::Refused`].
    pub async fn sleep(&self, d: Duration) -> Result<(), WorkflowError> {
        let until = docket_core::time::add(self.exe.engine.clock.now(), d);
        self.sleep_until(until).await
    }

    /// Sleeps until `t` durably (see [`WorkflowContext::sleep`]).
    ///
    /// # Errors
    /// As [`WorkflowContext::sleep`].
    pub async fn sleep_until(&self, t: Timestamp) -> Result<(), WorkflowError> {
        self.exe
            .wait(Wait {
                seq: 0,
                kind: EntryKind::Sleep,
                name: "sleep".into(),
                until: Some(t),
                timeout: None,
                child_id: None,
            })
            .await
            .map(|_| ())
    }

    /// Waits for an event `name` sent to this run ([`crate::Engine::run_send`], `POST
    /// /v1/workflow-runs/{id}/events`, `docket workflow-run send`; events sent before the wait
    /// wait in the run's mailbox, oldest first): its payload, or `None` when `timeout` passes
    /// first (`None`: wait forever).
    ///
    /// # Errors
    /// As [`WorkflowContext::sleep`].
    pub async fn wait_for_event(
        &self,
        name: &str,
        timeout: Option<Duration>,
    ) -> Result<Option<Value>, WorkflowError> {
        let (outcome, payload) = self
            .exe
            .wait(Wait {
                seq: 0,
                kind: EntryKind::Event,
                name: name.into(),
                until: None,
                timeout,
                child_id: None,
            })
            .await?;
        Ok((outcome == SuspendOutcome::Event).then(|| payload.unwrap_or(Value::Null)))
    }

    /// Starts a run of `workflow` as this run's child (id `"<run id>:<seq>"` unless `id`
    /// names one; in this run's queue). A child not awaited runs on its own; it is cancelled
    /// with its parent.
    ///
    /// # Errors
    /// As [`WorkflowContext::sleep`]; [`WorkflowError::Refused`] when the id is a run of
    /// another workflow.
    pub async fn start_child(
        &self,
        workflow: &str,
        input: Value,
        id: Option<&str>,
    ) -> Result<ChildHandle, WorkflowError> {
        let exe = &self.exe;
        let (seq, entry) = exe.next(EntryKind::Child, workflow).await?;
        if let Some(e) = entry {
            return Ok(ChildHandle {
                id: e
                    .child_id
                    .unwrap_or_else(|| durable::child_id(&exe.run_id, seq)),
                workflow: workflow.into(),
            });
        }
        let child_id = id.map_or_else(|| durable::child_id(&exe.run_id, seq), str::to_string);
        exe.push(
            NewEntry {
                seq,
                kind: EntryKind::Child,
                name: workflow.into(),
                output: None,
                error: None,
                attempts: None,
                started_at: None,
                child: Some(ChildSpec {
                    id: Some(child_id.clone()),
                    input,
                    queue: Some(exe.queue.clone()),
                }),
            },
            false,
        );
        // The child exists once this returns: its start is sent now.
        exe.flush().await?;
        Ok(ChildHandle {
            id: child_id,
            workflow: workflow.into(),
        })
    }

    /// Waits for `child`'s end (durably, as a sleep): its result.
    ///
    /// # Errors
    /// [`WorkflowError::ChildFailed`] when it failed or was cancelled; as
    /// [`WorkflowContext::sleep`].
    pub async fn child_result(&self, child: &ChildHandle) -> Result<Value, WorkflowError> {
        let (_, payload) = self
            .exe
            .wait(Wait {
                seq: 0,
                kind: EntryKind::ChildWait,
                name: child.workflow.clone(),
                until: None,
                timeout: None,
                child_id: Some(child.id.clone()),
            })
            .await?;
        let p = payload.unwrap_or(Value::Null);
        match p["state"].as_str() {
            Some("completed") => Ok(p["result"].clone()),
            state => Err(WorkflowError::ChildFailed {
                child_id: child.id.clone(),
                state: state.unwrap_or("failed").into(),
                error: p["error"].as_str().map(str::to_string),
            }),
        }
    }

    /// Starts a child and waits for its result ([`WorkflowContext::start_child`], then
    /// [`WorkflowContext::child_result`]).
    ///
    /// # Errors
    /// As those two.
    pub async fn child(&self, workflow: &str, input: Value) -> Result<Value, WorkflowError> {
        let h = self.start_child(workflow, input, None).await?;
        self.child_result(&h).await
    }

    /// A recorded value: the journal's on replay, `make()`'s (kept to be sent with the next
    /// call) the first time.
    async fn record_value(
        &self,
        kind: EntryKind,
        make: impl FnOnce() -> Value,
    ) -> Result<Value, WorkflowError> {
        let (seq, entry) = self.exe.next(kind, kind.as_str()).await?;
        if let Some(e) = entry {
            return Ok(e.output.unwrap_or(Value::Null));
        }
        let v = make();
        self.exe.push(
            NewEntry {
                seq,
                kind,
                name: kind.as_str().into(),
                output: Some(v.clone()),
                error: None,
                attempts: None,
                started_at: None,
                child: None,
            },
            false,
        );
        Ok(v)
    }

    /// The engine's time, recorded: a replay gets the same.
    ///
    /// # Errors
    /// [`WorkflowError::Nondeterministic`]; [`WorkflowError::Decode`].
    pub async fn now(&self) -> Result<Timestamp, WorkflowError> {
        let now = self.exe.engine.clock.now();
        let v = self
            .record_value(EntryKind::Now, || serde_json::json!(now))
            .await?;
        decode("now", v)
    }

    /// A number in [0, 1), recorded (15 significant digits: what every backend's JSON gives
    /// back exactly).
    ///
    /// # Errors
    /// As [`WorkflowContext::now`].
    pub async fn random(&self) -> Result<f64, WorkflowError> {
        let v = self
            .record_value(EntryKind::Random, || {
                let x: f64 = format!("{:.14e}", rand_unit()).parse().unwrap_or(0.0);
                serde_json::json!(x.min(0.999_999_999_999_999))
            })
            .await?;
        decode("random", v)
    }

    /// A random UUID (v4, as text), recorded.
    ///
    /// # Errors
    /// As [`WorkflowContext::now`].
    pub async fn uuid(&self) -> Result<String, WorkflowError> {
        let v = self
            .record_value(EntryKind::Uuid, || {
                serde_json::json!(uuid::Uuid::new_v4().to_string())
            })
            .await?;
        decode("uuid", v)
    }

    /// True when this run takes the code's new path (runs started after the change, and the
    /// first execution of any run that gets here now); false for a run that passed this point
    /// before the change (its journal holds another call here). Temporal's `patched`, DBOS's
    /// `patch`.
    ///
    /// # Errors
    /// [`WorkflowError::Nondeterministic`] on a run already poisoned.
    pub async fn patched(&self, id: &str) -> Result<bool, WorkflowError> {
        let exe = &self.exe;
        exe.live().await?;
        let mut p = exe.lock();
        let seq = p.seq;
        if seq < exe.journal_len {
            let took = exe
                .journal
                .get(&seq)
                .is_some_and(|e| e.kind == EntryKind::Patch && e.name == id);
            if took {
                p.seq += 1;
            }
            return Ok(took);
        }
        p.seq += 1;
        p.pending.push(NewEntry {
            seq,
            kind: EntryKind::Patch,
            name: id.into(),
            output: None,
            error: None,
            attempts: None,
            started_at: None,
            child: None,
        });
        Ok(true)
    }
}

fn decode<T: DeserializeOwned>(what: &str, v: Value) -> Result<T, WorkflowError> {
    serde_json::from_value(v).map_err(|e| {
        WorkflowError::Decode(format!("{what}: the recorded value does not decode: {e}"))
    })
}

/// A uniform number in [0, 1) from a v4 UUID's random bits (no generator of our own).
fn rand_unit() -> f64 {
    // The low 62 bits of a v4 UUID are random (version and variant sit above them).
    let bits = uuid::Uuid::new_v4().as_u128() & ((1u128 << 53) - 1);
    (bits as f64) / ((1u64 << 53) as f64)
}

impl WorkerPool {
    /// Registers the durable function `f` as workflow `name` (its runs' tasks have kind
    /// `name`; start runs with [`Engine::run_start`] in this pool's queue, `workflows` by
    /// default). See [the module](crate::durable_fn).
    pub fn workflow(self, name: impl Into<String>, f: impl WorkflowFn) -> Self {
        let h = WorkflowHandler {
            engine: self.engine.clone(),
            f: Arc::new(f),
            eager: self.config.eager_steps,
        };
        let mut pool = self.register(name, Arc::new(h));
        pool.workflows = true;
        pool
    }
}

/// Runs a registered workflow function for the tasks of its kind (see
/// [`WorkerPool::workflow`]).
struct WorkflowHandler {
    engine: Engine,
    f: Arc<dyn WorkflowFn>,
    eager: bool,
}

#[async_trait::async_trait]
impl Handler for WorkflowHandler {
    async fn run(&self, task: &Task) -> Outcome {
        run(&self.engine, &*self.f, task, self.eager).await;
        Outcome::Reported
    }
}

/// Runs one claimed task of a workflow: replays or starts the function, then finishes,
/// suspends or stops quietly — the engine's contract; the task is never reported otherwise.
async fn run(engine: &Engine, f: &dyn WorkflowFn, task: &Task, eager: bool) {
    use futures::FutureExt;
    let Some(run_id) = task.payload["workflow_run"].as_str().map(str::to_string) else {
        tracing::error!(
            task = task.id,
            "a workflow's task without a run id in its payload"
        );
        return;
    };
    let Some(lease) = task.lease.as_ref().map(|l| l.token.clone()) else {
        return;
    };
    let mut exe = Execution {
        engine: engine.clone(),
        workflow: task.kind.clone(),
        run_id: run_id.clone(),
        queue: task.queue.clone(),
        lease: lease.clone(),
        journal: BTreeMap::new(),
        journal_len: 0,
        server_now: None,
        eager,
        progress: Mutex::default(),
        halted: Notify::new(),
    };
    let mut input = task.payload["input"].clone();
    if task.attempt != 1 || task.stage.is_some() {
        let resumed =
            match unless_halted(&exe, exe.send(|| engine.run_resume(&run_id, lease.clone()))).await
            {
                Some(Ok(r)) => r,
                Some(Err(e)) => {
                    tracing::error!(run = %run_id, error = %e, "resume refused");
                    return;
                }
                None => return,
            };
        input = resumed.run.input.clone();
        exe.server_now = Some(resumed.now);
        exe.journal_len = resumed.steps.iter().map(|e| e.seq + 1).max().unwrap_or(0);
        exe.journal = resumed.steps.into_iter().map(|e| (e.seq, e)).collect();
        if resumed.run.state.is_finished() {
            // Ended before (the answer to its finish was lost): end the task the same way.
            let outcome = match resumed.run.state {
                durable::RunState::Completed => Ok(resumed.run.result.unwrap_or(Value::Null)),
                s => Err(resumed.run.error.unwrap_or_else(|| s.as_str().into())),
            };
            let _ = unless_halted(&exe, exe.finish(outcome)).await;
            return;
        }
    }
    let exe = Arc::new(exe);
    let ctx = WorkflowContext { exe: exe.clone() };
    let body = std::panic::AssertUnwindSafe(f.call(ctx, input)).catch_unwind();
    let out = tokio::select! {
        biased;
        _ = exe.halted.notified() => return,
        out = body => out,
    };
    let poison = exe.lock().poison.clone();
    let outcome = match out {
        _ if poison.is_some() => Err(poison.unwrap_or_default()),
        Err(p) => Err(format!("panic: {}", crate::worker::panic_message(&*p))),
        Ok(Err(e)) => Err(e.to_string()),
        Ok(Ok(v)) => match exe.leftover() {
            Some(m) => Err(m),
            None => Ok(v),
        },
    };
    if let Err(e) = &outcome {
        tracing::info!(run = %run_id, error = %e, "workflow run failed");
    }
    if let Some(Err(e)) = unless_halted(&exe, exe.finish(outcome)).await {
        tracing::error!(run = %run_id, error = %e, "the run's end was refused");
    }
}

/// A call of the execution's own (outside the function) that may halt: `None` when it did.
async fn unless_halted<T>(exe: &Execution, call: impl Future<Output = T>) -> Option<T> {
    tokio::select! {
        biased;
        out = call => Some(out),
        _ = exe.halted.notified() => None,
    }
}
