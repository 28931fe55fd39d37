//! `docket serve`: the config file, auth mode and bootstrap token, TLS reload, and the node
//! itself (engine, processes, pg_task tables, sql tasks, HTTP).

use crate::*;

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

/// The config file of `docket serve --config`: flags and DOCKET_* variables override it.
#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileConfig {
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

pub(crate) fn read_config(path: &std::path::Path) -> Result<FileConfig> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    toml::from_str(&text)
        .with_context(|| format!("{} is not a valid docket config", path.display()))
}

pub(crate) async fn serve(a: ServeArgs) -> Result<()> {
    let telemetry = telemetry::init(a.log_format, "info", a.otlp_endpoint.as_deref())?;
    let r = serve_inner(a).await;
    tokio::task::spawn_blocking(move || telemetry.shutdown()).await?;
    r
}

pub(crate) async fn serve_inner(mut a: ServeArgs) -> Result<()> {
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
