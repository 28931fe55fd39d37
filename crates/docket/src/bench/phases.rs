//! The phases of `docket bench`: a fresh database and engine, enqueueing, working the queue
//! in-process or over HTTP, the workflow and fair-queue phases.

use anyhow::Result;
use async_trait::async_trait;
use docket_core::{NewTask, SystemClock, Task};
use docket_engine::worker::{Handler, Outcome, WorkerConfig, WorkerPool};
use docket_engine::{Database, DatabaseOptions, Engine, EngineConfig};
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

pub(super) struct Noop {
    pub(super) done: Arc<AtomicUsize>,
    pub(super) target: usize,
    pub(super) all_done: Arc<tokio::sync::Notify>,
    pub(super) starts: Option<Arc<Mutex<HashMap<i64, Instant>>>>,
}

#[async_trait]
impl Handler for Noop {
    async fn run(&self, task: &Task) -> Outcome {
        if let Some(s) = &self.starts {
            s.lock().expect("lock").insert(task.id, Instant::now());
        }
        if self.done.fetch_add(1, Ordering::Relaxed) + 1 >= self.target {
            self.all_done.notify_one();
        }
        Outcome::Complete(serde_json::Value::Null)
    }
}

pub(super) fn noop_tasks(n: usize, queue: &str) -> Vec<NewTask> {
    (0..n)
        .map(|i| NewTask {
            queue: Some(queue.into()),
            ..NewTask::new("noop", json!({"i": i}))
        })
        .collect()
}

/// `n` tasks as one workflow of `chains` parallel chains on queue `bench-wf`: created, then
/// worked as the plain run was; prints both rates and the cost per task against `plain`.
pub(super) async fn workflow_phase(
    engine: &Engine,
    n: usize,
    chains: usize,
    c: usize,
    claim_batch: usize,
    plain: Duration,
) -> Result<()> {
    use docket_core::workflow::{Dependency, NewWorkflow, WorkflowTask};
    let tasks: Vec<WorkflowTask> = noop_tasks(n, "bench-wf")
        .into_iter()
        .enumerate()
        .map(|(i, task)| WorkflowTask {
            reference: i.to_string(),
            depends_on: if i >= chains {
                vec![Dependency::Ref((i - chains).to_string())]
            } else {
                vec![]
            },
            task,
        })
        .collect();
    let t = Instant::now();
    engine
        .workflow_create(NewWorkflow {
            name: Some("bench".into()),
            tasks,
            workflows: vec![],
            callbacks: Default::default(),
        })
        .await?;
    let created = t.elapsed();
    let work = work_queue(engine, "bench-wf", n, c, claim_batch).await?;
    let per_task_ms = (work.as_secs_f64() - plain.as_secs_f64()) * 1000.0 / n as f64;
    println!(
        "workflow: {n} tasks in {chains} chains: created in {:.3} s ({:.0} tasks/s), worked \
         {:.0} tasks/s ({:.3} s); cost per task against the plain run {per_task_ms:+.3} ms",
        created.as_secs_f64(),
        n as f64 / created.as_secs_f64(),
        n as f64 / work.as_secs_f64(),
        work.as_secs_f64()
    );
    Ok(())
}

/// Tenant A's `a_tasks` then tenant B's 100 in one queue, worked with fair claims on, then
/// in another queue with them off: B's pickup (claim − enqueue) each way.
pub(super) async fn fair_phase(
    engine: &Engine,
    a_tasks: usize,
    c: usize,
    claim_batch: usize,
) -> Result<()> {
    for fair in [true, false] {
        let queue = if fair {
            "bench-fair-on"
        } else {
            "bench-fair-off"
        };
        engine
            .queue_put(
                "bench",
                queue,
                &docket_core::QueueSettings {
                    fair,
                    ..Default::default()
                },
            )
            .await?;
        let tenant = |n: usize, t: &str| -> Vec<NewTask> {
            noop_tasks(n, queue)
                .into_iter()
                .map(|task| NewTask {
                    partition_key: Some(t.into()),
                    ..task
                })
                .collect()
        };
        let t = Instant::now();
        for chunk in tenant(a_tasks, "A").chunks(5000) {
            engine.enqueue_many(chunk.to_vec()).await?;
        }
        let b: Vec<i64> = engine
            .enqueue_many(tenant(100, "B"))
            .await?
            .iter()
            .map(|t| t.id)
            .collect();
        let enq = t.elapsed();
        let work = work_queue(engine, queue, a_tasks + 100, c, claim_batch).await?;
        let mut pickup = Vec::with_capacity(b.len());
        for id in b {
            let t = engine
                .task_get(id)
                .await?
                .ok_or_else(|| anyhow::anyhow!("task {id} is gone"))?;
            let started = t.attempted_at.unwrap_or(t.run_at);
            pickup.push((started - t.run_at).num_microseconds().unwrap_or(0) as f64 / 1000.0);
        }
        pickup.sort_by(|x, y| x.partial_cmp(y).expect("no NaN"));
        println!(
            "fair {}: tenant A {a_tasks} + tenant B 100 (enqueued in {:.3} s, worked in {:.3} s): \
             B's pickup p50 {:.1} ms  p99 {:.1} ms  max {:.1} ms",
            if fair { "on " } else { "off" },
            enq.as_secs_f64(),
            work.as_secs_f64(),
            pct(&pickup, 50.0),
            pct(&pickup, 99.0),
            pickup.last().copied().unwrap_or(f64::NAN)
        );
    }
    Ok(())
}

/// A fresh database for a bench run, what it was opened with (to open more nodes on it), its
/// temporary directory (SQLite) and the schema or database to drop afterwards.
pub(super) type Fresh = (
    Database,
    DatabaseOptions,
    Option<tempfile::TempDir>,
    Option<String>,
);

pub(super) async fn open_fresh(url: Option<&str>) -> Result<Fresh> {
    let (opts, dir, made) = match url {
        None => {
            let dir = tempfile::tempdir()?;
            let url = format!("sqlite://{}", dir.path().join("bench.db").display());
            (DatabaseOptions::new(url), Some(dir), None)
        }
        Some(u) if u.starts_with("sqlite") => (DatabaseOptions::new(u), None, None),
        Some(u) => {
            // A schema (PostgreSQL) or database (MySQL) of its own, dropped at the end.
            let name = if u.starts_with("postgres") {
                format!("docket_bench_{}", std::process::id())
            } else {
                format!("docket_bench_{}", uuid::Uuid::new_v4().simple())
            };
            let opts = DatabaseOptions {
                max_connections: Some(20),
                ..Database::create_scratch(u, &name).await?
            };
            (opts, None, Some(name))
        }
    };
    let s = Database::open(&opts).await?;
    s.migrate().await?;
    Ok((s, opts, dir, made))
}

pub(super) fn engine_for(store: Database) -> Engine {
    let mut cfg = EngineConfig::new("bench", store.backend());
    if let Some(d) = std::env::var("DOCKET_BENCH_ROTATE_INTERVAL")
        .ok()
        .and_then(|v| docket_core::duration::parse(&v).ok())
    {
        cfg.rotate_interval = d;
    }
    // Bytes the slot being filled must hold before the ring turns within a minute (0: every
    // interval, as before issue 40's change), for A/B runs.
    if let Some(b) = std::env::var("DOCKET_BENCH_ROTATE_MIN_FILL")
        .ok()
        .and_then(|v| v.parse::<i64>().ok())
    {
        cfg.rotate_min_fill_bytes = b;
    }
    Engine::new(store, Arc::new(SystemClock), cfg)
}

/// Enqueues `n` no-op tasks in batches of `batch`, `parallel` batches in flight (each batch is
/// one transaction). The specs are built before the clock starts.
pub(super) async fn enqueue_all(
    engine: &Engine,
    n: usize,
    batch: usize,
    parallel: usize,
    queue: &str,
) -> Result<Duration> {
    let mut batches: Vec<Vec<NewTask>> = vec![];
    let mut all = noop_tasks(n, queue).into_iter().peekable();
    while all.peek().is_some() {
        batches.push(all.by_ref().take(batch.max(1)).collect());
    }
    let slots = Arc::new(tokio::sync::Semaphore::new(parallel.max(1)));
    let t = Instant::now();
    let mut inflight = tokio::task::JoinSet::new();
    for b in batches {
        let permit = slots.clone().acquire_owned().await?;
        let engine = engine.clone();
        inflight.spawn(async move {
            let r = engine.enqueue_many(b).await;
            drop(permit);
            r
        });
    }
    while let Some(r) = inflight.join_next().await {
        r??;
    }
    Ok(t.elapsed())
}

/// Waits until no task of `queue` is unfinished (every completion committed). The wait asks only for unfinished tasks — on PostgreSQL the live partition —
/// because counting the queue's completed tasks reads its whole history, which would make the
/// measurement grow with `--preload-finished` for the bench's own sake.
pub(super) async fn wait_completed(engine: &Engine, queue: &str) -> Result<()> {
    use docket_core::TaskState as S;
    loop {
        let open = engine
            .task_list(docket_core::api::TaskListParams {
                queue: Some(queue.into()),
                states: vec![S::Scheduled, S::Available, S::Running, S::Retryable],
                limit: 1,
                ..Default::default()
            })
            .await?;
        if open.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

/// The operator's reads, `n` times each: what `--read-probe` prints.
pub(super) async fn read_probe(engine: &Engine, n: usize) -> Result<String> {
    let mut out = String::new();
    let t = Instant::now();
    let counted = docket_engine::maintenance::counts(engine, engine.clock.now()).await?;
    out += &format!(
        "kept counts: one step counted {counted} finished tasks in {:.1} ms\n",
        t.elapsed().as_secs_f64() * 1000.0
    );
    let (addr, shutdown) = start_server(engine, false).await?;
    let http = reqwest::Client::new();
    let mut line = |what: &str, mut v: Vec<f64>| {
        v.sort_by(|x, y| x.partial_cmp(y).expect("no NaN"));
        out += &format!(
            "{what:<28} p50 {:>8.2} ms  p99 {:>8.2} ms  max {:>8.2} ms  ({n} reads)\n",
            pct(&v, 50.0),
            pct(&v, 99.0),
            v.last().copied().unwrap_or(f64::NAN)
        );
    };
    let mut v = vec![];
    let mut queues = 0;
    for _ in 0..n {
        let t = Instant::now();
        queues = engine.queue_list().await?.len();
        v.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    line(&format!("engine queue counts ({queues} q)"), v);
    for path in ["/v1/queues", "/metrics", "/"] {
        let mut v = vec![];
        for _ in 0..n {
            let t = Instant::now();
            let r = http.get(format!("{addr}{path}")).send().await?;
            anyhow::ensure!(r.status().is_success(), "GET {path}: {}", r.status());
            r.bytes().await?;
            v.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        line(&format!("GET {path}"), v);
    }
    shutdown.cancel();
    Ok(out.trim_end().to_string())
}

/// After the clock stopped: `n` tasks of `queue` completed.
pub(super) async fn check_completed(engine: &Engine, queue: &str, n: usize) -> Result<()> {
    let done = engine.queue_get(queue).await?.counts[&docket_core::TaskState::Completed] as usize;
    anyhow::ensure!(done >= n, "{done} of {n} tasks of {queue} completed");
    Ok(())
}

/// Starts an in-process pool on `queue`; returns its stop token and handle.
pub(super) fn start_pool(
    engine: &Engine,
    queue: &str,
    c: usize,
    claim_batch: usize,
    fetchers: usize,
    handler: Noop,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let mut cfg = WorkerConfig::new(queue);
    cfg.concurrency = c;
    cfg.prefetch = claim_batch;
    cfg.fetchers = fetchers;
    cfg.complete_batch = claim_batch.max(1000);
    cfg.worker = "bench".into();
    let pool = WorkerPool::new(engine.clone(), cfg).register("noop", Arc::new(handler));
    let stop = CancellationToken::new();
    let h = tokio::spawn(pool.run(stop.clone()));
    (stop, h)
}

pub(super) async fn work_inproc(
    engine: &Engine,
    n: usize,
    c: usize,
    claim_batch: usize,
) -> Result<Duration> {
    work_queue(engine, "bench", n, c, claim_batch).await
}

/// Works `n` tasks of `queue` in-process; the time until all are completed.
pub(super) async fn work_queue(
    engine: &Engine,
    queue: &str,
    n: usize,
    c: usize,
    claim_batch: usize,
) -> Result<Duration> {
    let done = Arc::new(AtomicUsize::new(0));
    let all = Arc::new(tokio::sync::Notify::new());
    let handler = Noop {
        done: done.clone(),
        target: n,
        all_done: all.clone(),
        starts: None,
    };
    let t = Instant::now();
    let (stop, h) = start_pool(engine, queue, c, claim_batch, 2, handler);
    all.notified().await;
    wait_completed(engine, queue).await?;
    let el = t.elapsed();
    stop.cancel();
    h.await?;
    check_completed(engine, queue, n).await?;
    Ok(el)
}

pub(super) async fn start_server(
    engine: &Engine,
    auth: bool,
) -> Result<(String, CancellationToken)> {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = format!("http://{}", l.local_addr()?);
    let shutdown = CancellationToken::new();
    let mut state = docket_server::AppState::new(engine.clone(), shutdown.clone());
    if auth {
        state = state
            .with_auth(docket_server::auth::AuthMode::Required)
            .with_limits(docket_server::auth::Limits {
                rate_per_second: 0,
                burst: 0,
                long_polls: 0,
            });
    }
    tokio::spawn(docket_server::serve(l, state));
    Ok((addr, shutdown))
}

/// A client of the bench server: with `--auth`, holding a fresh `work` token.
pub(super) async fn bench_client(
    engine: &Engine,
    addr: &str,
    auth: bool,
) -> Result<docket_client::Client> {
    if !auth {
        return Ok(docket_client::Client::new(addr));
    }
    let (token, _) = engine
        .token_create(docket_engine::auth::NewToken {
            name: format!("bench-{}", uuid::Uuid::new_v4().simple()),
            scopes: vec![docket_core::auth::Scope::Work],
            ..Default::default()
        })
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(docket_client::Client::with_token(addr, Some(&token)))
}

/// Works `n` tasks over HTTP: a server per node, the `c` workers spread over them in turn.
pub(super) async fn work_http(
    nodes: &[Engine],
    n: usize,
    c: usize,
    claim_batch: usize,
    auth: bool,
) -> Result<Duration> {
    let engine = &nodes[0];
    let mut servers = vec![];
    for e in nodes {
        servers.push(start_server(e, auth).await?);
    }
    let done = Arc::new(AtomicUsize::new(0));
    // Signalled when the completions confirmed reach `n`: the clock stops there, as the
    // in-process pool's and the clients' workers' do. Each loop's last claim, carrying the last
    // completions into an empty queue, still waits out its long poll (200 ms) after that, which
    // is not work (on 2026-11-30 it moved no run measurably; it is left out all the same).
    let all = Arc::new(tokio::sync::Notify::new());
    let t = Instant::now();
    let mut hs = vec![];
    for w in 0..c {
        let addr = &servers[w % servers.len()].0;
        let client = bench_client(engine, addr, auth).await?;
        let done = done.clone();
        let all = all.clone();
        hs.push(tokio::spawn(async move {
            // As the clients' workers do: each claim reports what the last one took (one
            // round trip per batch) and asks for lean tasks.
            let mut ask = docket_core::api::ClaimRequest {
                worker: format!("http-{w}"),
                limit: Some(i64::try_from(claim_batch).unwrap_or(i64::MAX)),
                lease: Some(Duration::from_secs(30)),
                wait: Some(Duration::from_millis(200)),
                lean: true,
                ..Default::default()
            };
            loop {
                let r = client.claim_answer("bench", &ask).await?;
                let confirmed = r.completed.map_or(0, |c| c.len());
                let before = done.fetch_add(confirmed, Ordering::Relaxed);
                if before < n && before + confirmed >= n {
                    all.notify_one();
                }
                let tasks = r.lean.unwrap_or_default();
                if tasks.is_empty() && done.load(Ordering::Relaxed) >= n {
                    break;
                }
                ask.complete = Some(
                    tasks
                        .into_iter()
                        .map(|t| docket_core::api::CompleteRequest {
                            id: Some(t.id),
                            lease: t.lease.token,
                            ..Default::default()
                        })
                        .collect(),
                );
            }
            anyhow::Ok(())
        }));
    }
    let mut loops = tokio::spawn(async move {
        for h in hs {
            h.await??;
        }
        anyhow::Ok(())
    });
    // A loop that fails ends them all before `n` is reached: its error, not a wait forever.
    let ended = tokio::select! {
        _ = all.notified() => false,
        r = &mut loops => {
            r??;
            true
        }
    };
    wait_completed(engine, "bench").await?;
    let el = t.elapsed();
    if !ended {
        loops.await??;
    }
    for (_, shutdown) in servers {
        shutdown.cancel();
    }
    check_completed(engine, "bench", n).await?;
    Ok(el)
}

/// The `p`th percentile (0–100, nearest rank) of `sorted`; NaN for none.
pub(super) fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}
