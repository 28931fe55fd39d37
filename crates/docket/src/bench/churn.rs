//! `docket bench churn`: PostgreSQL table churn under a steady task rate.

use super::phases::{engine_for, noop_tasks, open_fresh, pct, start_pool, Noop};
use super::sql::sql;
use anyhow::{bail, Context, Result};
use docket_engine::{Claim, Database};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// `docket bench churn`: see [`BenchSub::Churn`].
pub(super) async fn churn(
    url: &str,
    rate: u32,
    minutes: u32,
    sample: u64,
    hold: bool,
) -> Result<()> {
    if !url.starts_with("postgres") {
        bail!("docket bench churn needs --database postgres://…");
    }
    let (store, _opts, _dir, schema) = open_fresh(Some(url)).await?;
    let schema = schema.context("a fresh schema")?;
    let engine = engine_for(store.clone());
    let cancel = CancellationToken::new();
    let services = engine.start(cancel.clone()).await?;
    let pg = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(url)
        .await?;
    // pg_stat's n_dead_tup is a running count that TRUNCATE does not always reset (pending
    // counts of other sessions land after it), so the ring's slots are also counted by a scan
    // (pgstattuple, a contrib extension shipped with PostgreSQL) when it can be installed.
    let scan = sqlx::query("CREATE EXTENSION IF NOT EXISTS pgstattuple SCHEMA public")
        .execute(&pg)
        .await
        .map_err(|e| println!("pgstattuple not available ({e}): no scanned dead tuples"))
        .is_ok();
    // The snapshot: an open REPEATABLE READ transaction that has read something.
    let mut holder = if hold {
        let mut c = pg.acquire().await?.detach();
        sqlx::raw_sql("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1;")
            .execute(&mut c)
            .await?;
        Some(c)
    } else {
        None
    };
    let done = Arc::new(AtomicUsize::new(0));
    let handler = Noop {
        done: done.clone(),
        target: usize::MAX,
        all_done: Arc::new(tokio::sync::Notify::new()),
        starts: None,
    };
    let (stop_pool, pool) = start_pool(&engine, "bench", 10, 100, 1, handler);
    // The producer: rate/10 tasks every 100 ms.
    let producer = {
        let engine = engine.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            let per = (rate as usize / 10).max(1);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = cancel.cancelled() => return anyhow::Ok(()),
                }
                engine.enqueue_many(noop_tasks(per, "bench")).await?;
            }
        })
    };
    // The probe: one task into its own queue and a timed claim of it, every 100 ms.
    let claims: Arc<Mutex<Vec<f64>>> = Arc::default();
    let probe = {
        let (engine, cancel, claims) = (engine.clone(), cancel.clone(), claims.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = cancel.cancelled() => return anyhow::Ok(()),
                }
                engine.enqueue_many(noop_tasks(1, "probe")).await?;
                let t = Instant::now();
                let got = engine
                    .claim(&Claim::new("probe", "probe", 1), &cancel)
                    .await?;
                let ms = t.elapsed().as_secs_f64() * 1000.0;
                claims.lock().expect("lock").push(ms);
                let items: Vec<_> = got
                    .iter()
                    .map(|t| docket_core::lease::TaskComplete {
                        id: t.id,
                        token: t.lease.clone().expect("lease").token,
                        result: serde_json::Value::Null,
                        next: None,
                    })
                    .collect();
                engine.complete_many(&items).await?;
            }
        })
    };
    println!(
        "docket bench churn: {rate} tasks/s for {minutes} min, snapshot held: {hold}, schema {schema}"
    );
    println!(
        " minute  completed  tasks/s  hot dead  slot0 dead  scanned dead  hot live  hot MB  all dead  all MB  claim p50 ms  claim p99 ms"
    );
    let start = Instant::now();
    let end = start + Duration::from_secs(u64::from(minutes) * 60);
    let mut last = 0usize;
    let mut last_t = start;
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_secs(sample.max(1)).min(end - Instant::now())).await;
        let now_done = done.load(Ordering::Relaxed);
        let row: (i64, i64, i64, i64, i64, i64) = sqlx::query_as(sql("pg_churn_stats"))
            .bind(&schema)
            .fetch_one(&pg)
            .await?;
        let scanned: Option<i64> = if scan {
            sqlx::query_scalar(sql("pg_dead_tuples_scanned"))
                .bind(&schema)
                .fetch_one(&pg)
                .await
                .ok()
        } else {
            None
        };
        let mut c = std::mem::take(&mut *claims.lock().expect("lock"));
        c.sort_by(|x, y| x.partial_cmp(y).expect("no NaN"));
        println!(
            "{:>7.1}  {:>9}  {:>7.0}  {:>8}  {:>10}  {:>12}  {:>8}  {:>6.1}  {:>8}  {:>6.1}  {:>12.2}  {:>12.2}",
            start.elapsed().as_secs_f64() / 60.0,
            now_done,
            (now_done - last) as f64 / last_t.elapsed().as_secs_f64(),
            row.0,
            row.5,
            scanned.map_or_else(|| "-".to_string(), |n| n.to_string()),
            row.1,
            row.2 as f64 / 1_048_576.0,
            row.3,
            row.4 as f64 / 1_048_576.0,
            pct(&c, 50.0),
            pct(&c, 99.0)
        );
        last = now_done;
        last_t = Instant::now();
    }
    cancel.cancel();
    stop_pool.cancel();
    let _ = pool.await;
    producer.await??;
    probe.await??;
    for h in services {
        let _ = h.await;
    }
    if let Some(c) = holder.as_mut() {
        sqlx::raw_sql("ROLLBACK").execute(&mut *c).await?;
    }
    store.close().await;
    Database::drop_scratch(url, &schema)
        .await
        .context("dropping the bench schema")?;
    Ok(())
}
