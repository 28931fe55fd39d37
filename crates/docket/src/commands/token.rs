//! `docket token create|list|revoke`: through a server's `/v1/tokens`, or on a database
//! directly (before any token exists). Both print the same.

use super::serve::{default_node_name, redact};
use crate::{cli, connect_opts};
use anyhow::{bail, Context, Result};
use docket_client::Client;
use docket_core::api::TokenView;
use docket_core::SystemClock;
use docket_engine::{Database, Engine, EngineConfig};
use std::sync::Arc;

/// Opens the named database for token commands. A SQLite file that is not there is refused
/// rather than created: only `docket serve` and `docket migrate` make a database.
async fn open(db: &cli::DbArgs) -> Result<Database> {
    let opts = connect_opts(db);
    if let Some(path) = sqlite_path(&opts.url) {
        if path != ":memory:" && !std::path::Path::new(path).exists() {
            bail!(
                "no database at {path} (docket serve or docket migrate creates it; a server is reached with --server)"
            );
        }
    }
    let db = Database::open(&opts)
        .await
        .with_context(|| format!("cannot open the database {}", redact(&opts.url)))?;
    db.migrate().await.context("migrations failed")?;
    Ok(db)
}

/// The file of a `sqlite:` URL (`sqlite://FILE`, `sqlite:FILE`, with or without `?options`).
fn sqlite_path(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("sqlite:")?;
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    Some(rest.split('?').next().unwrap_or(rest))
}

fn scopes_of(scopes: &[String]) -> Result<Vec<docket_core::auth::Scope>> {
    scopes
        .iter()
        .map(|s| docket_core::auth::Scope::parse(s).map_err(anyhow::Error::msg))
        .collect()
}

fn announce(token: &str, v: &TokenView) {
    eprintln!(
        "created token {:?} ({}); it is shown once:",
        v.name,
        v.scopes
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!("{token}");
}

fn print_list(tokens: &[TokenView], now: docket_core::Timestamp) {
    println!(
        "{:<24} {:<28} {:<16} {:<9} LAST USED",
        "NAME", "SCOPES", "QUEUES", "STATE"
    );
    for t in tokens {
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

/// Token commands through a running server (`/v1/tokens`, admin scope).
pub(crate) async fn token_http_cmd(c: &Client, cmd: cli::TokenCmd) -> Result<()> {
    match cmd {
        cli::TokenCmd::Create {
            name,
            scopes,
            queues,
            expires_in,
        } => {
            let created = c
                .token_create(&docket_core::api::TokenCreateRequest {
                    name,
                    scopes: scopes_of(&scopes)?,
                    queues,
                    expires_in,
                })
                .await?;
            announce(&created.token, &created.info);
        }
        cli::TokenCmd::List => print_list(&c.token_list().await?.tokens, chrono::Utc::now()),
        cli::TokenCmd::Revoke { name } => {
            c.token_revoke(&name).await?;
            println!("revoked token {name:?}");
        }
    }
    Ok(())
}

/// Token commands on the database directly.
pub(crate) async fn token_cmd(db: &cli::DbArgs, cmd: cli::TokenCmd) -> Result<()> {
    let db = open(db).await?;
    let engine = Engine::new(
        db.clone(),
        Arc::new(SystemClock),
        EngineConfig::new(default_node_name(), db.backend()),
    );
    let actor = format!("cli:{}", std::env::var("USER").unwrap_or_default());
    match cmd {
        cli::TokenCmd::Create {
            name,
            scopes,
            queues,
            expires_in,
        } => {
            let (token, rec) = engine
                .token_create(docket_engine::auth::NewToken {
                    name,
                    scopes: scopes_of(&scopes)?,
                    queues,
                    expires_in,
                    secret: None,
                })
                .await
                .map_err(|e| match e {
                    docket_engine::EngineError::Conflict(_) => {
                        anyhow::anyhow!("a live token already has that name (revoke it first)")
                    }
                    e => anyhow::anyhow!("{e}"),
                })?;
            engine.token_audit(&actor, "create", &rec.name).await;
            announce(&token, &rec);
        }
        cli::TokenCmd::List => {
            print_list(&engine.token_list().await?, engine.clock.now());
        }
        cli::TokenCmd::Revoke { name } => {
            if !engine.token_revoke(&name).await? {
                anyhow::bail!("no live token named {name:?}");
            }
            engine.token_audit(&actor, "revoke", &name).await;
            println!("revoked token {name:?}");
        }
    }
    db.close().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::sqlite_path;

    #[test]
    fn sqlite_paths() {
        assert_eq!(sqlite_path("sqlite://docket.db"), Some("docket.db"));
        assert_eq!(sqlite_path("sqlite:x.db?mode=rwc"), Some("x.db"));
        assert_eq!(sqlite_path("sqlite:///tmp/a.db"), Some("/tmp/a.db"));
        assert_eq!(sqlite_path("postgres://h/db"), None);
    }
}
