//! `docket serve`'s settings in one place: the config file (`--config`, TOML), then `DOCKET_*`
//! variables, then flags — each overriding the one before (clap reads a flag, else its
//! variable; a list given both ways gets both). [`ServeConfig::validate`] checks the result as
//! a whole and reports every problem at once, before anything starts.

use crate::cli::{AuthArg, ServeArgs};
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// The config file: every setting of `docket serve` except the log format and the OTLP
/// endpoint (needed before the file is read). Durations are humantime strings (`"30s"`).
#[derive(serde::Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileConfig {
    database: Option<String>,
    schema: Option<String>,
    #[serde(default)]
    strict_commit: bool,
    listen: Option<String>,
    node: Option<String>,
    #[serde(default, with = "docket_core::duration::serde_opt")]
    grace: Option<Duration>,
    #[serde(default, with = "docket_core::duration::serde_opt")]
    poll_interval: Option<Duration>,
    peer_wake: Option<String>,
    peer_wake_advertise: Option<String>,
    #[serde(default, with = "docket_core::duration::serde_opt")]
    rescue_interval: Option<Duration>,
    #[serde(default, with = "docket_core::duration::serde_opt")]
    rotate_interval: Option<Duration>,
    #[serde(default, with = "docket_core::duration::serde_opt")]
    retention_notifications: Option<Duration>,
    #[serde(default, with = "docket_core::duration::serde_opt")]
    retention_audit: Option<Duration>,
    #[serde(default, with = "docket_core::duration::serde_opt")]
    retention_nodes: Option<Duration>,
    auth: Option<AuthArg>,
    #[serde(default)]
    allow_unauthenticated_network_access: bool,
    #[serde(default)]
    allowed_hosts: Vec<String>,
    #[serde(default)]
    cors_origins: Vec<String>,
    rate_limit: Option<u32>,
    rate_burst: Option<u32>,
    max_long_polls: Option<usize>,
    #[serde(default)]
    outbound_hosts: Vec<String>,
    compat: Option<String>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    /// Namespaces of durable processes, as `PUT /v1/namespaces/{ns}` takes them.
    #[serde(default)]
    namespaces: BTreeMap<String, docket_core::process::NamespaceConfig>,
    /// pg_task tables to serve (`[[pg_task]]`, pg_task.json's entries).
    #[serde(default)]
    pg_task: Vec<docket_sql::PgTaskConfig>,
    /// Targets `sql` tasks may run on (`[sql]`).
    #[serde(default)]
    sql: docket_sql::SqlTargets,
    /// Event sinks (`[[sinks]]`): namespaces' notifications to NATS JetStream or RabbitMQ.
    #[serde(default)]
    sinks: Vec<docket_sinks::SinkConfig>,
}

/// Reads a config file.
///
/// # Errors
/// It cannot be read, or is not TOML of [`FileConfig`]'s shape (the message names the key).
pub(crate) fn read_file(path: &std::path::Path) -> Result<FileConfig> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    toml::from_str(&text)
        .with_context(|| format!("{} is not a valid docket config", path.display()))
}

/// Everything `docket serve` runs with, merged and defaulted.
#[derive(Debug)]
pub(crate) struct ServeConfig {
    pub database: String,
    pub schema: Option<String>,
    pub strict_commit: bool,
    pub listen: String,
    pub node: Option<String>,
    pub grace: Duration,
    pub poll_interval: Option<Duration>,
    pub peer_wake: Option<String>,
    pub peer_wake_advertise: Option<String>,
    pub rescue_interval: Option<Duration>,
    pub rotate_interval: Option<Duration>,
    pub retention_notifications: Option<Duration>,
    pub retention_audit: Option<Duration>,
    pub retention_nodes: Option<Duration>,
    pub auth: AuthArg,
    pub allow_unauthenticated_network_access: bool,
    pub allowed_hosts: Vec<String>,
    pub cors_origins: Vec<String>,
    pub rate_limit: u32,
    pub rate_burst: u32,
    pub max_long_polls: usize,
    pub outbound_hosts: Vec<String>,
    /// Another system's API served beside docket's (`asyncflow`).
    pub compat: Option<String>,
    pub tls: Option<(PathBuf, PathBuf)>,
    pub tls_half: Option<&'static str>,
    pub namespaces: BTreeMap<String, docket_core::process::NamespaceConfig>,
    pub pg_task: Vec<docket_sql::PgTaskConfig>,
    /// `--pg-task` values that do not parse, with their error (reported by validate).
    pg_task_errors: Vec<String>,
    pub sql: docket_sql::SqlTargets,
    /// `--sql-target` values that are not NAME=URL.
    sql_target_errors: Vec<String>,
    /// Event sinks (config file only: broker URLs carry credentials).
    pub sinks: Vec<docket_sinks::SinkConfig>,
}

/// Where a node receives peer wake-ups, and the address it publishes when not that one.
pub(crate) type PeerWakeAddrs = (std::net::SocketAddr, Option<std::net::SocketAddr>);

impl ServeConfig {
    /// The peer wake-up addresses: `None` for `off`; `Some(Some((bind, advertise)))` when
    /// `peer_wake` is given; `Some(None)` when neither is (the engine's default).
    ///
    /// # Errors
    /// An address that is not IP:PORT, or `peer_wake_advertise` without `peer_wake`.
    pub fn peer_wake(&self) -> Result<Option<Option<PeerWakeAddrs>>, String> {
        let addr = |field: &str, v: &str| {
            v.parse::<std::net::SocketAddr>()
                .map_err(|_| format!("{field} {v:?} must be IP:PORT or off"))
        };
        let advertise = self
            .peer_wake_advertise
            .as_deref()
            .map(|v| addr("peer_wake_advertise", v))
            .transpose()?;
        match self.peer_wake.as_deref() {
            Some("off") => Ok(None),
            Some(v) => Ok(Some(Some((addr("peer_wake", v)?, advertise)))),
            None if advertise.is_some() => Err("peer_wake_advertise needs peer_wake".into()),
            None => Ok(Some(None)),
        }
    }

    /// File < variables < flags, then the defaults.
    ///
    /// # Errors
    /// The config file cannot be read or parsed.
    pub fn load(a: &ServeArgs) -> Result<Self> {
        let f = match &a.config {
            Some(p) => read_file(p)?,
            None => FileConfig::default(),
        };
        let mut sql = f.sql;
        let mut sql_target_errors = vec![];
        for t in &a.sql_target {
            match t.split_once('=') {
                Some((name, url)) => {
                    sql.targets.insert(name.to_string(), url.to_string());
                }
                None => sql_target_errors.push(format!("--sql-target must be NAME=URL, not {t:?}")),
            }
        }
        sql.allow_raw |= a.sql_allow_raw;
        let mut pg_task = f.pg_task;
        let mut pg_task_errors = vec![];
        for flag in &a.pg_task {
            match docket_sql::PgTaskConfig::from_flag(flag) {
                Ok(c) => pg_task.push(c),
                Err(e) => pg_task_errors.push(format!("--pg-task {}: {e}", crate::redact(flag))),
            }
        }
        let cert = a.tls_cert.clone().or(f.tls_cert);
        let key = a.tls_key.clone().or(f.tls_key);
        let (tls, tls_half) = match (cert, key) {
            (Some(c), Some(k)) => (Some((c, k)), None),
            (Some(_), None) => (None, Some("tls_cert is set without tls_key")),
            (None, Some(_)) => (None, Some("tls_key is set without tls_cert")),
            (None, None) => (None, None),
        };
        let both = |flag: &[String], file: Vec<String>| {
            let mut v = file;
            v.extend(flag.iter().cloned());
            v
        };
        Ok(ServeConfig {
            database: a
                .db
                .database
                .clone()
                .or(f.database)
                .unwrap_or_else(|| crate::DEFAULT_DATABASE.to_string()),
            schema: a.db.schema.clone().or(f.schema),
            strict_commit: a.db.strict_commit || f.strict_commit,
            listen: a
                .listen
                .clone()
                .or(f.listen)
                .unwrap_or_else(|| "127.0.0.1:7070".into()),
            node: a.node.clone().or(f.node),
            grace: a.grace.or(f.grace).unwrap_or(Duration::from_secs(30)),
            poll_interval: a.poll_interval.or(f.poll_interval),
            peer_wake: a.peer_wake.clone().or(f.peer_wake),
            peer_wake_advertise: a.peer_wake_advertise.clone().or(f.peer_wake_advertise),
            rescue_interval: a.rescue_interval.or(f.rescue_interval),
            rotate_interval: a.rotate_interval.or(f.rotate_interval),
            retention_notifications: a.retention_notifications.or(f.retention_notifications),
            retention_audit: a.retention_audit.or(f.retention_audit),
            retention_nodes: a.retention_nodes.or(f.retention_nodes),
            auth: a.auth.or(f.auth).unwrap_or(AuthArg::Auto),
            allow_unauthenticated_network_access: a.allow_unauthenticated_network_access
                || f.allow_unauthenticated_network_access,
            allowed_hosts: both(&a.allowed_hosts, f.allowed_hosts),
            cors_origins: both(&a.cors_origins, f.cors_origins),
            rate_limit: a.rate_limit.or(f.rate_limit).unwrap_or(1000),
            rate_burst: a.rate_burst.or(f.rate_burst).unwrap_or(2000),
            max_long_polls: a.max_long_polls.or(f.max_long_polls).unwrap_or(64),
            outbound_hosts: both(&a.outbound_hosts, f.outbound_hosts),
            compat: a.compat.clone().or(f.compat),
            tls,
            tls_half,
            namespaces: f.namespaces,
            pg_task,
            pg_task_errors,
            sinks: f.sinks,
            sql,
            sql_target_errors,
        })
    }

    /// Checks the settings together; every problem is listed, one per line.
    ///
    /// # Errors
    /// `invalid configuration:` and the problems.
    pub fn validate(&self) -> Result<()> {
        let mut bad: Vec<String> = vec![];
        bad.extend(self.sql_target_errors.iter().cloned());
        bad.extend(self.pg_task_errors.iter().cloned());
        if let Err(e) = docket_sinks::build_all(&self.sinks) {
            bad.extend(e);
        }
        if let Some(c) = self.compat.as_deref().filter(|c| *c != "asyncflow") {
            bad.push(format!("compat: unknown system {c:?} (known: asyncflow)"));
        }
        let db = self.database.as_str();
        let known = [
            "sqlite:",
            "postgres://",
            "postgresql://",
            "mysql://",
            "mariadb://",
        ];
        if !known.iter().any(|p| db.starts_with(p)) {
            bad.push(format!(
                "database {:?}: use postgres://user@host/db, mysql://user@host/db or sqlite://path",
                crate::redact(db)
            ));
        }
        if self.schema.is_some() && !db.starts_with("postgres") {
            bad.push("schema is PostgreSQL's: on other databases leave it out".into());
        }
        match self.listen.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {}
            _ => bad.push(format!("listen {:?} must be HOST:PORT", self.listen)),
        }
        if self.grace.is_zero() {
            bad.push("grace must be longer than 0".into());
        }
        if let Err(e) = self.peer_wake() {
            bad.push(e);
        }
        for (name, d) in [
            ("poll_interval", self.poll_interval),
            ("rescue_interval", self.rescue_interval),
            ("rotate_interval", self.rotate_interval),
        ] {
            if d.is_some_and(|d| d.is_zero()) {
                bad.push(format!("{name} must be longer than 0"));
            }
        }
        if self.rate_limit > 0 && self.rate_burst == 0 {
            bad.push("rate_burst must be at least 1 when rate_limit is set".into());
        }
        if let Some(half) = self.tls_half {
            bad.push(half.into());
        }
        if let Some((c, k)) = &self.tls {
            for p in [c, k] {
                if !p.is_file() {
                    bad.push(format!("{} does not exist", p.display()));
                }
            }
        }
        for o in &self.cors_origins {
            if let Err(e) = crate::cli::parse_origin(o) {
                bad.push(format!("cors origin: {e}"));
            }
        }
        for ns in self.namespaces.keys() {
            if let Err(e) = docket_core::process::check_namespace(ns) {
                bad.push(format!("namespaces.{ns}: {e}"));
            }
        }
        for (name, url) in &self.sql.targets {
            if let Err(e) = docket_sql::wire::parse_conninfo(url) {
                bad.push(format!("sql target {name}: {e}"));
            }
        }
        for cfg in &self.pg_task {
            if let Err(e) = cfg.validate() {
                bad.push(format!("pg_task {}: {e}", cfg.name()));
            }
        }
        if bad.is_empty() {
            return Ok(());
        }
        anyhow::bail!("invalid configuration:\n  - {}", bad.join("\n  - "))
    }

    /// Where the database is.
    pub fn connect_opts(&self) -> docket_engine::DatabaseOptions {
        docket_engine::DatabaseOptions {
            url: self.database.clone(),
            schema: self.schema.clone(),
            max_connections: None,
            strict_commit: self.strict_commit,
        }
    }
}
