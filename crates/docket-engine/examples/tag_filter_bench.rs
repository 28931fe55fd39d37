//! The tag filter at scale (issue 43): `GET /v1/tasks?tag=…`'s store query (`task_list` with
//! `tag`, the store's `tasks.list_tagged`) against a database bench/tags/run.sh filled, timed
//! per call. Rare tags (`customer:N`, ~100 tasks each), the same with a queue filter, tags on
//! 1 task in 500 (`region:N`: past PostgreSQL's window of 20,000 ids, so found through the
//! index) and common ones (`plan:N`, a third of all tasks each), each a page of 50, newest
//! first.
//!
//! Environment: DATABASE_URL, SCHEMA (PostgreSQL), CALLS (500 per kind of query), CUSTOMERS
//! (100000: the customer tags the fill made), OUT (the JSON file, else stdout only).
//!
//! Build: `cargo build --release -p docket-engine --example tag_filter_bench`.

use docket_store::{ConnectOptions, TaskListParams};
use serde_json::{json, Value};
use std::time::Instant;

/// A kind of query: its name and the filter of call `i`.
type Query = (&'static str, Box<dyn Fn(u64) -> TaskListParams>);

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Nearest rank, ms.
fn pct(xs: &mut [f64], p: f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * xs.len() as f64).ceil() as usize;
    (xs[rank.clamp(1, xs.len()) - 1] * 1000.0).round() / 1000.0
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("DATABASE_URL")?;
    let mut opts = ConnectOptions::new(url);
    opts.schema = std::env::var("SCHEMA").ok();
    let store = docket_store::connect(&opts).await?;
    let calls = env("CALLS", 500);
    let customers = env("CUSTOMERS", 100_000);
    let mut out = serde_json::Map::new();
    let kinds: [Query; 4] = [
        (
            "rare tag (customer:N, ~100 tasks)",
            Box::new(move |i| TaskListParams {
                tag: Some(format!("customer:{}", (i * 7919) % customers)),
                ..Default::default()
            }),
        ),
        (
            "rare tag and a queue",
            Box::new(move |i| TaskListParams {
                tag: Some(format!("customer:{}", (i * 104_729) % customers)),
                queue: Some(format!("q{}", i % 10)),
                ..Default::default()
            }),
        ),
        (
            "tag on 1 task in 500 (region:N, ~18,000 tasks)",
            Box::new(|i| TaskListParams {
                tag: Some(format!("region:{}", (i * 7) % 500)),
                ..Default::default()
            }),
        ),
        (
            "common tag (plan:N, 1/3 of the tasks)",
            Box::new(|i| TaskListParams {
                tag: Some(format!("plan:{}", i % 3)),
                ..Default::default()
            }),
        ),
    ];
    for (name, make) in &kinds {
        let mut ms = Vec::with_capacity(calls as usize);
        let mut found = 0usize;
        for i in 0..calls {
            let mut p = make(i);
            p.limit = 50;
            p.descending = true;
            let t = Instant::now();
            let page = store.task_list(p).await?;
            ms.push(t.elapsed().as_secs_f64() * 1000.0);
            found += page.len();
        }
        let v: Value = json!({
            "calls": calls, "tasks_per_page_mean": found as f64 / calls as f64,
            "p50_ms": pct(&mut ms, 50.0), "p99_ms": pct(&mut ms, 99.0), "max_ms": pct(&mut ms, 100.0),
        });
        println!("{name}: {v}");
        out.insert((*name).to_string(), v);
    }
    if let Ok(path) = std::env::var("OUT") {
        std::fs::write(path, serde_json::to_string_pretty(&Value::Object(out))?)?;
    }
    store.close().await;
    Ok(())
}
