//! `docket bench`'s command line.

use clap::{Args, Subcommand, ValueEnum};

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
