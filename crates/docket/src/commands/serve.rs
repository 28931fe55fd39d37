//! `docket serve`: auth mode and bootstrap token, TLS reload, and the node itself (engine,
//! processes, pg_task tables, sql tasks, HTTP), run with the settings of
//! [`crate::config::ServeConfig`].

use crate::cli::ServeArgs;
use crate::{cli, on_signal, telemetry};
use anyhow::{Context, Result};
use docket_core::SystemClock;
use docket_engine::{Engine, EngineConfig};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Reloads the TLS certificate and key on SIGHUP (new connections use them; on error the old
/// ones stay and the error is logged).
pub(crate) fn reload_on_sighup(tls: Arc<docket_server::tls::Tls>, stop: CancellationToken) {
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

pub(crate) async fn serve(a: ServeArgs) -> Result<()> {
    let telemetry = telemetry::init(a.log_format, "info", a.otlp_endpoint.as_deref())?;
    let r = serve_inner(a).await;
    tokio::task::spawn_blocking(move || telemetry.shutdown()).await?;
    r
}

pub(crate) async fn serve_inner(args: ServeArgs) -> Result<()> {
    let a = crate::config::ServeConfig::load(&args)?;
    a.validate()?;
    let listen = a.listen.clone();
    let opts = a.connect_opts();
    let store = docket_engine::Database::open(&opts)
        .await
        .with_context(|| format!("cannot open the database {}", redact(&opts.url)))?;
    store.migrate().await.context("migrations failed")?;
    let node = a.node.clone().unwrap_or_else(default_node_name);
    let mut config = EngineConfig::new(node.clone(), store.backend());
    if let Some(p) = a.poll_interval {
        config.poll_interval = p;
    }
    match a.peer_wake().map_err(anyhow::Error::msg)? {
        None => config.peer_wake = None,
        Some(Some((bind, advertise))) => {
            config.peer_wake = Some(bind);
            config.peer_wake_advertise = advertise;
        }
        Some(None) => {}
    }
    if let Some(r) = a.rescue_interval {
        config.rescue_interval = r;
    }
    if let Some(r) = a.rotate_interval {
        config.rotate_interval = r;
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
    let sql = a.sql.clone();
    // `sql` tasks are checked (targets, payload, scope) by their kind hook wherever they are
    // enqueued or scheduled.
    let engine = Engine::new(store.clone(), Arc::new(SystemClock), config)
        .with_kind_hook(Arc::new(docket_sql::SqlKind(Arc::new(sql.clone()))));
    let shutdown = CancellationToken::new();
    on_signal(shutdown.clone());
    let services = engine.start(shutdown.clone()).await?;
    let tls = match &a.tls {
        Some((c, k)) => Some(docket_server::tls::Tls::load(c, k).map_err(anyhow::Error::msg)?),
        None => None,
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
    let pg_tasks = a.pg_task.clone();
    let mut side = Vec::new();
    let mut views = Vec::new();
    for cfg in pg_tasks {
        let name = format!("{} at {}", cfg.name(), redact(&cfg.url));
        cfg.validate()
            .map_err(|e| anyhow::anyhow!("pg_task {name}: {e}"))?;
        views.push(Arc::new(
            docket_sql::pgtask::TableView::new(&cfg)
                .map_err(|e| anyhow::anyhow!("pg_task {name}: {e}"))?,
        ) as Arc<dyn docket_engine::panels::Panel>);
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
    let sinks = docket_sinks::build_all(&a.sinks).map_err(|e| anyhow::anyhow!(e.join("; ")))?;
    if !sinks.is_empty() {
        tracing::info!(sinks = ?sinks, "event sinks");
        state = state.with_sinks(sinks);
    }
    state = state.with_compat_asyncflow(a.compat.as_deref() == Some("asyncflow"));
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
        .with_panels(views);
    let namespaces = state.processes.start().await?;
    for (name, cfg) in a.namespaces.clone() {
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
    // Closing waits for connections being opened; against an unreachable database sqlx keeps
    // trying until its acquire timeout (30 s). The process is exiting: its sockets close anyway.
    if tokio::time::timeout(Duration::from_secs(2), store.close())
        .await
        .is_err()
    {
        tracing::warn!("closing the database connections timed out");
    }
    tracing::info!("stopped");
    Ok(())
}

pub(crate) fn default_node_name() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "node".into());
    format!("{host}-{}", std::process::id())
}

/// A database URL or conninfo string fit for logs and errors: the userinfo of a URL and every
/// `password=` value (URL query or key/value conninfo) become `***`.
pub(crate) fn redact(url: &str) -> String {
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

/// `--auth`: `auto` is `required` unless the listener is on a loopback address. Serving the
/// network without auth is refused unless forced by a flag that says so.
pub(crate) fn auth_mode(
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
pub(crate) async fn bootstrap_token(engine: &Engine) -> Result<()> {
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
