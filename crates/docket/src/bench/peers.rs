//! `docket bench peer …`: the contract of `shared/bench/peers` (see bench/contender/bench.sh).

use super::args::{Mode, PeerCmd};
use super::latency::{latency, Pickup};
use super::phases::{engine_for, enqueue_all, work_http, work_inproc};
use anyhow::{bail, Context, Result};
use docket_engine::{Database, DatabaseOptions};
use tokio_util::sync::CancellationToken;

/// The peer harness's store; `strict`: every commit waits for the WAL flush (as `docket serve
/// --strict-commit`), else claims and completions commit without waiting (the default).
pub(super) async fn peer_store(strict: bool) -> Result<Database> {
    let url = std::env::var("DATABASE_URL").context("DATABASE_URL is not set")?;
    Ok(Database::open(&DatabaseOptions {
        url,
        schema: None,
        max_connections: Some(20),
        strict_commit: strict,
    })
    .await?)
}

pub(super) async fn peer(p: PeerCmd) -> Result<()> {
    let strict = matches!(&p, PeerCmd::Work { profile, .. } if profile.ends_with("strict"));
    let store = peer_store(strict).await?;
    match p {
        PeerCmd::Setup => store.migrate().await?,
        PeerCmd::Enqueue { n } => {
            let engine = engine_for(store.clone());
            let el = enqueue_all(&engine, n, 5000, 2, "bench").await?;
            println!("RESULT seconds={:.6}", el.as_secs_f64());
        }
        PeerCmd::Work { n, c, profile } => {
            let engine = engine_for(store.clone());
            let el = match profile.as_str() {
                "default" | "strict" => work_inproc(&engine, n, c, 1000).await?,
                "small" | "small-strict" => work_inproc(&engine, n, c, 100).await?,
                "http" => work_http(std::slice::from_ref(&engine), n, c, 1000, false).await?,
                other => {
                    bail!("unknown profile {other:?} (default, small, strict, small-strict, http)")
                }
            };
            println!("RESULT seconds={:.6}", el.as_secs_f64());
        }
        PeerCmd::Latency { rate, secs, c } => {
            let engine = engine_for(store.clone());
            let cancel = CancellationToken::new();
            let services = engine.start(cancel.clone()).await?;
            let lat = latency(&engine, &engine, rate, secs, c, Mode::Inproc, false).await?;
            let out = std::env::var("LAT_OUT").unwrap_or_else(|_| "lat.txt".into());
            let text: String = lat
                .iter()
                .map(Pickup::ms)
                .map(|(a, b)| format!("{a:.3} {b:.3}\n"))
                .collect();
            std::fs::write(&out, text)?;
            cancel.cancel();
            for h in services {
                let _ = h.await;
            }
        }
    }
    store.close().await;
    Ok(())
}
