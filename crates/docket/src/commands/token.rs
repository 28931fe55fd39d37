//! `docket token create|list|revoke`, on the database directly.

use crate::*;

pub(crate) async fn token_cmd(db: &cli::DbArgs, cmd: cli::TokenCmd) -> Result<()> {
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
