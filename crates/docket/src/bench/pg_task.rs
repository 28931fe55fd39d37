//! `docket bench --mode pg-task`: pg_task-compatible task tables run by docket-sql.

use super::args::BenchArgs;
use super::sql::sql;
use anyhow::{Context, Result};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// `docket bench --mode pg-task`: N `SELECT 1` rows in a fresh pg_task table, run C at a time
/// (`max` C-1), first with a fresh session per task (pg_task's default), then with `count` N so
/// each session runs its group's tasks in turn; then the pickup latency (start - plan) of single
/// inserts at `latency_rate`.
pub(super) async fn pg_task_bench(a: &BenchArgs) -> Result<()> {
    let url = a
        .database
        .clone()
        .filter(|u| u.starts_with("postgres"))
        .context("--mode pg-task needs --database postgres://...")?;
    let schema = format!("bench_pgt_{}", std::process::id());
    let mut cfg = docket_sql::PgTaskConfig::new(url.clone());
    cfg.schema = schema.clone();
    let cancel = CancellationToken::new();
    let served = docket_sql::pgtask::start(cfg, "bench", cancel.clone(), Duration::from_secs(5))
        .await
        .context("cannot serve the bench pg_task table")?;
    let db = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect(&url)
        .await?;
    let t = format!("{schema}.task");
    println!(
        "docket bench: pg_task table {t}, n={} c={} (max {})",
        a.tasks,
        a.concurrency,
        a.concurrency.saturating_sub(1)
    );
    for (label, count) in [
        ("fresh session per task", 0),
        ("sessions reused (count)", a.tasks),
    ] {
        let group = format!("g{count}");
        let started = Instant::now();
        sqlx::query(&docket_core::sqlfile::fill(
            sql("pgtask_insert"),
            &[("table", &t)],
        ))
        .bind(&group)
        .bind(a.concurrency.saturating_sub(1) as i32)
        .bind(count as i32)
        .bind(a.tasks as i64)
        .execute(&db)
        .await?;
        loop {
            let done: i64 = sqlx::query_scalar(&format!(
                "SELECT count(*) FROM {t} WHERE \"group\" = $1 AND state = 'DONE'"
            ))
            .bind(&group)
            .fetch_one(&db)
            .await?;
            if done as usize >= a.tasks {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let secs = started.elapsed().as_secs_f64();
        println!(
            "{label:<26} {:>8.0} tasks/s  ({} tasks in {secs:.3} s)",
            a.tasks as f64 / secs,
            a.tasks
        );
    }
    if a.latency_secs > 0 {
        let every = Duration::from_secs_f64(1.0 / f64::from(a.latency_rate.max(1)));
        let end = Instant::now() + Duration::from_secs(u64::from(a.latency_secs));
        while Instant::now() < end {
            sqlx::query(&format!(
                "INSERT INTO {t} (\"group\", input, \"delete\") VALUES ('lat', 'SELECT 1', false)"
            ))
            .execute(&db)
            .await?;
            tokio::time::sleep(every).await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let mut ms: Vec<f64> = sqlx::query_scalar(&format!(
            "SELECT extract(epoch FROM start - plan)::float8 * 1000 FROM {t} WHERE \"group\" = 'lat' AND start IS NOT NULL"
        ))
        .fetch_all(&db)
        .await?;
        ms.sort_by(|x, y| x.total_cmp(y));
        let p = |q: f64| ms[((ms.len() as f64 - 1.0) * q).round() as usize];
        if !ms.is_empty() {
            println!(
                "pickup (start - plan) at {}/s: p50 {:.2} ms  p95 {:.2} ms  p99 {:.2} ms  ({} tasks)",
                a.latency_rate,
                p(0.5),
                p(0.95),
                p(0.99),
                ms.len()
            );
        }
    }
    cancel.cancel();
    let _ = served.await;
    sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(&db)
        .await?;
    Ok(())
}
