//! `docket worker`: turns a command into a task handler over the HTTP API; `--config FILE`
//! supervises several named workers (node-daemons' cluster master); `list` shows them all.

use super::serve::default_node_name;
use crate::cli::{WorkerArgs, WorkerCmd};
use crate::{on_signal, telemetry};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub(crate) async fn worker(a: WorkerArgs) -> Result<()> {
    if let Some(WorkerCmd::List { server, json }) = a.cmd {
        return list(server.client()?, json).await;
    }
    let telemetry = telemetry::init(a.log_format, "info", a.otlp_endpoint.as_deref())?;
    let r = match a.config.clone() {
        Some(path) => supervise(a, &path).await,
        None => worker_inner(a).await,
    };
    // The batch exporter's blocking flush must not run on a runtime thread.
    tokio::task::spawn_blocking(move || telemetry.shutdown()).await?;
    r
}

pub(crate) async fn worker_inner(a: WorkerArgs) -> Result<()> {
    let cancel = CancellationToken::new();
    on_signal(cancel.clone());
    let name = a
        .name
        .unwrap_or_else(|| format!("worker-{}", default_node_name()));
    let opts = docket_client::command_worker::WorkerOptions {
        queue: a.queue,
        kinds: a.kinds,
        labels: a.labels.into_iter().collect(),
        stages: a.stages,
        concurrency: a.concurrency,
        lease: a.lease,
        name,
        command: a.command,
        grace: a.grace,
        kill_grace: a.kill_grace,
        report_interval: a.report_interval,
        restarts: a.restarts,
    };
    tracing::info!(queue = %opts.queue, concurrency = opts.concurrency, server = %a.server.server, "worker started");
    docket_client::command_worker::run(a.server.client()?, opts, cancel)
        .await
        .map_err(anyhow::Error::msg)
}

async fn list(c: docket_client::Client, json: bool) -> Result<()> {
    let l = c.worker_list().await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&l.workers)?);
        return Ok(());
    }
    println!(
        "{:<24} {:<6} {:<16} {:>5} {:>8} {:>8}  {:<20}  TASKS",
        "NAME", "STATE", "QUEUE", "CONC", "PID", "RESTARTS", "LABELS"
    );
    for w in l.workers {
        println!(
            "{:<24} {:<6} {:<16} {:>5} {:>8} {:>8}  {:<20}  {}",
            w.name,
            format!("{:?}", w.state).to_lowercase(),
            w.report.queue.unwrap_or_default(),
            w.report.concurrency.unwrap_or(0),
            w.report.pid.map(|p| p.to_string()).unwrap_or_default(),
            w.report.restarts,
            docket_core::labels::display(&w.report.labels),
            w.report
                .tasks
                .iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(",")
        );
    }
    Ok(())
}

/// `workers.toml`: node-daemons' `config.workers` (a map of named workers, each `enabled` or
/// not) and its `shutdownInterval`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SupervisorConfig {
    /// On SIGTERM/SIGINT every worker stops claiming and finishes what it holds within this;
    /// commands still running then are killed (their tasks come back when leases expire).
    #[serde(
        default = "default_shutdown",
        with = "docket_core::duration::serde_str"
    )]
    pub shutdown_interval: Duration,
    /// How often each worker reports its state [5s].
    #[serde(default, with = "docket_core::duration::serde_opt")]
    pub report_interval: Option<Duration>,
    /// The workers, by name.
    pub workers: BTreeMap<String, WorkerConf>,
}

fn default_shutdown() -> Duration {
    Duration::from_secs(30)
}

/// One named worker.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WorkerConf {
    /// Queue to work.
    pub queue: String,
    /// Only these kinds (empty: every kind of the queue).
    #[serde(default)]
    pub kinds: Vec<String>,
    /// Only tasks at these stages (empty: any stage).
    #[serde(default)]
    pub stages: Vec<String>,
    /// The worker's labels (`labels = { gpu = "a100" }`) [none].
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Commands run at once [1].
    #[serde(default = "one")]
    pub concurrency: usize,
    /// Program and arguments.
    pub command: Vec<String>,
    /// Started at all [true].
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Lease per task [30s].
    #[serde(default, with = "docket_core::duration::serde_opt")]
    pub lease: Option<Duration>,
}

fn one() -> usize {
    1
}

fn yes() -> bool {
    true
}

/// Reads and checks a supervisor config; every problem is listed.
pub(crate) fn load_config(path: &Path) -> Result<SupervisorConfig> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let c: SupervisorConfig = toml::from_str(&text)
        .with_context(|| format!("{} is not a valid workers file", path.display()))?;
    let mut bad = vec![];
    if c.workers.values().all(|w| !w.enabled) {
        bad.push("no enabled worker: add [workers.NAME] with enabled = true".to_string());
    }
    if c.shutdown_interval.is_zero() || c.shutdown_interval > Duration::from_secs(24 * 3600) {
        bad.push("shutdown_interval must be within 1ms..=24h".into());
    }
    for (name, w) in &c.workers {
        if let Err(e) = docket_core::task::check_name("worker name", name) {
            bad.push(e);
        }
        if let Err(e) = docket_core::task::check_name(&format!("workers.{name}.queue"), &w.queue) {
            bad.push(e);
        }
        if w.command.is_empty() || w.command[0].is_empty() {
            bad.push(format!("workers.{name}.command must name a program"));
        }
        if !(1..=10_000).contains(&w.concurrency) {
            bad.push(format!(
                "workers.{name}.concurrency must be within 1..=10000"
            ));
        }
    }
    if !bad.is_empty() {
        bail!(
            "invalid workers file {}:\n  {}",
            path.display(),
            bad.join("\n  ")
        );
    }
    Ok(c)
}

/// The `docket worker` arguments of one named worker of the file.
fn worker_args(name: &str, w: &WorkerConf, conf: &SupervisorConfig, a: &WorkerArgs) -> Vec<String> {
    let report = conf.report_interval.unwrap_or(a.report_interval);
    let mut args: Vec<String> = vec![
        "worker".into(),
        "--name".into(),
        name.to_string(),
        "--queue".into(),
        w.queue.clone(),
        "--concurrency".into(),
        w.concurrency.to_string(),
        "--lease".into(),
        docket_core::duration::format(w.lease.unwrap_or(a.lease)),
        "--grace".into(),
        docket_core::duration::format(conf.shutdown_interval),
        "--kill-grace".into(),
        docket_core::duration::format(a.kill_grace),
        "--report-interval".into(),
        docket_core::duration::format(report),
        "--server".into(),
        a.server.server.clone(),
    ];
    for k in &w.kinds {
        args.push("--kind".into());
        args.push(k.clone());
    }
    for s in &w.stages {
        args.push("--stage".into());
        args.push(s.clone());
    }
    for (k, v) in &w.labels {
        args.push("--label".into());
        args.push(format!("{k}={v}"));
    }
    args.push("--".into());
    args.extend(w.command.iter().cloned());
    args
}

/// The enabled workers of a file, by name, with their arguments.
fn wanted(conf: &SupervisorConfig, a: &WorkerArgs) -> BTreeMap<String, Vec<String>> {
    conf.workers
        .iter()
        .filter(|(_, w)| w.enabled)
        .map(|(n, w)| (n.clone(), worker_args(n, w, conf, a)))
        .collect()
}

/// A running named worker: its arguments and the token that stops it.
struct Running {
    args: Vec<String>,
    stop: CancellationToken,
    done: tokio::task::JoinHandle<()>,
}

/// Runs every enabled worker of the file as its own `docket worker` process (a crash of one
/// leaves the others running), restarts one that dies with backoff (1 s doubling to 60 s; a
/// worker that ran a minute starts from 1 s again), and on SIGTERM/SIGINT stops them all within
/// `shutdown_interval` — node-daemons' cluster master. SIGHUP re-reads the file (node-daemons'
/// planned hot reload): added workers start, removed or disabled ones stop as on SIGTERM (they
/// finish what they hold), changed ones stop and start again with the new settings, the rest
/// are not touched. A file that no longer loads is reported and the running set kept.
async fn supervise(a: WorkerArgs, path: &Path) -> Result<()> {
    let mut conf = load_config(path)?;
    let exe = std::env::current_exe().context("cannot find the docket binary")?;
    let cancel = CancellationToken::new();
    on_signal(cancel.clone());
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .context("cannot listen for SIGHUP")?;
    let token = a.server.token.clone();
    let start = |name: String, args: Vec<String>, after: Option<tokio::task::JoinHandle<()>>| {
        let stop = cancel.child_token();
        let (exe, token, s) = (exe.clone(), token.clone(), stop.clone());
        let a2 = args.clone();
        let done = tokio::spawn(async move {
            // A changed worker starts once its old process has stopped (one name, one process).
            if let Some(old) = after {
                let _ = old.await;
            }
            keep_running(&name, &exe, &a2, token, s).await;
        });
        Running { args, stop, done }
    };
    let mut running: BTreeMap<String, Running> = BTreeMap::new();
    for (name, args) in wanted(&conf, &a) {
        running.insert(name.clone(), start(name, args, None));
    }
    tracing::info!(workers = running.len(), file = %path.display(), "supervisor started");
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = hup.recv() => {}
        }
        let new = match load_config(path) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %format!("{e:#}"), "SIGHUP: the workers file does not load; keeping the running workers");
                continue;
            }
        };
        let want = wanted(&new, &a);
        let (mut started, mut stopped, mut restarted) = (0, 0, 0);
        let names: Vec<String> = running.keys().cloned().collect();
        for name in names {
            match want.get(&name) {
                Some(args) if *args == running[&name].args => {}
                Some(args) => {
                    let old = running.remove(&name).expect("listed");
                    old.stop.cancel();
                    running.insert(name.clone(), start(name, args.clone(), Some(old.done)));
                    restarted += 1;
                }
                None => {
                    let old = running.remove(&name).expect("listed");
                    old.stop.cancel();
                    stopped += 1;
                    tokio::spawn(async move {
                        let _ = old.done.await;
                    });
                }
            }
        }
        for (name, args) in want {
            if !running.contains_key(&name) {
                running.insert(name.clone(), start(name, args, None));
                started += 1;
            }
        }
        conf = new;
        tracing::info!(
            started,
            stopped,
            restarted,
            workers = running.len(),
            "SIGHUP: workers file re-read"
        );
    }
    tracing::info!(
        "stopping every worker within {}",
        docket_core::duration::format(conf.shutdown_interval)
    );
    // Each worker has shutdown_interval to finish (its --grace); a little more for it to exit.
    let handles: Vec<_> = running.into_values().map(|r| r.done).collect();
    let aborts: Vec<_> = handles.iter().map(|h| h.abort_handle()).collect();
    let all = futures::future::join_all(handles);
    if tokio::time::timeout(conf.shutdown_interval + Duration::from_secs(5), all)
        .await
        .is_err()
    {
        tracing::warn!("workers still running after shutdown_interval: killing them");
        // Dropping a worker's task drops its child, which kill_on_drop kills.
        for h in aborts {
            h.abort();
        }
    }
    Ok(())
}

/// One named worker: started, restarted when it dies, stopped by `cancel`.
async fn keep_running(
    name: &str,
    exe: &Path,
    args: &[String],
    token: Option<String>,
    cancel: CancellationToken,
) {
    let mut restarts: u32 = 0;
    let mut backoff = Duration::from_secs(1);
    loop {
        let mut cmd = tokio::process::Command::new(exe);
        cmd.args(args)
            .env("DOCKET_WORKER_RESTARTS", restarts.to_string())
            .kill_on_drop(true);
        if let Some(t) = &token {
            cmd.env("DOCKET_TOKEN", t);
        }
        let started = std::time::Instant::now();
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(worker = name, error = %e, "cannot start the worker");
                if sleep_or_stop(backoff, &cancel).await {
                    return;
                }
                backoff = (backoff * 2).min(Duration::from_secs(60));
                continue;
            }
        };
        tracing::info!(worker = name, pid = child.id(), restarts, "worker started");
        let status = tokio::select! {
            s = child.wait() => s,
            _ = cancel.cancelled() => {
                if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGTERM,
                    );
                }
                let s = child.wait().await;
                tracing::info!(worker = name, status = ?s, "worker stopped");
                return;
            }
        };
        if cancel.is_cancelled() {
            return;
        }
        if started.elapsed() >= Duration::from_secs(60) {
            backoff = Duration::from_secs(1);
        }
        restarts += 1;
        tracing::warn!(worker = name, status = ?status, restarts, "worker died; restarting in {backoff:?}");
        if sleep_or_stop(backoff, &cancel).await {
            return;
        }
        backoff = (backoff * 2).min(Duration::from_secs(60));
    }
}

/// Sleeps `d`; true when `cancel` fired first.
async fn sleep_or_stop(d: Duration, cancel: &CancellationToken) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => false,
        _ = cancel.cancelled() => true,
    }
}
