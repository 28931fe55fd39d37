//! The `docket` binary: `serve`, `migrate`, `task`, `queue`, `node`, `worker`, `bench`.

mod bench;
mod cli;
mod commands;
mod config;
mod telemetry;

use anyhow::{Context, Result};
use clap::Parser;
use cli::*;
use docket_engine::{Database, DatabaseOptions};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

use commands::{
    batch::*, output::*, queue::*, rate_limit::*, schedule::*, serve::*, status::*, task::*,
    token::*, worker::*, workflow::*, workflow_run::*,
};

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

/// The default database: a SQLite file in the current directory.
pub(crate) const DEFAULT_DATABASE: &str = "sqlite://docket.db";

pub(crate) fn connect_opts(db: &DbArgs) -> DatabaseOptions {
    DatabaseOptions {
        url: db
            .database
            .clone()
            .unwrap_or_else(|| DEFAULT_DATABASE.to_string()),
        schema: db.schema.clone(),
        max_connections: None,
        strict_commit: db.strict_commit,
    }
}

#[tokio::main]
async fn main() {
    quiet_broken_pipe();
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

/// `docket task list | head` must end quietly when `head` stops reading, as C tools do on
/// SIGPIPE: Rust ignores SIGPIPE (so a server survives a closed socket) and `println!` panics on
/// the broken pipe instead. Without `unsafe` the signal cannot be restored, so the panic it
/// causes exits with SIGPIPE's shell status (141) and no message; other panics are reported.
fn quiet_broken_pipe() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        // println! says "failed printing to stdout: Broken pipe", clap_complete's writer
        // "…: Os { code: 32, kind: BrokenPipe, … }".
        if msg.contains("Broken pipe") || msg.contains("BrokenPipe") {
            std::process::exit(141);
        }
        report(info);
    }));
}

async fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Serve(a) => serve(a).await,
        Command::Migrate { db } => {
            init_logs(LogFormat::Text, "warn");
            if db.database.is_none() {
                anyhow::bail!(
                    "say which database to migrate: --database URL (or DOCKET_DATABASE_URL)"
                );
            }
            let db_ = Database::open(&connect_opts(&db)).await?;
            db_.migrate().await?;
            println!("migrated {}", connect_opts(&db).url);
            Ok(())
        }
        Command::Token {
            db,
            server,
            token,
            ca_file,
            cmd,
        } => {
            init_logs(LogFormat::Text, "warn");
            match (server, &db.database) {
                (Some(_), Some(_)) => anyhow::bail!(
                    "both a server (--server/DOCKET_SERVER) and a database (--database/DOCKET_DATABASE_URL) are given: token commands use one, unset the other"
                ),
                (Some(server), None) => {
                    let c = cli::ServerArgs {
                        server,
                        token,
                        ca_file,
                    }
                    .client()?;
                    token_http_cmd(&c, cmd).await
                }
                (None, Some(_)) => token_cmd(&db, cmd).await,
                (None, None) => anyhow::bail!(
                    "say where the tokens are: --server URL (a running docket serve, with an admin --token) or --database URL"
                ),
            }
        }
        Command::Task { server, cmd } => task_cmd(server.client()?, cmd).await,
        Command::Queue { server, cmd } => queue_cmd(server.client()?, cmd).await,
        Command::Schedule { server, cmd } => schedule_cmd(server.client()?, cmd).await,
        Command::Batch { server, cmd } => batch_cmd(server.client()?, cmd).await,
        Command::RateLimit { server, cmd } => rate_limit_cmd(server.client()?, cmd).await,
        Command::Workflow { server, cmd } => workflow_cmd(server.client()?, cmd).await,
        Command::WorkflowRun { server, cmd } => workflow_run_cmd(server.client()?, cmd).await,
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
        Command::Node {
            server,
            json: _,
            cmd: Some(cmd),
        } => {
            let c = server.client()?;
            let v = match &cmd {
                NodeCmd::Drain { name, to } => c.node_drain(name, to.as_deref()).await?,
                NodeCmd::Resume { name } => c.node_resume(name).await?,
            };
            println!("{}", serde_json::to_string_pretty(&v)?);
            Ok(())
        }
        Command::Node {
            server,
            json,
            cmd: None,
        } => {
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

/// Parses a label, `NAME=VALUE`, for clap (the server checks the bounds).
pub(crate) fn parse_label(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() && !v.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("{s:?}: a label is NAME=VALUE (e.g. gpu=a100)")),
    }
}

/// Parses a humantime duration for clap.
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    docket_core::duration::parse(s)
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
