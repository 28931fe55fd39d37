//! `docket worker -- COMMAND ARGS...`: claims tasks over HTTP and runs COMMAND once per task.
//!
//! Contract with the command: the task's payload JSON on stdin; in the environment
//! `DOCKET_TASK_ID`, `DOCKET_TASK_ATTEMPT`, `DOCKET_TASK_MAX_ATTEMPTS`, `DOCKET_TASK_KIND`,
//! `DOCKET_TASK_STAGE` (empty for a single-stage task), `DOCKET_QUEUE`, `DOCKET_TRACE_ID`,
//! `DOCKET_WORKER` (this worker's name) and `DOCKET_CONTROL`, a file the command may append
//! JSON lines to (see [`crate::control`]: progress, the next stage, a retry delay, a permanent
//! failure, an error message). Exit 0 completes the task with stdout as its result (JSON when it
//! parses, else a string), or hands it to its next stage; any other exit fails the attempt with
//! the tail of stderr (it is retried per the task's backoff, or the control file's
//! `retry_in`/`permanent`). The worker heartbeats every lease/3 while the command runs, carrying
//! new progress; a `cancelled` answer kills the command.
//!
//! The command runs in its own process group, so everything it starts goes with it: at the
//! task's `timeout` the group gets SIGTERM, then SIGKILL after [`WorkerOptions::kill_grace`],
//! and the attempt fails with `timeout`. A report (complete/fail) that meets a connection error
//! or a 5xx (the node or its database restarting) is retried with backoff while the lease lasts
//! — the lease token makes a repeated report harmless — and only then abandoned.

use crate::{Client, ClientError};
use docket_core::api::ClaimRequest;
use docket_core::Task;
use serde_json::Value;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Most bytes of stderr kept in a failure message.
pub const STDERR_TAIL_BYTES: usize = 4096;

/// Options of [`run`].
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Queue to work.
    pub queue: String,
    /// Only tasks of these kinds (empty: every kind of the queue).
    pub kinds: Vec<String>,
    /// The worker's labels (issue 43, `docket_core::labels`): tasks that require or prefer
    /// them come to it [none].
    pub labels: docket_core::labels::Labels,
    /// Only tasks at these stages (empty: any stage).
    pub stages: Vec<String>,
    /// Commands run at once.
    pub concurrency: usize,
    /// Lease per claim; heartbeats every lease/3 extend it
    /// ([`docket_core::lease::heartbeat_every`]).
    pub lease: Duration,
    /// Worker name recorded on tasks.
    pub name: String,
    /// Program and arguments.
    pub command: Vec<String>,
    /// How long running commands may finish after shutdown starts.
    pub grace: Duration,
    /// After SIGTERM at the task's timeout, how long the command has before SIGKILL.
    pub kill_grace: Duration,
    /// How often the worker reports its state to the server (`POST /v1/workers/{name}/report`);
    /// zero: never.
    pub report_interval: Duration,
    /// How often a supervisor restarted this worker (shown in its reports).
    pub restarts: u32,
}

/// What the worker holds, for its reports.
#[derive(Default)]
struct Held {
    tasks: std::collections::BTreeSet<i64>,
    stopped: bool,
}

fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
}

fn report_of(
    opts: &WorkerOptions,
    held: &std::sync::Mutex<Held>,
    started_at: docket_core::Timestamp,
) -> docket_core::api::WorkerReport {
    use docket_core::api::WorkerState;
    let h = held
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    docket_core::api::WorkerReport {
        state: if h.stopped {
            WorkerState::Stop
        } else if h.tasks.is_empty() {
            WorkerState::Idle
        } else {
            WorkerState::Work
        },
        tasks: h.tasks.iter().copied().collect(),
        queue: Some(opts.queue.clone()),
        kinds: opts.kinds.clone(),
        // The report's numbers are the document's int32.
        concurrency: i32::try_from(opts.concurrency).ok(),
        host: hostname(),
        pid: i32::try_from(std::process::id()).ok(),
        restarts: i32::try_from(opts.restarts).unwrap_or(i32::MAX),
        started_at: Some(started_at),
        interval: opts.report_interval,
        labels: opts.labels.clone(),
    }
}

/// Reports every `report_interval` until `stop` fires (node-daemons' worker states). A report
/// that fails is logged and the next one tried: the server being away must not stop the work.
async fn report_loop(
    client: Client,
    opts: Arc<WorkerOptions>,
    held: Arc<std::sync::Mutex<Held>>,
    started_at: docket_core::Timestamp,
    stop: CancellationToken,
) {
    loop {
        let r = report_of(&opts, &held, started_at);
        if let Err(e) = client.worker_report(&opts.name, &r).await {
            tracing::debug!(error = %e, "worker report failed; the next one follows");
        }
        tokio::select! {
            _ = tokio::time::sleep(opts.report_interval) => {}
            _ = stop.cancelled() => return,
        }
    }
}

/// What happened to one task (for logs and tests).
#[derive(Debug, Clone)]
pub enum Ran {
    /// Exit 0.
    Completed,
    /// Non-zero exit or spawn failure.
    Failed(String),
    /// The server said the lease was lost or the task cancelled.
    Abandoned(String),
}

/// Works `opts.queue` until `cancel` fires; then stops claiming and lets running commands
/// finish within the grace period. Commands still running after it are killed and their tasks
/// handed back (failed with `retry_in` 0) to run again at once.
///
/// # Errors
/// Never for task failures; when the command list is empty, or the server refuses the token
/// (401 `unauthenticated`, 403 `forbidden`).
pub async fn run(
    client: Client,
    opts: WorkerOptions,
    cancel: CancellationToken,
) -> Result<(), String> {
    if opts.command.is_empty() {
        return Err("no command given: docket worker --queue Q -- COMMAND ARGS...".into());
    }
    let sem = Arc::new(Semaphore::new(opts.concurrency.max(1)));
    let opts = Arc::new(opts);
    let held = Arc::new(std::sync::Mutex::new(Held::default()));
    let started_at = docket_core::Clock::now(&docket_core::SystemClock);
    let reporting = CancellationToken::new();
    let reporter = (!opts.report_interval.is_zero()).then(|| {
        tokio::spawn(report_loop(
            client.clone(),
            opts.clone(),
            held.clone(),
            started_at,
            reporting.clone(),
        ))
    });
    let kill = CancellationToken::new();
    let mut running = tokio::task::JoinSet::new();
    let mut backoff = Duration::from_millis(200);
    let mut fatal = None;
    while !cancel.is_cancelled() {
        let first = tokio::select! {
            p = sem.clone().acquire_owned() => p.expect("semaphore open"),
            _ = cancel.cancelled() => break,
        };
        let free = sem.available_permits() + 1;
        let ask = ClaimRequest {
            worker: opts.name.clone(),
            limit: Some(i64::try_from(free).unwrap_or(i64::MAX)),
            kinds: (!opts.kinds.is_empty()).then(|| opts.kinds.clone()),
            stages: (!opts.stages.is_empty()).then(|| opts.stages.clone()),
            labels: (!opts.labels.is_empty()).then(|| opts.labels.clone()),
            lease: Some(opts.lease),
            wait: Some(Duration::from_secs(10)),
            claim_id: Some(uuid::Uuid::new_v4().to_string()),
            ..ClaimRequest::default()
        };
        let claim = tokio::select! {
            r = client.claim_with(&opts.queue, &ask) => r,
            _ = cancel.cancelled() => {
                // Stopped mid-claim: whatever the server took for this claim would wait out
                // its leases and lose an attempt. Hand it back (the server finds it even if
                // this overtakes the claim).
                let id = ask.claim_id.as_deref().unwrap_or_default();
                let back = tokio::time::timeout(opts.grace.min(Duration::from_secs(10)), async {
                    let mut wait = Duration::from_millis(100);
                    loop {
                        match client.release_claim(&opts.queue, id).await {
                            Err(e) if transient(&e) => {
                                tracing::warn!(error = %e, "releasing the claim failed; retrying");
                                tokio::time::sleep(wait).await;
                                wait = (wait * 2).min(Duration::from_secs(2));
                            }
                            r => return r,
                        }
                    }
                })
                .await;
                match back {
                    Ok(Ok(ids)) if !ids.is_empty() => tracing::info!(?ids, "stopped mid-claim: handed back what it took"),
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => tracing::warn!(error = %e, "could not hand back the claim; its leases will run out"),
                    Err(_) => tracing::warn!("handing back the claim timed out; its leases will run out"),
                }
                break;
            }
        };
        let tasks = match claim {
            Ok(t) => {
                backoff = Duration::from_millis(200);
                t
            }
            // A token that is missing, revoked or lacks the queue will not start working by
            // waiting: stop with the server's message.
            Err(e) if matches!(e.code(), Some("unauthenticated" | "forbidden")) => {
                fatal = Some(e.to_string());
                break;
            }
            Err(e) => {
                tracing::warn!(error = %e, "claim failed; retrying in {backoff:?}");
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = cancel.cancelled() => break,
                }
                backoff = (backoff * 2).min(Duration::from_secs(10));
                continue;
            }
        };
        let mut first = Some(first);
        for task in tasks {
            let permit = match first.take() {
                Some(p) => p,
                None => sem.clone().acquire_owned().await.expect("semaphore open"),
            };
            let (client, opts, kill) = (client.clone(), opts.clone(), kill.clone());
            let held = held.clone();
            let id = task.id;
            held.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .tasks
                .insert(id);
            let span = docket_core::trace::task_span(&task);
            running.spawn(tracing::Instrument::instrument(
                async move {
                    let r = run_one(&client, &opts, task, kill).await;
                    match &r {
                        Ran::Completed => tracing::info!("completed"),
                        Ran::Failed(e) => tracing::warn!(error = %e, "failed"),
                        Ran::Abandoned(e) => tracing::warn!(reason = %e, "abandoned"),
                    }
                    held.lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .tasks
                        .remove(&id);
                    drop(permit);
                },
                span,
            ));
        }
        while running.try_join_next().is_some() {}
    }
    while running.try_join_next().is_some() {}
    tracing::info!(
        running = running.len(),
        "stopping: no more claims; waiting for running commands"
    );
    let drained = tokio::time::timeout(opts.grace, async {
        while running.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            "grace period over; killing commands (their tasks are handed back to run again at once)"
        );
        kill.cancel();
        while running.join_next().await.is_some() {}
    }
    reporting.cancel();
    if let Some(r) = reporter {
        let _ = r.await;
        held.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .stopped = true;
        // The last word: stopped, nothing in hand (a failed send leaves it to go lost).
        let last = report_of(&opts, &held, started_at);
        let _ = tokio::time::timeout(
            Duration::from_secs(2),
            client.worker_report(&opts.name, &last),
        )
        .await;
    }
    fatal.map_or(Ok(()), Err)
}

/// The control file of one attempt (see [`crate::control`]): made empty and private before the
/// command starts, removed when the attempt is over.
struct ControlFile(std::path::PathBuf);

impl ControlFile {
    fn create(task: i64, attempt: i32) -> Self {
        let path = std::env::temp_dir().join(format!(
            "docket-control-{}-{task}-{attempt}-{:x}",
            std::process::id(),
            rand_suffix()
        ));
        let mut o = std::fs::OpenOptions::new();
        o.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
        if let Err(e) = o.open(&path) {
            tracing::warn!(path = %path.display(), error = %e, "cannot create the control file; the command may create it");
        }
        ControlFile(path)
    }
}

impl Drop for ControlFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A few random bits for a file name, without a dependency for it.
fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

/// Kills the command's whole process group when dropped (the command may have started
/// children, e.g. `sh -c`); `kill_on_drop` alone reaches only the direct child.
struct Group(Option<u32>);

impl Group {
    fn signal(&self, sig: &str) {
        #[cfg(unix)]
        if let Some(pid) = self.0.and_then(|p| i32::try_from(p).ok()) {
            use nix::sys::signal::{killpg, Signal};
            let s = if sig == "TERM" {
                Signal::SIGTERM
            } else {
                Signal::SIGKILL
            };
            let _ = killpg(nix::unistd::Pid::from_raw(pid), s);
        }
        #[cfg(not(unix))]
        let _ = sig;
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.signal("KILL");
    }
}

/// Whether a failed report is worth sending again: the server was unreachable or answered
/// 5xx. A 4xx (lease lost, cancelled, timed out, not found) is final.
fn transient(e: &ClientError) -> bool {
    match e {
        ClientError::Api { status, .. } => *status >= 500,
        ClientError::Http(_) => true,
        ClientError::Decode(_) | ClientError::Config(_) => false,
    }
}

/// Sends a report until it is answered, retrying transient failures with backoff (200 ms
/// doubling to 5 s) until `until`; then gives up (the lease expires and the task runs again).
async fn report<T, F, Fut>(
    task: i64,
    until: std::time::Instant,
    mut send: F,
) -> Result<T, ClientError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ClientError>>,
{
    let mut wait = Duration::from_millis(200);
    loop {
        match send().await {
            Err(e) if transient(&e) && std::time::Instant::now() + wait < until => {
                tracing::warn!(task, error = %e, "report failed; retrying in {wait:?} while the lease lasts");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(5));
            }
            r => return r,
        }
    }
}

fn tail(bytes: &[u8]) -> String {
    let start = bytes.len().saturating_sub(STDERR_TAIL_BYTES);
    String::from_utf8_lossy(&bytes[start..]).trim().to_string()
}

async fn run_one(
    client: &Client,
    opts: &WorkerOptions,
    task: Task,
    kill: CancellationToken,
) -> Ran {
    let lease = task.lease.clone().map(|l| l.token).unwrap_or_default();
    let started = std::time::Instant::now();
    // Local deadlines: the attempt's (`docket_core::lease::deadline`, less its start: the
    // budget, counted on this machine's monotonic clock from receipt, as the two machines'
    // clocks may differ), and the lease, never past it (moved on by each heartbeat).
    let budget = task
        .attempted_at
        .and_then(|a| docket_core::lease::deadline(&task).map(|d| docket_core::time::since(d, a)));
    let deadline = budget.map(|b| started + b);
    let lease_from = |now: std::time::Instant| {
        now + docket_core::lease::lease_span(
            opts.lease,
            deadline.map(|d| d.saturating_duration_since(now)),
        )
    };
    let mut lease_until = lease_from(started);
    let control = ControlFile::create(task.id, task.attempt);
    let mut cmd = tokio::process::Command::new(&opts.command[0]);
    #[cfg(unix)]
    cmd.process_group(0);
    cmd.args(&opts.command[1..])
        .env("DOCKET_TASK_ID", task.id.to_string())
        .env("DOCKET_TASK_ATTEMPT", task.attempt.to_string())
        .env("DOCKET_TASK_MAX_ATTEMPTS", task.max_attempts.to_string())
        .env("DOCKET_TASK_KIND", &task.kind)
        .env("DOCKET_TASK_STAGE", task.stage.as_deref().unwrap_or(""))
        .env("DOCKET_QUEUE", &task.queue)
        .env("DOCKET_TRACE_ID", task.trace_id.as_deref().unwrap_or(""))
        .env("DOCKET_WORKER", &opts.name)
        .env("DOCKET_CONTROL", &control.0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let msg = format!("cannot start {:?}: {e}", opts.command[0]);
            let _ = report(task.id, lease_until, || {
                client.fail(task.id, &lease, &msg, &opts.name, None, false)
            })
            .await;
            return Ran::Failed(msg);
        }
    };
    let group = Group(child.id());
    let payload = serde_json::to_vec(&task.payload).unwrap_or_default();
    let mut stdin = child.stdin.take().expect("piped stdin");
    tokio::spawn(async move {
        // A command that does not read stdin closes it early; that is fine.
        let _ = stdin.write_all(&payload).await;
    });
    let output = child.wait_with_output();
    tokio::pin!(output);
    let every = docket_core::lease::heartbeat_every(opts.lease);
    let timeout = async {
        match deadline {
            Some(d) => tokio::time::sleep_until(d.into()).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(timeout);
    // Progress the server has; a heartbeat carries what the control file says when it differs.
    let mut sent: Option<Value> = None;
    let out = loop {
        tokio::select! {
            o = &mut output => break o,
            _ = tokio::time::sleep(every) => {
                // A control file that does not parse yet is judged at the end.
                let progress = crate::control::read(&control.0)
                    .await
                    .ok()
                    .and_then(|c| c.progress)
                    .filter(|p| sent.as_ref() != Some(p));
                match client.heartbeat(task.id, &lease, progress.clone()).await {
                    Ok(_) => {
                        lease_until = lease_from(std::time::Instant::now());
                        if progress.is_some() {
                            sent = progress;
                        }
                    }
                    Err(ClientError::Api { code, .. })
                        if code == "cancelled" || code == "lease_lost" || code == "timed_out" =>
                    {
                        // Dropping `group` kills the command and its children.
                        return Ran::Abandoned(code);
                    }
                    Err(e) => tracing::warn!(task = task.id, error = %e, "heartbeat failed; will retry"),
                }
            }
            _ = &mut timeout => {
                tracing::warn!(task = task.id, timeout = ?task.timeout, "timeout: sending SIGTERM to the command's process group");
                group.signal("TERM");
                if tokio::time::timeout(opts.kill_grace, &mut output).await.is_err() {
                    tracing::warn!(task = task.id, "still running after SIGTERM; SIGKILL");
                }
                drop(group);
                let msg = "timeout".to_string();
                // The server may have failed the attempt itself already (409 timed_out).
                let _ = report(task.id, deadline.unwrap_or(started) + opts.lease, || {
                    client.fail(task.id, &lease, &msg, &opts.name, None, false)
                })
                .await;
                return Ran::Failed(msg);
            }
            _ = kill.cancelled() => {
                drop(group);
                // Killed after the grace: handed back to run again at once, not left to wait
                // for its lease (the attempt ran, so it counts).
                let msg = "worker stopped: killed after the grace period".to_string();
                let _ = tokio::time::timeout(
                    Duration::from_secs(2),
                    client.fail(task.id, &lease, &msg, &opts.name, Some(Duration::ZERO), false),
                )
                .await;
                return Ran::Abandoned(msg);
            }
        }
    };
    drop(group);
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            let msg = format!("waiting for the command failed: {e}");
            let _ = report(task.id, lease_until, || {
                client.fail(task.id, &lease, &msg, &opts.name, None, false)
            })
            .await;
            return Ran::Failed(msg);
        }
    };
    let said = match crate::control::read(&control.0).await {
        Ok(c) => c,
        Err(msg) => {
            // What the command asked for cannot be known: fail the attempt, saying why.
            return match report(task.id, lease_until, || {
                client.fail(task.id, &lease, &msg, &opts.name, None, false)
            })
            .await
            {
                Ok(_) => Ran::Failed(msg),
                Err(e) => Ran::Abandoned(e.to_string()),
            };
        }
    };
    if said.progress.is_some() && said.progress != sent {
        // The last progress goes to the server even when the command was quicker than a
        // heartbeat (best effort: the result below matters more).
        let _ = client
            .heartbeat(task.id, &lease, said.progress.clone())
            .await;
    }
    if out.status.success() {
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let result = serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text));
        let body = docket_core::api::CompleteRequest {
            id: None,
            lease: lease.clone(),
            result,
            next_stage: said.next.as_ref().map(|n| n.stage.clone()),
            payload: said.next.as_ref().and_then(|n| n.payload.clone()),
            priority: said.next.as_ref().and_then(|n| n.priority),
            run_at: None,
            run_in: said.next.as_ref().and_then(|n| n.run_in),
        };
        match report(task.id, lease_until, || {
            client.complete_with(task.id, &body)
        })
        .await
        {
            Ok(_) => Ran::Completed,
            Err(e) => Ran::Abandoned(e.to_string()),
        }
    } else {
        let status = match out.status.code() {
            Some(c) => format!("exit status {c}"),
            None => "killed by a signal".to_string(),
        };
        let err = tail(&out.stderr);
        let msg = match said.error {
            Some(m) => m,
            None if err.is_empty() => status,
            None => format!("{status}: {err}"),
        };
        match report(task.id, lease_until, || {
            client.fail(
                task.id,
                &lease,
                &msg,
                &opts.name,
                said.retry_in,
                said.permanent,
            )
        })
        .await
        {
            Ok(_) => Ran::Failed(msg),
            Err(e) => Ran::Abandoned(e.to_string()),
        }
    }
}
