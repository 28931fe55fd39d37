//! The `docket` binary: `serve`, `migrate`, `task`, `queue`, `node`, `worker`, `bench`.

mod bench;
mod cli;
mod telemetry;

use anyhow::{bail, Context, Result};
use clap::Parser;
use cli::*;
use docket_client::{Client, ListFilter};
use docket_core::{NewTask, QueueSettings, SystemClock, Task};
use docket_engine::{Engine, EngineConfig};
use docket_store::ConnectOptions;
use std::io::BufRead;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn init_logs(format: LogFormat, default: &str) {
    // Without an exporter this cannot fail.
    let _ = telemetry::init(format, default, None);
}

/// Fires `token` on the first SIGINT/SIGTERM.
fn on_signal(token: CancellationToken) {
    tokio::spawn(async move {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("signal handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        tracing::info!("shutdown signal received");
        token.cancel();
    });
}

/// Reloads the TLS certificate and key on SIGHUP (new connections use them; on error the old
/// ones stay and the error is logged).
fn reload_on_sighup(tls: Arc<docket_server::tls::Tls>, stop: CancellationToken) {
    tokio::spawn(async move {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            return;
        };
        loop {
            tokio::select! {
                _ = hup.recv() => match tls.reload() {
                    Ok(()) => tracing::info!("reloaded the TLS certificate and key"),
                    Err(e) => tracing::error!(error = %e, "TLS reload failed; keeping the old certificate"),
                },
                _ = stop.cancelled() => return,
            }
        }
    });
}

/// The default database: a SQLite file in the current directory.
pub(crate) const DEFAULT_DATABASE: &str = "sqlite://docket.db";

pub(crate) fn connect_opts(db: &DbArgs) -> ConnectOptions {
    ConnectOptions {
        url: db
            .database
            .clone()
            .unwrap_or_else(|| DEFAULT_DATABASE.to_string()),
        schema: db.schema.clone(),
        max_connections: None,
        relaxed_commit: !db.strict_commit,
    }
}

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    let code = match run(cli).await {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e:#}");
            1
        }
    };
    std::process::exit(code);
}

async fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Serve(a) => serve(a).await,
        Command::Migrate { db } => {
            init_logs(LogFormat::Text, "warn");
            let store = docket_store::connect(&connect_opts(&db)).await?;
            store.migrate().await?;
            println!("migrated {}", connect_opts(&db).url);
            Ok(())
        }
        Command::Token { db, cmd } => {
            init_logs(LogFormat::Text, "warn");
            token_cmd(&db, cmd).await
        }
        Command::Task { server, cmd } => task_cmd(server.client()?, cmd).await,
        Command::Queue { server, cmd } => queue_cmd(server.client()?, cmd).await,
        Command::Schedule { server, cmd } => schedule_cmd(server.client()?, cmd).await,
        Command::Status { server, json } => status(server.client()?, json).await,
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Cli::command(), "docket", &mut std::io::stdout());
            Ok(())
        }
        Command::Man => {
            use clap::CommandFactory;
            clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout())?;
            Ok(())
        }
        Command::Node { server, json } => {
            let nodes = server.client()?.node_list().await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&nodes)?);
            } else {
                let rows = nodes
                    .iter()
                    .map(|n| {
                        vec![
                            n.name.clone(),
                            n.state.clone(),
                            n.heartbeat_at
                                .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
                            n.started_at
                                .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
                            n.version.clone(),
                        ]
                    })
                    .collect();
                print_table(&["NAME", "STATE", "HEARTBEAT", "STARTED", "VERSION"], rows);
            }
            Ok(())
        }
        Command::Namespace { server, cmd } => {
            let c = server.client()?;
            let out = match cmd {
                NamespaceCmd::Put {
                    namespace,
                    processor_url,
                    config,
                } => {
                    let mut cfg: serde_json::Value = match config {
                        Some(c) => {
                            serde_json::from_str(&c).context("--config is not valid JSON")?
                        }
                        None => serde_json::json!({}),
                    };
                    cfg["processor"] = serde_json::json!({"url": processor_url});
                    let cfg: docket_client::NamespaceConfig = serde_json::from_value(cfg)
                        .context("--config is not a namespace configuration")?;
                    serde_json::to_value(c.namespace_put(&namespace, &cfg).await?)?
                }
                NamespaceCmd::List => serde_json::json!({"namespaces": c.namespace_list().await?}),
            };
            println!("{}", serde_json::to_string_pretty(&out)?);
            Ok(())
        }
        Command::Process { server, cmd } => {
            let c = server.client()?;
            let json_arg = |v: &Option<String>, what: &str| -> Result<serde_json::Value> {
                match v {
                    Some(s) => serde_json::from_str(s)
                        .with_context(|| format!("--{what} is not valid JSON")),
                    None => Ok(serde_json::Value::Null),
                }
            };
            let (verb, a) = match cmd {
                ProcessCmd::Init(a) => ("init", a),
                ProcessCmd::Call(a) => ("call", a),
                ProcessCmd::Repair(a) => ("repair", a),
                ProcessCmd::SimpleRepair { namespace, id } => {
                    let process = c.process_simple_repair(&namespace, &id).await?;
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&serde_json::json!({"process": process}))?
                    );
                    return Ok(());
                }
                ProcessCmd::Trace { namespace, id } => {
                    let tasks = c.process_trace(&namespace, &id).await?;
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&serde_json::json!({"tasks": tasks}))?
                    );
                    return Ok(());
                }
                ProcessCmd::List {
                    namespace,
                    status,
                    limit,
                    after,
                } => {
                    let page = c
                        .process_list(&namespace, status.as_deref(), after.as_deref(), limit)
                        .await?;
                    println!("{}", serde_json::to_string_pretty(&page)?);
                    return Ok(());
                }
                ProcessCmd::Get {
                    namespace,
                    id,
                    offset,
                    limit,
                    backward,
                } => {
                    let range = docket_client::HistoryRange {
                        offset,
                        limit,
                        direction: if backward {
                            docket_client::Direction::Backward
                        } else {
                            docket_client::Direction::Forward
                        },
                    };
                    let v = c.process_get(&namespace, &id, &range).await?;
                    println!("{}", serde_json::to_string_pretty(&v)?);
                    return Ok(());
                }
            };
            let req = docket_client::ProcessCallRequest {
                args: json_arg(&a.args, "args")?,
                context: json_arg(&a.context, "context")?,
                idempotency_key: a.idempotency_key.clone(),
                range: Default::default(),
            };
            let response = match verb {
                "init" => {
                    let init = docket_client::ProcessInitRequest {
                        id: a.id.clone(),
                        args: req.args,
                        context: req.context,
                        idempotency_key: req.idempotency_key,
                    };
                    c.process_init(&a.namespace, &init).await?
                }
                v => {
                    c.process_call(&a.namespace, &a.id, &req, v == "repair")
                        .await?
                }
            };
            println!("{}", serde_json::to_string_pretty(&response)?);
            Ok(())
        }
        Command::Worker(a) => worker(a).await,
        Command::Bench(a) => bench::run(a).await,
    }
}

/// The config file of `docket serve --config`: flags and DOCKET_* variables override it.
#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    database: Option<String>,
    schema: Option<String>,
    listen: Option<String>,
    node: Option<String>,
    /// Namespaces of durable processes, as `PUT /v1/namespaces/{ns}` takes them.
    #[serde(default)]
    namespaces: std::collections::BTreeMap<String, docket_core::process::NamespaceConfig>,
    /// pg_task tables to serve (`[[pg_task]]`, pg_task.json's entries).
    #[serde(default)]
    pg_task: Vec<docket_sql::PgTaskConfig>,
    /// Targets `sql` tasks may run on (`[sql]`).
    #[serde(default)]
    sql: docket_sql::SqlTargets,
}

fn read_config(path: &std::path::Path) -> Result<FileConfig> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    toml::from_str(&text)
        .with_context(|| format!("{} is not a valid docket config", path.display()))
}

async fn serve(a: ServeArgs) -> Result<()> {
    let telemetry = telemetry::init(a.log_format, "info", a.otlp_endpoint.as_deref())?;
    let r = serve_inner(a).await;
    tokio::task::spawn_blocking(move || telemetry.shutdown()).await?;
    r
}

async fn serve_inner(mut a: ServeArgs) -> Result<()> {
    let file = match &a.config {
        Some(p) => read_config(p)?,
        None => FileConfig::default(),
    };
    a.db.database = a.db.database.or(file.database);
    a.db.schema = a.db.schema.or(file.schema);
    let listen = a
        .listen
        .or(file.listen)
        .unwrap_or_else(|| "127.0.0.1:7070".into());
    a.node = a.node.or(file.node);
    let opts = connect_opts(&a.db);
    let store = docket_store::connect(&opts)
        .await
        .with_context(|| format!("cannot open the database {}", redact(&opts.url)))?;
    store.migrate().await.context("migrations failed")?;
    let node = a.node.unwrap_or_else(default_node_name);
    let mut config = EngineConfig::new(node.clone(), &*store);
    if let Some(p) = a.poll_interval {
        config.poll_interval = p;
    }
    if let Some(r) = a.rescue_interval {
        config.rescue_interval = r;
    }
    if let Some(d) = a.retention_notifications {
        config.retention_notifications = d;
    }
    if let Some(d) = a.retention_audit {
        config.retention_audit = d;
    }
    if let Some(d) = a.retention_nodes {
        config.retention_nodes = d;
    }
    let engine = Engine::new(store.clone(), Arc::new(SystemClock), config);
    let shutdown = CancellationToken::new();
    on_signal(shutdown.clone());
    let services = engine.start(shutdown.clone()).await?;
    let tls = match (&a.tls_cert, &a.tls_key) {
        (Some(c), Some(k)) => {
            Some(docket_server::tls::Tls::load(c, k).map_err(anyhow::Error::msg)?)
        }
        _ => None,
    };
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let auth = auth_mode(
        a.auth,
        listener.local_addr()?.ip(),
        a.allow_unauthenticated_network_access,
    )?;
    if auth == docket_server::auth::AuthMode::Required {
        bootstrap_token(&engine).await?;
    }
    tracing::info!(node, listen = %listener.local_addr()?, database = %redact(&opts.url), "docket serving");
    let mut sql = file.sql;
    for t in &a.sql_target {
        let (name, url) = t
            .split_once('=')
            .with_context(|| format!("--sql-target must be NAME=URL, not {t:?}"))?;
        docket_sql::wire::parse_conninfo(url).with_context(|| format!("--sql-target {name}"))?;
        sql.targets.insert(name.to_string(), url.to_string());
    }
    sql.allow_raw |= a.sql_allow_raw;
    let mut pg_tasks = file.pg_task;
    for flag in &a.pg_task {
        pg_tasks.push(
            docket_sql::PgTaskConfig::from_flag(flag)
                .map_err(|e| anyhow::anyhow!("--pg-task {}: {e}", redact(flag)))?,
        );
    }
    let mut side = Vec::new();
    let mut views = Vec::new();
    for cfg in pg_tasks {
        let name = format!("{} at {}", cfg.name(), redact(&cfg.url));
        cfg.validate()
            .map_err(|e| anyhow::anyhow!("pg_task {name}: {e}"))?;
        views.push(
            docket_sql::pgtask::TableView::new(&cfg)
                .map_err(|e| anyhow::anyhow!("pg_task {name}: {e}"))?,
        );
        side.push(
            docket_sql::pgtask::start(cfg, &node, shutdown.clone(), a.grace)
                .await
                .with_context(|| format!("cannot serve the pg_task table {name}"))?,
        );
    }
    if sql.enabled() {
        let mut wc = docket_engine::worker::WorkerConfig::new(docket_sql::SQL_QUEUE);
        wc.concurrency = sql.concurrency.unwrap_or(10);
        wc.prefetch = wc.concurrency;
        wc.worker = format!("{node}-sql");
        wc.grace = a.grace;
        let pool = docket_engine::worker::WorkerPool::new(engine.clone(), wc).register(
            docket_sql::SQL_KIND,
            Arc::new(docket_sql::SqlHandler::new(sql.clone(), &node)),
        );
        side.push(tokio::spawn(pool.run(shutdown.clone())));
        tracing::info!(targets = ?sql.targets.keys().collect::<Vec<_>>(), allow_raw = sql.allow_raw, "sql tasks enabled");
    }
    let mut state = docket_server::AppState::new(engine.clone(), shutdown.clone()).with_auth(auth);
    // DNS rebinding: a page whose name resolves to 127.0.0.1 must not reach a loopback server.
    let mut hosts = a.allowed_hosts.clone();
    if listener.local_addr()?.ip().is_loopback() {
        hosts.extend(["127.0.0.1", "localhost", "::1"].map(String::from));
    }
    if !hosts.is_empty() {
        state = state.with_allowed_hosts(hosts);
    }
    if !a.outbound_hosts.is_empty() {
        state = state.with_outbound_hosts(a.outbound_hosts.clone());
    }
    let state = state
        .with_cors_origins(a.cors_origins.clone())
        .with_limits(docket_server::auth::Limits {
            rate_per_second: a.rate_limit,
            burst: a.rate_burst,
            long_polls: a.max_long_polls,
        })
        .with_sql(sql)
        .with_pg_tasks(views);
    let namespaces = state.processes.start().await?;
    for (name, cfg) in file.namespaces {
        state
            .processes
            .namespace_put(&name, cfg)
            .await
            .with_context(|| format!("namespace {name} in the config file"))?;
    }
    let server = match tls {
        None => tokio::spawn(docket_server::serve(listener, state)),
        Some(tls) => {
            reload_on_sighup(tls.clone(), shutdown.clone());
            tracing::info!("serving HTTPS; SIGHUP reloads the certificate and key");
            tokio::spawn(docket_server::serve_tls(
                listener,
                state,
                docket_server::ConnLimits::default(),
                tls,
            ))
        }
    };
    shutdown.cancelled().await;
    // Stop taking work: long polls return empty, in-flight requests finish within the grace.
    match tokio::time::timeout(a.grace, server).await {
        Ok(r) => r??,
        Err(_) => tracing::warn!("grace period over with requests still running"),
    }
    for h in services {
        let _ = h.await;
    }
    let _ = namespaces.await;
    for h in side {
        let _ = h.await;
    }
    store.close().await;
    tracing::info!("stopped");
    Ok(())
}

fn default_node_name() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "node".into());
    format!("{host}-{}", std::process::id())
}

/// A database URL or conninfo string fit for logs and errors: the userinfo of a URL and every
/// `password=` value (URL query or key/value conninfo) become `***`.
fn redact(url: &str) -> String {
    let mut out = match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => format!("{}***{}", &url[..s + 3], &url[at..]),
        _ => url.to_string(),
    };
    let mut from = 0;
    while let Some(i) = out[from..].to_ascii_lowercase().find("password=") {
        let start = from + i + "password=".len();
        let end = out[start..]
            .find(|c: char| c == '&' || c.is_whitespace())
            .map_or(out.len(), |e| start + e);
        out.replace_range(start..end, "***");
        from = start + 3;
    }
    out
}

async fn worker(a: WorkerArgs) -> Result<()> {
    let telemetry = telemetry::init(a.log_format, "info", a.otlp_endpoint.as_deref())?;
    let r = worker_inner(a).await;
    // The batch exporter's blocking flush must not run on a runtime thread.
    tokio::task::spawn_blocking(move || telemetry.shutdown()).await?;
    r
}

async fn worker_inner(a: WorkerArgs) -> Result<()> {
    let cancel = CancellationToken::new();
    on_signal(cancel.clone());
    let name = a
        .name
        .unwrap_or_else(|| format!("worker-{}", default_node_name()));
    let opts = docket_client::command_worker::WorkerOptions {
        queue: a.queue,
        kinds: a.kinds,
        concurrency: a.concurrency,
        lease: a.lease,
        name,
        command: a.command,
        grace: a.grace,
        kill_grace: a.kill_grace,
    };
    tracing::info!(queue = %opts.queue, concurrency = opts.concurrency, server = %a.server.server, "worker started");
    docket_client::command_worker::run(a.server.client()?, opts, cancel)
        .await
        .map_err(anyhow::Error::msg)
}

fn print_table(headers: &[&str], rows: Vec<Vec<String>>) {
    let mut w: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let s: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<width$}", width = w[i]))
            .collect();
        println!("{}", s.join("  ").trim_end());
    };
    line(headers.iter().map(|h| h.to_string()).collect());
    for r in rows {
        line(r);
    }
}

fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
    }
}

fn task_row(t: &Task) -> Vec<String> {
    vec![
        t.id.to_string(),
        t.queue.clone(),
        t.kind.clone(),
        t.state.to_string(),
        format!("{}/{}", t.attempt, t.max_attempts),
        t.priority.to_string(),
        t.run_at.format("%Y-%m-%d %H:%M:%S").to_string(),
        short(
            &t.errors
                .last()
                .map(|e| e.message.clone())
                .unwrap_or_default(),
            40,
        ),
    ]
}

const TASK_HEADERS: [&str; 8] = [
    "ID",
    "QUEUE",
    "KIND",
    "STATE",
    "ATTEMPT",
    "PRIO",
    "RUN_AT",
    "LAST_ERROR",
];

fn print_task(t: &Task, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(t)?);
    } else {
        print_table(&TASK_HEADERS, vec![task_row(t)]);
    }
    Ok(())
}

async fn task_cmd(c: Client, cmd: TaskCmd) -> Result<()> {
    match cmd {
        TaskCmd::Add(a) => task_add(&c, a).await,
        TaskCmd::List {
            queue,
            state,
            kind,
            limit,
            after,
            desc,
            text,
            json,
        } => {
            let page = c
                .task_list(&ListFilter {
                    queue,
                    state,
                    kind,
                    limit: Some(limit),
                    after,
                    descending: desc,
                    text,
                })
                .await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&page.tasks)?);
            } else {
                print_table(&TASK_HEADERS, page.tasks.iter().map(task_row).collect());
                if let Some(n) = page.next_after {
                    eprintln!("more: --after {n}");
                }
            }
            Ok(())
        }
        TaskCmd::Show { id, json: _ } => {
            // `show` prints every field: JSON is the clearest full view.
            let t = c.task_get(id).await?;
            println!("{}", serde_json::to_string_pretty(&t)?);
            Ok(())
        }
        TaskCmd::Cancel { id, filter, json } => match id {
            Some(id) if !filter.any() => print_task(&c.task_cancel(id).await?, json),
            None if filter.any() => bulk(&c, filter, "cancel").await,
            _ => bail!("give a task id or a filter (--queue, --kind, --state, --text), not both"),
        },
        TaskCmd::Retry { id, filter, json } => match id {
            Some(id) if !filter.any() => print_task(&c.task_retry(id).await?, json),
            None if filter.any() => bulk(&c, filter, "retry").await,
            _ => bail!("give a task id or a filter (--queue, --kind, --state, --text), not both"),
        },
        TaskCmd::Watch { id, json } => watch(&c, id, json).await,
    }
}

fn spec_from_args(a: &TaskAddArgs) -> Result<NewTask> {
    if let Some(sql) = &a.sql {
        let target = a.target.clone().context("--sql needs --target")?;
        return Ok(NewTask {
            payload: serde_json::json!({"input": sql, "target": target}),
            kind: docket_sql::SQL_KIND.into(),
            ..spec_fields(a, String::new())?
        });
    }
    let kind = a
        .kind
        .clone()
        .context("--kind is required (or use --sql or --file)")?;
    spec_fields(a, kind)
}

fn spec_fields(a: &TaskAddArgs, kind: String) -> Result<NewTask> {
    let payload = match &a.payload {
        Some(p) => {
            serde_json::from_str(p).with_context(|| format!("--payload is not valid JSON: {p}"))?
        }
        None => serde_json::Value::Null,
    };
    Ok(NewTask {
        queue: a.queue.clone(),
        kind,
        payload,
        priority: a.priority,
        run_at: a.run_at,
        run_in: a.run_in,
        max_attempts: a.max_attempts,
        timeout: a.timeout,
        unique_key: a.unique_key.clone(),
        concurrency_key: a.concurrency_key.clone(),
        concurrency_limit: a.concurrency_limit,
        node: a.node.clone(),
        ..NewTask::default()
    })
}

async fn task_add(c: &Client, a: TaskAddArgs) -> Result<()> {
    let Some(path) = &a.file else {
        let t = c.task_add(&spec_from_args(&a)?).await?;
        return print_task(&t, a.json);
    };
    // One spec per line; every line is checked before anything is sent, so a bad line
    // enqueues nothing.
    let reader: Box<dyn BufRead> = if path == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(path).with_context(|| format!("cannot open {path}"))?,
        ))
    };
    let mut specs = vec![];
    for (i, line) in reader.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let mut t: NewTask = serde_json::from_str(&line)
            .with_context(|| format!("{path}:{}: not a task spec", i + 1))?;
        if t.queue.is_none() {
            t.queue = a.queue.clone();
        }
        specs.push(t);
    }
    if specs.is_empty() {
        bail!("{path} holds no task specs");
    }
    let bar = indicatif::ProgressBar::new(specs.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} tasks  {per_sec}  eta {eta}")
            .expect("template"),
    );
    // Ctrl-C stops between batches: each batch is one transaction, so what was sent is whole
    // and the summary says where to resume.
    let stop = CancellationToken::new();
    on_signal(stop.clone());
    let mut inserted = 0;
    let mut existing = 0;
    let mut sent = 0;
    for chunk in specs.chunks(a.batch.max(1)) {
        if stop.is_cancelled() {
            bar.abandon();
            println!(
                "interrupted: the first {sent} of {} task specs were sent ({inserted} enqueued, {existing} matched an existing unique_key); the rest were not",
                specs.len()
            );
            std::process::exit(130);
        }
        let got = c.task_add_many(chunk).await.map_err(|e| {
            anyhow::anyhow!(
                "{e} (tasks before this batch of {} were enqueued: {inserted})",
                chunk.len()
            )
        })?;
        for t in &got {
            if t.inserted == Some(false) {
                existing += 1;
            } else {
                inserted += 1;
            }
        }
        sent += chunk.len();
        bar.inc(chunk.len() as u64);
    }
    bar.finish_and_clear();
    println!("enqueued {inserted} tasks ({existing} matched an existing unique_key)");
    Ok(())
}

/// Cancels or retries every task matching `f`, one by one with a progress bar; Ctrl-C stops
/// after the task in hand.
async fn bulk(c: &Client, f: BulkFilter, verb: &str) -> Result<()> {
    let mut ids = vec![];
    let mut after = None;
    loop {
        let page = c
            .task_list(&docket_client::ListFilter {
                queue: f.queue.clone(),
                state: f.state.clone(),
                kind: f.kind.clone(),
                text: f.text.clone(),
                limit: Some(1000),
                after,
                descending: false,
            })
            .await?;
        ids.extend(page.tasks.iter().map(|t| t.id));
        match page.next_after {
            Some(a) => after = Some(a),
            None => break,
        }
    }
    let stop = CancellationToken::new();
    on_signal(stop.clone());
    let bar = indicatif::ProgressBar::new(ids.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg} {bar:40} {pos}/{len} ({eta})")
            .expect("template"),
    );
    bar.set_message(format!("{verb}:"));
    let (mut done, mut refused) = (0, 0);
    for id in &ids {
        if stop.is_cancelled() {
            break;
        }
        let r = if verb == "cancel" {
            c.task_cancel(*id).await
        } else {
            c.task_retry(*id).await
        };
        match r {
            Ok(_) => done += 1,
            // A task that finished (or was taken) meanwhile is not an error of the batch.
            Err(e) if matches!(e.code(), Some("invalid_state" | "not_found")) => refused += 1,
            Err(e) => {
                bar.abandon();
                return Err(e.into());
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let left = ids.len() - done - refused;
    println!(
        "{verb}: {done} done, {refused} refused (state changed meanwhile){}",
        if left > 0 {
            format!(", {left} left (interrupted)")
        } else {
            String::new()
        }
    );
    Ok(())
}

/// Prints the task, then each change, until it finishes; woken by the server's change feed
/// (`GET /v1/changes`), with a look every 2 s as a fallback.
async fn watch(c: &Client, id: i64, json: bool) -> Result<()> {
    use futures::StreamExt;
    let mut changes = c.changes().await.ok();
    let mut last: Option<String> = None;
    loop {
        let t = c.task_get(id).await?;
        let line = format!(
            "{}  {}  attempt {}/{}{}{}",
            chrono::Utc::now().format("%H:%M:%S"),
            t.state,
            t.attempt,
            t.max_attempts,
            t.progress
                .as_ref()
                .map(|p| format!("  progress {p}"))
                .unwrap_or_default(),
            t.errors
                .last()
                .map(|e| format!("  last error: {}", short(&e.message, 100)))
                .unwrap_or_default()
        );
        if last.as_deref() != Some(&line[10..]) {
            if json {
                println!("{}", serde_json::to_string(&t)?);
            } else {
                println!("{line}");
            }
            last = Some(line[10..].to_string());
        }
        if t.state.is_finished() {
            if t.state != docket_core::TaskState::Completed {
                std::process::exit(1);
            }
            if let (false, Some(r)) = (json, &t.result) {
                println!("result: {r}");
            }
            return Ok(());
        }
        let wait = tokio::time::sleep(Duration::from_secs(2));
        match changes.as_mut() {
            Some(s) => {
                tokio::select! {
                    n = s.next() => if n.is_none() { changes = None },
                    _ = wait => {}
                }
            }
            None => wait.await,
        }
    }
}

async fn status(c: Client, json: bool) -> Result<()> {
    let v = c.get_json("/v1/status", &[]).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let now = chrono::Utc::now();
    let age = |t: &serde_json::Value| -> String {
        t.as_str()
            .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
            .map(|t| {
                let s = (now - t.with_timezone(&chrono::Utc)).num_seconds().max(0);
                if s < 120 {
                    format!("{s}s")
                } else if s < 7200 {
                    format!("{}m", s / 60)
                } else {
                    format!("{}h", s / 3600)
                }
            })
            .unwrap_or_else(|| "-".into())
    };
    let states = [
        "scheduled",
        "available",
        "running",
        "retryable",
        "completed",
        "discarded",
        "cancelled",
    ];
    let mut headers = vec!["QUEUE", "STATE"];
    headers.extend(states.iter().map(|s| match *s {
        "scheduled" => "SCHED",
        "available" => "AVAIL",
        "running" => "RUN",
        "retryable" => "RETRY",
        "completed" => "DONE",
        "discarded" => "DISCARD",
        _ => "CANCEL",
    }));
    headers.push("OLDEST");
    let rows = v["queues"]
        .as_array()
        .map(|qs| {
            qs.iter()
                .map(|q| {
                    let mut r = vec![
                        q["name"].as_str().unwrap_or_default().to_string(),
                        if q["settings"]["paused"] == true {
                            "paused".into()
                        } else {
                            "active".into()
                        },
                    ];
                    r.extend(states.iter().map(|s| q["counts"][s].to_string()));
                    r.push(age(&q["oldest_available_at"]));
                    r
                })
                .collect()
        })
        .unwrap_or_default();
    print_table(&headers, rows);
    println!();
    let nodes: Vec<Vec<String>> = v["nodes"]
        .as_array()
        .map(|ns| {
            ns.iter()
                .map(|n| {
                    vec![
                        n["name"].as_str().unwrap_or_default().to_string(),
                        n["state"].as_str().unwrap_or("-").to_string(),
                        age(&n["heartbeat_at"]),
                        n["version"].as_str().unwrap_or_default().to_string(),
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
    print_table(&["NODE", "STATE", "HEARTBEAT", "VERSION"], nodes);
    println!();
    println!(
        "last hour: {} completed, {} failed   schedules: {} ({} paused)",
        v["last_hour"]["completed"],
        v["last_hour"]["failed"],
        v["schedules"]["total"],
        v["schedules"]["paused"]
    );
    Ok(())
}

async fn schedule_cmd(c: Client, cmd: ScheduleCmd) -> Result<()> {
    let table = |all: &[serde_json::Value]| {
        let rows = all
            .iter()
            .map(|s| {
                let when = match (&s["every"], &s["cron"]) {
                    (serde_json::Value::String(e), _) => format!(
                        "every {e}{}",
                        if s["drift"] == true { " (drift)" } else { "" }
                    ),
                    (_, serde_json::Value::String(c)) => format!(
                        "cron {c}{}",
                        s["timezone"]
                            .as_str()
                            .map(|z| format!(" {z}"))
                            .unwrap_or_default()
                    ),
                    _ => "-".into(),
                };
                vec![
                    s["name"].as_str().unwrap_or_default().to_string(),
                    when,
                    s["task"]["kind"].as_str().unwrap_or_default().to_string(),
                    if s["paused"] == true {
                        "paused"
                    } else {
                        "active"
                    }
                    .to_string(),
                    s["next_run_at"].as_str().unwrap_or("-").to_string(),
                    s["last_task_id"]
                        .as_i64()
                        .map(|i| i.to_string())
                        .unwrap_or("-".into()),
                ]
            })
            .collect();
        print_table(
            &["NAME", "WHEN", "KIND", "STATE", "NEXT RUN", "LAST TASK"],
            rows,
        );
    };
    let show = |v: serde_json::Value, json: bool| -> Result<()> {
        if json {
            println!("{}", serde_json::to_string_pretty(&v)?);
        } else {
            table(std::slice::from_ref(&v));
        }
        Ok(())
    };
    match cmd {
        ScheduleCmd::Add(a) => {
            let json = a.task.json;
            let spec = docket_core::ScheduleSpec {
                name: a.name,
                task: spec_from_args(&a.task)?,
                every: a.every,
                drift: a.drift,
                cron: a.cron,
                timezone: a.timezone,
                start_at: a.start_at,
            };
            show(serde_json::to_value(c.schedule_put(&spec).await?)?, json)
        }
        ScheduleCmd::List { json } => {
            let v = serde_json::to_value(c.schedule_list().await?)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                table(v.as_array().map_or(&[][..], |a| a.as_slice()));
            }
            Ok(())
        }
        ScheduleCmd::Show { name, json } => {
            show(serde_json::to_value(c.schedule_get(&name).await?)?, json)
        }
        ScheduleCmd::Pause { name } => show(
            serde_json::to_value(c.schedule_set_paused(&name, true).await?)?,
            false,
        ),
        ScheduleCmd::Resume { name } => show(
            serde_json::to_value(c.schedule_set_paused(&name, false).await?)?,
            false,
        ),
        ScheduleCmd::Remove { name } => {
            c.schedule_delete(&name).await?;
            println!("removed schedule {name}");
            Ok(())
        }
    }
}

async fn queue_cmd(c: Client, cmd: QueueCmd) -> Result<()> {
    let print = |qs: Vec<docket_core::QueueStats>, json: bool| -> Result<()> {
        if json {
            println!("{}", serde_json::to_string_pretty(&qs)?);
            return Ok(());
        }
        let rows = qs
            .iter()
            .map(|q| {
                let n = |s| q.counts.get(&s).copied().unwrap_or(0).to_string();
                use docket_core::TaskState::*;
                vec![
                    q.name.clone(),
                    if q.settings.paused {
                        "paused"
                    } else {
                        "active"
                    }
                    .to_string(),
                    q.settings
                        .concurrency_limit
                        .map(|l| l.to_string())
                        .unwrap_or("-".into()),
                    n(Scheduled),
                    n(Available),
                    n(Running),
                    n(Retryable),
                    n(Completed),
                    n(Discarded),
                    n(Cancelled),
                ]
            })
            .collect();
        print_table(
            &[
                "QUEUE",
                "STATUS",
                "LIMIT",
                "SCHEDULED",
                "AVAILABLE",
                "RUNNING",
                "RETRYABLE",
                "COMPLETED",
                "DISCARDED",
                "CANCELLED",
            ],
            rows,
        );
        Ok(())
    };
    match cmd {
        QueueCmd::List { json } => print(c.queue_list().await?, json),
        QueueCmd::Show { queue, json } => {
            let q = c.queue_get(&queue).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&q)?);
                Ok(())
            } else {
                println!("{}", serde_json::to_string_pretty(&q.settings)?);
                print(vec![q], false)
            }
        }
        QueueCmd::Set(a) => {
            let mut s: QueueSettings = c.queue_get(&a.queue).await?.settings;
            if let Some(v) = a.concurrency_limit {
                s.concurrency_limit = (v > 0).then_some(v);
            }
            if let Some(v) = a.max_attempts {
                s.max_attempts = (v > 0).then_some(v);
            }
            if let Some(v) = a.timeout {
                s.timeout = Some(v);
            }
            if let Some(v) = a.retention_completed {
                s.retention_completed = Some(v);
            }
            if let Some(v) = a.retention_failed {
                s.retention_failed = Some(v);
            }
            if a.backoff_initial.is_some()
                || a.backoff_max.is_some()
                || a.backoff_coefficient.is_some()
                || a.backoff_jitter.is_some()
            {
                let mut b = s.backoff.unwrap_or_default();
                if let Some(v) = a.backoff_initial {
                    b.initial = v;
                }
                if let Some(v) = a.backoff_max {
                    b.max = v;
                }
                if let Some(v) = a.backoff_coefficient {
                    b.coefficient = v;
                }
                if let Some(v) = a.backoff_jitter {
                    b.jitter = v;
                }
                s.backoff = Some(b);
            }
            let q = c.queue_put(&a.queue, &s).await?;
            println!("{}", serde_json::to_string_pretty(&q.settings)?);
            Ok(())
        }
        QueueCmd::Pause { queue } => {
            c.queue_set_paused(&queue, true).await?;
            println!("queue {queue} paused");
            Ok(())
        }
        QueueCmd::Resume { queue } => {
            c.queue_set_paused(&queue, false).await?;
            println!("queue {queue} resumed");
            Ok(())
        }
    }
}

/// Parses a humantime duration for clap.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    docket_core::duration::parse(s)
}

/// `--auth`: `auto` is `required` unless the listener is on a loopback address. Serving the
/// network without auth is refused unless forced by a flag that says so.
fn auth_mode(
    arg: cli::AuthArg,
    ip: std::net::IpAddr,
    allow_open: bool,
) -> Result<docket_server::auth::AuthMode> {
    use docket_server::auth::AuthMode;
    let mode = match arg {
        cli::AuthArg::Required => AuthMode::Required,
        cli::AuthArg::Off => AuthMode::Off,
        cli::AuthArg::Auto if ip.is_loopback() => AuthMode::Off,
        cli::AuthArg::Auto => AuthMode::Required,
    };
    if mode == AuthMode::Off && !ip.is_loopback() && !allow_open {
        anyhow::bail!(
            "refusing to serve {ip} without auth: anyone who reaches the port could read and change every task; \
             drop --auth off (tokens are then required), or pass --allow-unauthenticated-network-access"
        );
    }
    if mode == AuthMode::Off && !ip.is_loopback() {
        tracing::warn!(%ip, "serving the network WITHOUT auth (--allow-unauthenticated-network-access)");
    }
    Ok(mode)
}

/// With auth required and no live token, creates an admin token named `admin`: from
/// `DOCKET_ADMIN_TOKEN` when set (at least 32 characters), else a new one printed once.
async fn bootstrap_token(engine: &Engine) -> Result<()> {
    if engine.token_any_live().await? {
        return Ok(());
    }
    let given = std::env::var("DOCKET_ADMIN_TOKEN")
        .ok()
        .filter(|t| !t.is_empty());
    let (token, rec) = engine
        .token_create(docket_engine::auth::NewToken {
            name: "admin".into(),
            scopes: vec![docket_core::auth::Scope::Admin],
            secret: given.clone(),
            ..Default::default()
        })
        .await
        .map_err(|e| anyhow::anyhow!("cannot create the bootstrap admin token: {e}"))?;
    if given.is_some() {
        tracing::info!(token = %rec.name, "auth required; created the admin token from DOCKET_ADMIN_TOKEN");
    } else {
        // Printed once, to stderr, never logged: only its hash is stored.
        eprintln!(
            "docket: auth is required and no token existed; created admin token {:?} (shown once, keep it):\n{token}",
            rec.name
        );
    }
    Ok(())
}

async fn token_cmd(db: &cli::DbArgs, cmd: cli::TokenCmd) -> Result<()> {
    let opts = connect_opts(db);
    let store = docket_store::connect(&opts)
        .await
        .with_context(|| format!("cannot open the database {}", redact(&opts.url)))?;
    store.migrate().await.context("migrations failed")?;
    let engine = Engine::new(
        store.clone(),
        Arc::new(SystemClock),
        EngineConfig::new(default_node_name(), &*store),
    );
    match cmd {
        cli::TokenCmd::Create {
            name,
            scopes,
            queues,
            expires_in,
        } => {
            let scopes = scopes
                .iter()
                .map(|s| docket_core::auth::Scope::parse(s).map_err(anyhow::Error::msg))
                .collect::<Result<Vec<_>>>()?;
            let (token, rec) = engine
                .token_create(docket_engine::auth::NewToken {
                    name,
                    scopes,
                    queues,
                    expires_in,
                    secret: None,
                })
                .await
                .map_err(|e| match e {
                    docket_engine::auth::TokenError::Store(docket_store::StoreError::Conflict(
                        _,
                    )) => anyhow::anyhow!("a live token already has that name (revoke it first)"),
                    e => anyhow::anyhow!("{e}"),
                })?;
            let _ = store
                .audit_add(docket_store::AuditAddParams {
                    actor: &format!("cli:{}", std::env::var("USER").unwrap_or_default()),
                    action: "token.create",
                    target: &format!("token:{}", rec.name),
                    detail: None,
                    now: engine.clock.now(),
                })
                .await;
            eprintln!(
                "created token {:?} ({}); it is shown once:",
                rec.name,
                rec.scopes
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            println!("{token}");
        }
        cli::TokenCmd::List => {
            let now = engine.clock.now();
            println!(
                "{:<24} {:<28} {:<16} {:<9} LAST USED",
                "NAME", "SCOPES", "QUEUES", "STATE"
            );
            for t in store.token_list().await? {
                let state = if t.revoked_at.is_some() {
                    "revoked"
                } else if t.expires_at.is_some_and(|e| e <= now) {
                    "expired"
                } else {
                    "live"
                };
                println!(
                    "{:<24} {:<28} {:<16} {:<9} {}",
                    t.name,
                    t.scopes
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(","),
                    if t.queues.is_empty() {
                        "*".to_string()
                    } else {
                        t.queues.join(",")
                    },
                    state,
                    t.last_used_at
                        .map_or_else(|| "never".to_string(), |t| t.to_rfc3339())
                );
            }
        }
        cli::TokenCmd::Revoke { name } => {
            if !engine.token_revoke(&name).await? {
                anyhow::bail!("no live token named {name:?}");
            }
            let _ = store
                .audit_add(docket_store::AuditAddParams {
                    actor: &format!("cli:{}", std::env::var("USER").unwrap_or_default()),
                    action: "token.revoke",
                    target: &format!("token:{name}"),
                    detail: None,
                    now: engine.clock.now(),
                })
                .await;
            println!("revoked token {name:?}");
        }
    }
    store.close().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn redact_hides_every_password() {
        use super::redact;
        assert_eq!(redact("postgres://u:secret@h/db"), "postgres://***@h/db");
        assert_eq!(
            redact("postgres://h/db?user=u&password=secret&sslmode=require"),
            "postgres://h/db?user=u&password=***&sslmode=require"
        );
        assert_eq!(
            redact("host=h password=secret dbname=d"),
            "host=h password=*** dbname=d"
        );
        assert_eq!(redact("sqlite://docket.db"), "sqlite://docket.db");
    }

    #[test]
    fn auth_is_required_off_loopback() {
        use super::{auth_mode, cli::AuthArg};
        use docket_server::auth::AuthMode;
        let lo: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        let v6: std::net::IpAddr = "::1".parse().unwrap();
        let net: std::net::IpAddr = "10.1.2.3".parse().unwrap();
        assert_eq!(auth_mode(AuthArg::Auto, lo, false).unwrap(), AuthMode::Off);
        assert_eq!(auth_mode(AuthArg::Auto, v6, false).unwrap(), AuthMode::Off);
        assert_eq!(
            auth_mode(AuthArg::Auto, net, false).unwrap(),
            AuthMode::Required
        );
        assert_eq!(
            auth_mode(AuthArg::Required, lo, false).unwrap(),
            AuthMode::Required
        );
        assert!(auth_mode(AuthArg::Off, net, false).is_err());
        assert_eq!(auth_mode(AuthArg::Off, net, true).unwrap(), AuthMode::Off);
    }
}
