//! `docket bench` itself: the phases in order, the numbers printed, saved and compared.

use super::args::{BenchArgs, BenchSub, Mode};
use super::churn::churn;
use super::latency::{latency, print_breakdown, Pickup};
use super::peers::peer;
use super::pg_task::pg_task_bench;
use super::phases::{
    engine_for, enqueue_all, fair_phase, open_fresh, pct, read_probe, work_http, work_inproc,
    work_queue, workflow_phase,
};
use super::sql::sql;
use anyhow::{Context, Result};
use docket_core::api::Backend;
use docket_core::SystemClock;
use docket_engine::{Database, Engine, EngineConfig};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

pub async fn run(a: BenchArgs) -> Result<()> {
    match a.sub {
        Some(BenchSub::Peer { cmd }) => return peer(cmd).await,
        Some(BenchSub::Churn {
            database,
            rate,
            minutes,
            sample,
            hold_snapshot,
        }) => return churn(&database, rate, minutes, sample, hold_snapshot).await,
        None => {}
    }
    if a.mode == Mode::PgTask {
        return pg_task_bench(&a).await;
    }
    let (store, opts, _dir, schema) = open_fresh(a.database.as_deref()).await?;
    let backend = format!("{:?}", store.backend()).to_lowercase();
    let probe = Arc::new(docket_engine::probe::Probe::default());
    let mut engine = engine_for(store.clone());
    if a.breakdown {
        engine = engine.with_probe(probe.clone());
    }
    let cancel = CancellationToken::new();
    let mut services = engine.start(cancel.clone()).await?;
    // More nodes on the same database: each its own store (pool), engine and HTTP server.
    let mut nodes = vec![engine.clone()];
    for i in 1..a.nodes.max(1) {
        // Several hosts in the URL (a Galera cluster): node i works through host i first.
        let s = Database::open(&opts.for_node(i)?).await?;
        let cfg = EngineConfig::new(format!("bench-{i}"), s.backend());
        let mut e = Engine::new(s, Arc::new(SystemClock), cfg);
        if a.breakdown {
            e = e.with_probe(probe.clone());
        }
        services.extend(e.start(cancel.clone()).await?);
        nodes.push(e);
    }
    if nodes.len() > 1 {
        // Each node's registry row read by the others now, not at their next heartbeat: the
        // nodes wake each other from the start (databases that cannot notify).
        for _ in 0..2 {
            for e in &nodes {
                docket_engine::maintenance::heartbeat(e, e.clock.now()).await?;
            }
        }
    }
    println!(
        "docket bench: backend={backend} mode={:?}{} n={} c={} enqueue_batch={}x{} claim_batch={}",
        a.mode,
        if a.auth { " auth" } else { "" },
        a.tasks,
        a.concurrency,
        a.enqueue_batch,
        a.enqueue_parallel,
        a.claim_batch
    );
    let bar = indicatif::ProgressBar::new_spinner();
    bar.enable_steady_tick(Duration::from_millis(100));
    if !a.watch_queue.is_empty() {
        engine.task_events_watch(&a.watch_queue).await?;
        bar.suspend(|| println!("watching the task events of {:?}", a.watch_queue));
    }
    if a.preload_finished > 0 {
        bar.set_message(format!("preloading {} finished tasks", a.preload_finished));
        let t = Instant::now();
        // In chunks, so 10M tasks need not sit in memory at once.
        let mut left = a.preload_finished;
        let mut chunk = 0;
        while left > 0 {
            let n = left.min(500_000);
            let queue = format!("history-{chunk}");
            enqueue_all(&engine, n, 5000, 2, &queue).await?;
            work_queue(&engine, &queue, n, 32, 1000).await?;
            left -= n;
            chunk += 1;
        }
        bar.suspend(|| {
            println!(
                "preloaded {} finished tasks in {:.1} s",
                a.preload_finished,
                t.elapsed().as_secs_f64()
            )
        });
    }
    if a.settle {
        if let (Some(schema), Backend::Postgres) = (&schema, store.backend()) {
            bar.set_message("settling: VACUUM (ANALYZE), CHECKPOINT");
            let t = Instant::now();
            let pg = sqlx::postgres::PgPoolOptions::new()
                .max_connections(1)
                .connect(&opts.url)
                .await?;
            // One statement each: a multi-statement string runs as one transaction, and
            // VACUUM refuses to run inside one.
            sqlx::raw_sql(&format!("VACUUM (ANALYZE) \"{schema}\".docket_tasks"))
                .execute(&pg)
                .await?;
            sqlx::raw_sql("CHECKPOINT").execute(&pg).await?;
            pg.close().await;
            bar.suspend(|| println!("settled in {:.1} s", t.elapsed().as_secs_f64()));
        }
        if store.backend() == Backend::MySql {
            bar.set_message("settling: ANALYZE TABLE, waiting for InnoDB's purge");
            let t = Instant::now();
            let my = sqlx::mysql::MySqlPoolOptions::new()
                .max_connections(1)
                .connect(&opts.url)
                .await?;
            sqlx::raw_sql("ANALYZE TABLE docket_tasks, docket_tasks_done")
                .execute(&my)
                .await?;
            // The preload's undo log: purge works through it in the background for a while
            // (the history list length falls to a few entries when it is done); 10 min at most.
            let mut history = i64::MAX;
            while history > 1000 && t.elapsed() < Duration::from_secs(600) {
                history = sqlx::query_scalar(sql("mysql_history_length"))
                    .fetch_optional(&my)
                    .await?
                    .unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            // PostgreSQL's CHECKPOINT: the preload's dirty pages written out, as the page
            // cleaner does in the background (down to 1% of the pool; within the same 10 min).
            let status = |name: &'static str| {
                let my = &my;
                async move {
                    let v: Option<(String, String)> =
                        sqlx::query_as(&format!("SHOW GLOBAL STATUS LIKE '{name}'"))
                            .fetch_optional(my)
                            .await?;
                    anyhow::Ok(v.and_then(|v| v.1.parse::<i64>().ok()).unwrap_or(0))
                }
            };
            let total = status("Innodb_buffer_pool_pages_total").await?;
            let mut dirty = status("Innodb_buffer_pool_pages_dirty").await?;
            while dirty * 100 > total && t.elapsed() < Duration::from_secs(600) {
                tokio::time::sleep(Duration::from_millis(500)).await;
                dirty = status("Innodb_buffer_pool_pages_dirty").await?;
            }
            my.close().await;
            bar.suspend(|| {
                println!(
                    "settled in {:.1} s (history list length {history}, dirty pages {dirty} of \
                     {total})",
                    t.elapsed().as_secs_f64()
                )
            });
        }
    }
    if a.read_probe > 0 {
        bar.set_message("probing the operator's reads");
        let out = read_probe(&engine, a.read_probe).await?;
        bar.suspend(|| println!("{out}"));
    }
    bar.set_message("enqueueing");
    let enq = enqueue_all(
        &engine,
        a.tasks,
        a.enqueue_batch,
        a.enqueue_parallel,
        "bench",
    )
    .await?;
    bar.set_message("working");
    let work = match a.mode {
        Mode::Inproc => work_inproc(&engine, a.tasks, a.concurrency, a.claim_batch).await?,
        Mode::Http | Mode::PgTask => {
            work_http(
                &nodes,
                a.tasks,
                a.concurrency,
                a.claim_batch.min(10_000),
                a.auth,
            )
            .await?
        }
    };
    bar.set_message("latency");
    let lat = if a.latency_secs > 0 {
        // With several nodes, tasks are enqueued through the first and worked through the
        // last: the cross-node pickup.
        latency(
            &engine,
            nodes.last().unwrap_or(&engine),
            a.latency_rate,
            a.latency_secs,
            a.concurrency,
            a.mode,
            a.auth,
        )
        .await?
    } else {
        vec![]
    };
    bar.finish_and_clear();
    println!(
        "enqueue:  {:>10.0} tasks/s  ({} tasks in {:.3} s)",
        a.tasks as f64 / enq.as_secs_f64(),
        a.tasks,
        enq.as_secs_f64()
    );
    println!(
        "worked:   {:>10.0} tasks/s  ({} tasks in {:.3} s)",
        a.tasks as f64 / work.as_secs_f64(),
        a.tasks,
        work.as_secs_f64()
    );
    if a.workflow_chains > 0 && a.mode == Mode::Inproc {
        workflow_phase(
            &engine,
            a.tasks,
            a.workflow_chains,
            a.concurrency,
            a.claim_batch,
            work,
        )
        .await?;
    }
    if a.fair_tenants > 0 && a.mode == Mode::Inproc {
        fair_phase(&engine, a.fair_tenants, a.concurrency, a.claim_batch).await?;
    }
    if a.breakdown && !lat.is_empty() {
        print_breakdown(&lat, &probe.marks());
    }
    let lat: Vec<(f64, f64)> = lat.iter().map(Pickup::ms).collect();
    if !lat.is_empty() {
        let mut v: Vec<f64> = lat.iter().map(|l| l.0).filter(|x| !x.is_nan()).collect();
        let missed = lat.len() - v.len();
        v.sort_by(|x, y| x.partial_cmp(y).expect("no NaN"));
        println!(
            "pickup latency ({} tasks at {}/s): p50 {:.2} ms  p95 {:.2} ms  p99 {:.2} ms  max {:.2} ms{}",
            lat.len(),
            a.latency_rate,
            pct(&v, 50.0),
            pct(&v, 95.0),
            pct(&v, 99.0),
            v.last().copied().unwrap_or(f64::NAN),
            if missed > 0 { format!("  ({missed} never ran)") } else { String::new() }
        );
    }
    let mut pickup: Vec<f64> = lat.iter().map(|l| l.0).filter(|x| !x.is_nan()).collect();
    pickup.sort_by(|x, y| x.partial_cmp(y).expect("no NaN"));
    let result = Numbers {
        backend: backend.clone(),
        mode: format!("{:?}", a.mode).to_lowercase(),
        tasks: a.tasks,
        concurrency: a.concurrency,
        enqueue_per_s: a.tasks as f64 / enq.as_secs_f64(),
        worked_per_s: a.tasks as f64 / work.as_secs_f64(),
        pickup_p99_ms: (!pickup.is_empty()).then(|| pct(&pickup, 99.0)),
    };
    cancel.cancel();
    for h in services {
        let _ = h.await;
    }
    let compared = a
        .compare
        .as_deref()
        .map(|f| compare(&result, f, a.max_drop))
        .transpose();
    if let Some(f) = &a.save {
        std::fs::write(f, serde_json::to_string_pretty(&result)? + "\n")
            .with_context(|| format!("cannot write {}", f.display()))?;
        println!("saved to {}", f.display());
    }
    let backend = store.backend();
    store.close().await;
    if let (Some(name), Some(url), Backend::Postgres | Backend::MySql) =
        (schema, a.database.as_deref(), backend)
    {
        Database::drop_scratch(url, &name)
            .await
            .context("dropping the bench schema or database")?;
    }
    compared?;
    Ok(())
}

/// One run's numbers, as `--save` writes them and `--compare` reads them.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct Numbers {
    backend: String,
    mode: String,
    tasks: usize,
    concurrency: usize,
    enqueue_per_s: f64,
    worked_per_s: f64,
    pickup_p99_ms: Option<f64>,
}

/// Prints the ratio of each number to the baseline; an error when one is `max_drop` times
/// worse.
pub(super) fn compare(now: &Numbers, file: &std::path::Path, max_drop: f64) -> Result<()> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("cannot read the baseline {}", file.display()))?;
    let base: Numbers = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a baseline written by --save", file.display()))?;
    if (base.backend.as_str(), base.mode.as_str()) != (now.backend.as_str(), now.mode.as_str()) {
        anyhow::bail!(
            "the baseline is {} {}, this run {} {}: compare like with like",
            base.backend,
            base.mode,
            now.backend,
            now.mode
        );
    }
    // Each row: name, baseline, now, how many times worse (>1 is worse).
    let mut rows = vec![
        (
            "enqueue tasks/s",
            base.enqueue_per_s,
            now.enqueue_per_s,
            base.enqueue_per_s / now.enqueue_per_s,
        ),
        (
            "worked tasks/s",
            base.worked_per_s,
            now.worked_per_s,
            base.worked_per_s / now.worked_per_s,
        ),
    ];
    if let (Some(b), Some(n)) = (base.pickup_p99_ms, now.pickup_p99_ms) {
        rows.push(("pickup p99 ms", b, n, n / b));
    }
    let mut worse = vec![];
    for (name, b, n, times) in rows {
        println!(
            "vs baseline: {name:<16} {b:>10.2} -> {n:>10.2}  ({:.2}x of baseline)",
            n / b
        );
        if !times.is_finite() || times >= max_drop {
            worse.push(format!("{name} is {times:.1}x worse ({b:.2} -> {n:.2})"));
        }
    }
    if !worse.is_empty() {
        anyhow::bail!(
            "a regression of {max_drop}x or more against {}: {}",
            file.display(),
            worse.join("; ")
        );
    }
    Ok(())
}
