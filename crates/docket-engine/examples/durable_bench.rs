//! The `docket-rs` contender of the durable-functions bench (bench/durable/README.md): the
//! engine embedded in this process, a `WorkerPool` running the workflow `three_steps` (three
//! no-op steps, `docket_engine::durable_fn`), STARTERS tasks starting N runs with
//! `Engine::run_start` and waiting for each with `Engine::run_result`.
//!
//! Environment: DATABASE_URL (a fresh database bench/durable/run.sh made), N (2000), STARTERS
//! (10), WORKER_CONC (100: runs executing at once), DOCKET_DEFER_STEPS ("0": each step
//! recorded before `step` returns), OUT (the JSON file), CONTENDER.
//!
//! Build: `cargo build --release -p docket-engine --example durable_bench`.

use docket_core::clock::SystemClock;
use docket_core::durable::{RunState, StartRequest};
use docket_engine::durable_fn::WorkflowContext;
use docket_engine::worker::{WorkerConfig, WorkerPool};
use docket_engine::{Database, DatabaseOptions, Engine, EngineConfig};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Nearest rank.
fn pct(xs: &mut [f64], p: f64) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * xs.len() as f64).ceil() as usize;
    Some((xs[rank.clamp(1, xs.len()) - 1] * 1000.0).round() / 1000.0)
}

fn summary(xs: &Mutex<Vec<f64>>) -> Value {
    let mut xs = xs.lock().unwrap().clone();
    let mean = if xs.is_empty() {
        None
    } else {
        Some(xs.iter().sum::<f64>() / xs.len() as f64)
    };
    json!({"count": xs.len(), "p50": pct(&mut xs, 50.0), "p99": pct(&mut xs, 99.0),
           "max": pct(&mut xs, 100.0), "mean": mean})
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1000.0
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("DATABASE_URL")?;
    let n = env("N", 2000);
    let starters = env("STARTERS", 10);
    let conc = env("WORKER_CONC", 100);
    let eager = std::env::var("DOCKET_DEFER_STEPS").is_ok_and(|v| v == "0");
    let db = Database::open(&DatabaseOptions::new(url)).await?;
    db.migrate().await?;
    let config = EngineConfig::new("bench-durable", db.backend());
    let engine = Engine::new(db, Arc::new(SystemClock), config);
    let stop = CancellationToken::new();
    engine.start(stop.clone()).await?;

    let step_ms = Arc::new(Mutex::new(Vec::new()));
    let workflow_ms = Arc::new(Mutex::new(Vec::new()));
    let (steps, bodies) = (step_ms.clone(), workflow_ms.clone());
    let three_steps = move |ctx: WorkflowContext, input: Value| {
        let (steps, bodies) = (steps.clone(), bodies.clone());
        async move {
            let t0 = Instant::now();
            for k in 0..3 {
                let s = Instant::now();
                ctx.step(&format!("noop{k}"), || async { Ok::<_, String>(()) })
                    .await?;
                steps.lock().unwrap().push(ms(s));
            }
            bodies.lock().unwrap().push(ms(t0));
            Ok(input)
        }
    };
    let mut wc = WorkerConfig::new("workflows");
    wc.concurrency = conc;
    wc.prefetch = conc;
    wc.eager_steps = eager;
    wc.worker = "bench-durable".into();
    let worker = tokio::spawn(
        WorkerPool::new(engine.clone(), wc)
            .workflow("three_steps", three_steps)
            .run(stop.clone()),
    );
    tokio::time::sleep(Duration::from_millis(500)).await; // the pool's first claim waits

    let start_ms = Arc::new(Mutex::new(Vec::new()));
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let completed = Arc::new(Mutex::new(0usize));
    let t0 = Instant::now();
    let mut tasks = vec![];
    for k in 0..starters {
        let (engine, start_ms, errors, completed) = (
            engine.clone(),
            start_ms.clone(),
            errors.clone(),
            completed.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut ids = vec![];
            for i in (k..n).step_by(starters) {
                let s = Instant::now();
                let r = engine
                    .run_start(StartRequest {
                        workflow: "three_steps".into(),
                        input: json!(i),
                        ..StartRequest::default()
                    })
                    .await;
                start_ms.lock().unwrap().push(ms(s));
                match r {
                    Ok(r) => ids.push(r.run.id),
                    Err(e) => errors.lock().unwrap().push(e.to_string()),
                }
            }
            for id in ids {
                loop {
                    match engine.run_result(&id, Duration::from_secs(30)).await {
                        Ok(Some(r)) if r.state.is_finished() => {
                            if r.state == RunState::Completed {
                                *completed.lock().unwrap() += 1;
                            }
                            break;
                        }
                        Ok(_) => {}
                        Err(e) => {
                            errors.lock().unwrap().push(e.to_string());
                            break;
                        }
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await?;
    }
    let secs = t0.elapsed().as_secs_f64();
    stop.cancel();
    worker.await?;
    let completed = *completed.lock().unwrap();
    let errors = errors.lock().unwrap().clone();
    let bodies: Vec<f64> = workflow_ms
        .lock()
        .unwrap()
        .iter()
        .map(|x| x / 3.0)
        .collect();
    let out = json!({
        "contender": std::env::var("CONTENDER").unwrap_or_else(|_| "docket-rs".into()),
        "library": format!("docket-engine {} (embedded)", env!("CARGO_PKG_VERSION")),
        "runtime": "rust (tokio, release build)",
        "mode": format!("Engine::run_start per run from each of {starters} tokio starters; run_result(30 s); WorkerPool(concurrency {conc}) workflow, eager_steps {eager}"),
        "defer_steps": !eager,
        "n": n, "starters": starters, "steps_per_workflow": 3, "worker_concurrency": conc,
        "seconds": secs,
        "workflows_per_s": (n as f64 / secs * 100.0).round() / 100.0,
        "steps_per_s": (3.0 * n as f64 / secs * 100.0).round() / 100.0,
        "step_ms": summary(&step_ms),
        "workflow_ms": summary(&workflow_ms),
        "workflow_ms_per_step": summary(&Mutex::new(bodies)),
        "start_call_ms": summary(&start_ms),
        "verified_success": completed,
        "errors": errors.iter().take(5).collect::<Vec<_>>(),
        "ok": completed == n && errors.is_empty(),
    });
    std::fs::write(std::env::var("OUT")?, serde_json::to_vec_pretty(&out)?)?;
    println!(
        "RESULT workflows_per_s={} seconds={secs:.3} ok={}",
        out["workflows_per_s"], out["ok"]
    );
    Ok(())
}
