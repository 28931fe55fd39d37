//! `docket bench`: enqueue N no-op tasks, work them with C workers through the real
//! claim/complete path, then measure pickup latency at a steady enqueue rate.
//! `docket bench peer …` implements the contract of `shared/bench/peers` (see
//! bench/contender/bench.sh).

use anyhow::{bail, Context, Result};
use async_trait::async_trait;
use clap::{Args, Subcommand, ValueEnum};
use docket_core::api::Backend;
use docket_core::{NewTask, SystemClock, Task};
use docket_engine::worker::{Handler, Outcome, WorkerConfig, WorkerPool};
use docket_engine::{Claim, Database, DatabaseOptions, Engine, EngineConfig};
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The statements of `bench.sql`, by name.
static STATEMENTS: std::sync::LazyLock<std::collections::HashMap<&'static str, String>> =
    std::sync::LazyLock::new(|| {
        docket_core::sqlfile::statements(include_str!("bench.sql"))
            .expect("bench.sql parses")
            .into_iter()
            .collect()
    });

fn sql(name: &str) -> &'static str {
    STATEMENTS
        .get(name)
        .unwrap_or_else(|| panic!("no statement {name} in bench.sql"))
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub sub: Option<BenchSub>,
    /// Database: sqlite://FILE or postgres://…; default a fresh temporary SQLite file.
    /// On PostgreSQL a fresh schema is created and dropped afterwards.
    #[arg(long, env = "DOCKET_BENCH_DATABASE_URL")]
    pub database: Option<String>,
    /// Tasks to enqueue and work.
    #[arg(short = 'n', long, default_value_t = 20_000)]
    pub tasks: usize,
    /// Workers (concurrent handlers; HTTP: concurrent claim loops).
    #[arg(short = 'c', long, default_value_t = 10)]
    pub concurrency: usize,
    /// Work in-process (library) or through the HTTP API.
    #[arg(long, value_enum, default_value = "inproc")]
    pub mode: Mode,
    /// Tasks per enqueue statement.
    #[arg(long, default_value_t = 5000)]
    pub enqueue_batch: usize,
    /// Enqueue batches in flight at once.
    #[arg(long, default_value_t = 2)]
    pub enqueue_parallel: usize,
    /// Tasks per claim (in-process: the prefetch buffer; HTTP: per request, at most 10,000).
    #[arg(long, default_value_t = 1000)]
    pub claim_batch: usize,
    /// Latency phase: single enqueues per second.
    #[arg(long, default_value_t = 100)]
    pub latency_rate: u32,
    /// Latency phase: seconds (0 skips it).
    #[arg(long, default_value_t = 5)]
    pub latency_secs: u32,
    /// HTTP mode: serve with auth required (no rate limit) and give each worker a `work`
    /// token, so every request pays the token check.
    #[arg(long)]
    pub auth: bool,
    /// Write this run's numbers (JSON) to FILE, as a baseline for --compare.
    #[arg(long, value_name = "FILE")]
    pub save: Option<std::path::PathBuf>,
    /// Print this run's ratio to the baseline in FILE (from --save) and exit 1 when a number is
    /// --max-drop times worse (throughput that low, pickup p99 that high).
    #[arg(long, value_name = "FILE")]
    pub compare: Option<std::path::PathBuf>,
    /// How many times worse than the baseline fails --compare (noise here is ±20%).
    #[arg(long, default_value_t = 3.0)]
    pub max_drop: f64,
    /// HTTP mode: this many docket nodes on the database (each its own pool, engine and
    /// server, in this process), the workers spread over them. With several hosts in the URL
    /// (a Galera cluster's nodes) node i works through host i first.
    #[arg(long, default_value_t = 1)]
    pub nodes: usize,
    /// Before the measured run, put this many finished (completed) tasks in the table —
    /// enqueued to queues `history-K` and worked through the normal claim/complete path — to see
    /// what history costs the hot path.
    #[arg(long, default_value_t = 0)]
    pub preload_finished: usize,
    /// PostgreSQL: before the measured run, `VACUUM (ANALYZE)` the task tables and `CHECKPOINT`
    /// — the state a database that gathered its history over days is in, rather than the
    /// aftermath of a preload burst (autovacuum working through it, every page's first write
    /// after a checkpoint logged whole). MySQL/MariaDB: `ANALYZE TABLE` and a wait (up to 10
    /// min) for InnoDB's purge to work through the preload's undo log and for the buffer pool's
    /// dirty pages to be written out (below 1% of the pool).
    #[arg(long)]
    pub settle: bool,
    /// Before the measured run, watch these queues' task events (as a sink naming them does:
    /// the triggers are created): with another queue than the measured one (`bench`), what
    /// task events cost the queues that do not use them; with `bench`, what recording them
    /// costs (no sink drains them here).
    #[arg(long)]
    pub watch_queue: Vec<String>,
    /// Latency phase: also print where each pickup's time goes (enqueue return → claim start →
    /// claimed → dispatched → handler start), from marks the engine takes (p50/p99 per step).
    #[arg(long)]
    pub breakdown: bool,
    /// In-process, after the plain run: the same number of tasks as one workflow of this many
    /// parallel chains (each task waits for the one before it in its chain), created and worked
    /// the same way, and its cost per task against the plain run (0: no workflow run).
    #[arg(long, default_value_t = 0)]
    pub workflow_chains: usize,
    /// In-process, after the plain run: tenant A enqueues this many tasks, then tenant B 100,
    /// in one queue (each task's partition_key its tenant), worked with fair claims on and
    /// then off; prints B's pickup (p50/p99/max) each way (issue 26 item 4; 0: no fair run).
    #[arg(long, default_value_t = 0)]
    pub fair_tenants: usize,
    /// Before the measured run (after any preload and settle): how long the operator's reads
    /// take — the engine's queue counts, `GET /v1/queues`, `GET /metrics` and the dashboard's
    /// overview (`GET /`) through an in-process server — this many times each, sequentially
    /// (p50/p99/max), after one step of the kept counts (issue 27; 0: no probe).
    #[arg(long, default_value_t = 0)]
    pub read_probe: usize,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    Inproc,
    Http,
    /// A pg_task table (docket-sql's executor) in the PostgreSQL of --database.
    PgTask,
}

#[derive(Subcommand, Debug)]
pub enum BenchSub {
    /// The contract of shared/bench/peers (used by bench/contender/bench.sh).
    #[command(hide = true)]
    Peer {
        #[command(subcommand)]
        cmd: PeerCmd,
    },
    /// Steady churn on PostgreSQL: tasks enqueued and worked at a steady rate for a while,
    /// optionally with another session holding a snapshot open; every sample prints the task
    /// table's dead tuples and size and the claim time (p50/p99 of a probe claim every 100 ms).
    Churn {
        /// postgres://… (a fresh schema, dropped afterwards).
        #[arg(long, env = "DOCKET_BENCH_DATABASE_URL")]
        database: String,
        /// Tasks per second.
        #[arg(long, default_value_t = 800)]
        rate: u32,
        /// How long, in minutes.
        #[arg(long, default_value_t = 30)]
        minutes: u32,
        /// Seconds between samples.
        #[arg(long, default_value_t = 60)]
        sample: u64,
        /// Hold a REPEATABLE READ snapshot open for the whole run (what a long report or a
        /// forgotten transaction does), so VACUUM cannot remove dead tuples.
        #[arg(long)]
        hold_snapshot: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum PeerCmd {
    /// Create the schema in $DATABASE_URL.
    Setup,
    /// Enqueue N no-op tasks; prints RESULT seconds=…
    Enqueue { n: usize },
    /// Work N tasks with concurrency C; prints RESULT seconds=…. PROFILE: `default`/`strict`
    /// (in-process, claims of 1000), `small`/`small-strict` (claims of 100), `http` (C claim
    /// loops of 1000 through a server in this process, as `docket bench --mode http`).
    Work { n: usize, c: usize, profile: String },
    /// Idle worker + steady single enqueues; writes $LAT_OUT.
    Latency { rate: u32, secs: u32, c: usize },
}

struct Noop {
    done: Arc<AtomicUsize>,
    target: usize,
    all_done: Arc<tokio::sync::Notify>,
    starts: Option<Arc<Mutex<HashMap<i64, Instant>>>>,
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

fn noop_tasks(n: usize, queue: &str) -> Vec<NewTask> {
    (0..n)
        .map(|i| NewTask {
            queue: Some(queue.into()),
            ..NewTask::new("noop", json!({"i": i}))
        })
        .collect()
}

/// `n` tasks as one workflow of `chains` parallel chains on queue `bench-wf`: created, then
/// worked as the plain run was; prints both rates and the cost per task against `plain`.
async fn workflow_phase(
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
async fn fair_phase(engine: &Engine, a_tasks: usize, c: usize, claim_batch: usize) -> Result<()> {
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
type Fresh = (
    Database,
    DatabaseOptions,
    Option<tempfile::TempDir>,
    Option<String>,
);

async fn open_fresh(url: Option<&str>) -> Result<Fresh> {
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

fn engine_for(store: Database) -> Engine {
    let mut cfg = EngineConfig::new("bench", store.backend());
    if let Some(d) = std::env::var("DOCKET_BENCH_ROTATE_INTERVAL")
        .ok()
        .and_then(|v| docket_core::duration::parse(&v).ok())
    {
        cfg.rotate_interval = d;
    }
    Engine::new(store, Arc::new(SystemClock), cfg)
}

/// Enqueues `n` no-op tasks in batches of `batch`, `parallel` batches in flight (each batch is
/// one transaction). The specs are built before the clock starts.
async fn enqueue_all(
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
async fn wait_completed(engine: &Engine, queue: &str) -> Result<()> {
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
async fn read_probe(engine: &Engine, n: usize) -> Result<String> {
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
async fn check_completed(engine: &Engine, queue: &str, n: usize) -> Result<()> {
    let done = engine.queue_get(queue).await?.counts[&docket_core::TaskState::Completed] as usize;
    anyhow::ensure!(done >= n, "{done} of {n} tasks of {queue} completed");
    Ok(())
}

/// Starts an in-process pool on `queue`; returns its stop token and handle.
fn start_pool(
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

async fn work_inproc(engine: &Engine, n: usize, c: usize, claim_batch: usize) -> Result<Duration> {
    work_queue(engine, "bench", n, c, claim_batch).await
}

/// Works `n` tasks of `queue` in-process; the time until all are completed.
async fn work_queue(
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

async fn start_server(engine: &Engine, auth: bool) -> Result<(String, CancellationToken)> {
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
async fn bench_client(engine: &Engine, addr: &str, auth: bool) -> Result<docket_client::Client> {
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
async fn work_http(
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
    let t = Instant::now();
    let mut hs = vec![];
    for w in 0..c {
        let addr = &servers[w % servers.len()].0;
        let client = bench_client(engine, addr, auth).await?;
        let done = done.clone();
        hs.push(tokio::spawn(async move {
            while done.load(Ordering::Relaxed) < n {
                let tasks = client
                    .claim(
                        "bench",
                        &format!("http-{w}"),
                        &[],
                        claim_batch,
                        Duration::from_secs(30),
                        Duration::from_millis(200),
                    )
                    .await?;
                if tasks.is_empty() {
                    continue;
                }
                let items: Vec<_> = tasks
                    .iter()
                    .map(|t| {
                        (
                            t.id,
                            t.lease.clone().expect("lease").token,
                            serde_json::Value::Null,
                        )
                    })
                    .collect();
                client.complete_many(&items).await?;
                done.fetch_add(items.len(), Ordering::Relaxed);
            }
            anyhow::Ok(())
        }));
    }
    for h in hs {
        h.await??;
    }
    wait_completed(engine, "bench").await?;
    let el = t.elapsed();
    for (_, shutdown) in servers {
        shutdown.cancel();
    }
    check_completed(engine, "bench", n).await?;
    Ok(el)
}

/// Latencies in ms: (from enqueue return, from enqueue call start) per task, in enqueue order.
/// One task of the latency phase: its id, when its enqueue was called and returned, and when
/// its handler started (None: it never ran).
struct Pickup {
    id: i64,
    call: Instant,
    ret: Instant,
    start: Option<Instant>,
}

impl Pickup {
    /// (from enqueue return, from enqueue call start) in ms; NaN when it never ran.
    fn ms(&self) -> (f64, f64) {
        match self.start {
            Some(st) => (
                st.saturating_duration_since(self.ret).as_secs_f64() * 1000.0,
                st.saturating_duration_since(self.call).as_secs_f64() * 1000.0,
            ),
            None => (f64::NAN, f64::NAN),
        }
    }
}

/// The latency phase: `rate` single enqueues per second for `secs` through `enqueue`, worked by
/// `c` idle workers (in-process or over HTTP) of `worker` — another node when they differ.
async fn latency(
    enqueue: &Engine,
    worker: &Engine,
    rate: u32,
    secs: u32,
    c: usize,
    mode: Mode,
    auth: bool,
) -> Result<Vec<Pickup>> {
    let engine = worker;
    let total = (rate * secs) as usize;
    let starts = Arc::new(Mutex::new(HashMap::new()));
    let done = Arc::new(AtomicUsize::new(0));
    let all = Arc::new(tokio::sync::Notify::new());
    let mut stoppers = vec![];
    match mode {
        Mode::Inproc => {
            let h = Noop {
                done: done.clone(),
                target: total,
                all_done: all.clone(),
                starts: Some(starts.clone()),
            };
            let (stop, jh) = start_pool(engine, "latency", c, 100, 1, h);
            stoppers.push((stop, jh));
        }
        Mode::Http | Mode::PgTask => {
            let (addr, shutdown) = start_server(engine, auth).await?;
            for w in 0..c {
                let client = bench_client(engine, &addr, auth).await?;
                let (starts, done, all, stop) =
                    (starts.clone(), done.clone(), all.clone(), shutdown.clone());
                let jh = tokio::spawn(async move {
                    while !stop.is_cancelled() {
                        let Ok(tasks) = client
                            .claim(
                                "latency",
                                &format!("lat-{w}"),
                                &[],
                                1,
                                Duration::from_secs(30),
                                Duration::from_secs(2),
                            )
                            .await
                        else {
                            continue;
                        };
                        for t in tasks {
                            starts.lock().expect("lock").insert(t.id, Instant::now());
                            let lease = t.lease.clone().expect("lease").token;
                            let _ = client.complete(t.id, &lease, serde_json::Value::Null).await;
                            if done.fetch_add(1, Ordering::Relaxed) + 1 >= total {
                                all.notify_one();
                            }
                        }
                    }
                });
                stoppers.push((shutdown.clone(), jh));
            }
        }
    }
    // Let the workers reach their idle wait.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let every = Duration::from_secs_f64(1.0 / rate as f64);
    let t0 = Instant::now();
    let mut sent = Vec::with_capacity(total);
    for i in 0..total {
        tokio::time::sleep_until((t0 + every * i as u32).into()).await;
        let call = Instant::now();
        let t = enqueue
            .enqueue_many(vec![NewTask {
                queue: Some("latency".into()),
                ..NewTask::new("noop", json!({"i": i}))
            }])
            .await?;
        sent.push((t[0].id, call, Instant::now()));
    }
    let _ = tokio::time::timeout(Duration::from_secs(30), all.notified()).await;
    for (s, h) in stoppers {
        s.cancel();
        let _ = h.await;
    }
    let starts = starts.lock().expect("lock");
    Ok(sent
        .into_iter()
        .map(|(id, call, ret)| Pickup {
            id,
            call,
            ret,
            start: starts.get(&id).copied(),
        })
        .collect())
}

/// Prints p50/p99 of each step of the pickups in `lat`, from the engine's `marks`: enqueue
/// return → claim start (negative when the claim started first, woken by the insert before
/// the enqueue call returned), the claim statement, claimed → dispatched (in-process: the
/// worker's buffer and slot) and dispatched (HTTP: claimed) → handler start.
fn print_breakdown(lat: &[Pickup], marks: &[docket_engine::probe::Mark]) {
    use docket_engine::probe::Step;
    let ms = |a: Instant, b: Instant| -> f64 {
        if b >= a {
            (b - a).as_secs_f64() * 1000.0
        } else {
            -((a - b).as_secs_f64() * 1000.0)
        }
    };
    let find = |step: Step, id: i64| marks.iter().find(|m| m.step == step && m.id == id);
    let mut steps: Vec<(&str, Vec<f64>)> = [
        "enqueue return -> wake",
        "enqueue return -> claim start",
        "claim statement",
        "claimed -> dispatched",
        "dispatched -> handler",
        "total",
    ]
    .into_iter()
    .map(|n| (n, vec![]))
    .collect();
    for p in lat {
        let (Some(start), Some(claimed)) = (p.start, find(Step::Claimed, p.id)) else {
            continue;
        };
        // The claim that returned it: the last claim started before it came back.
        let Some(cs) = marks
            .iter()
            .rfind(|m| m.step == Step::ClaimStart && m.at <= claimed.at)
        else {
            continue;
        };
        // The first wake-up issued after the enqueue was called (insert or notification).
        if let Some(w) = marks
            .iter()
            .find(|m| m.step == Step::Wake && m.at >= p.call)
        {
            steps[0].1.push(ms(p.ret, w.at));
        }
        steps[1].1.push(ms(p.ret, cs.at));
        steps[2].1.push(ms(cs.at, claimed.at));
        let dispatched = find(Step::Dispatched, p.id).map_or(claimed.at, |d| d.at);
        steps[3].1.push(ms(claimed.at, dispatched));
        steps[4].1.push(ms(dispatched, start));
        steps[5].1.push(ms(p.ret, start));
    }
    println!("pickup breakdown (ms, p50 / p99):");
    for (name, mut v) in steps {
        v.sort_by(|x, y| x.partial_cmp(y).expect("no NaN"));
        println!(
            "  {name:<32} {:>7.3} / {:>7.3}  ({} tasks)",
            pct(&v, 50.0),
            pct(&v, 99.0),
            v.len()
        );
    }
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

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

/// The peer harness's store; `strict`: every commit waits for the WAL flush (as `docket serve
/// --strict-commit`), else claims and completions commit without waiting (the default).
async fn peer_store(strict: bool) -> Result<Database> {
    let url = std::env::var("DATABASE_URL").context("DATABASE_URL is not set")?;
    Ok(Database::open(&DatabaseOptions {
        url,
        schema: None,
        max_connections: Some(20),
        strict_commit: strict,
    })
    .await?)
}

async fn peer(p: PeerCmd) -> Result<()> {
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

/// `docket bench --mode pg-task`: N `SELECT 1` rows in a fresh pg_task table, run C at a time
/// (`max` C-1), first with a fresh session per task (pg_task's default), then with `count` N so
/// each session runs its group's tasks in turn; then the pickup latency (start - plan) of single
/// inserts at `latency_rate`.
async fn pg_task_bench(a: &BenchArgs) -> Result<()> {
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

/// One run's numbers, as `--save` writes them and `--compare` reads them.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Numbers {
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
fn compare(now: &Numbers, file: &std::path::Path, max_drop: f64) -> Result<()> {
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

/// `docket bench churn`: see [`BenchSub::Churn`].
async fn churn(url: &str, rate: u32, minutes: u32, sample: u64, hold: bool) -> Result<()> {
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
