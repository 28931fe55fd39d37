//! Command-line definitions (clap derive).

use crate::{parse_duration, parse_label};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::time::Duration;

/// docket: durable tasks on PostgreSQL, SQLite or MySQL/MariaDB.
#[derive(Parser, Debug)]
#[command(name = "docket", version, about, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Args, Debug, Clone)]
pub struct DbArgs {
    /// Database URL: sqlite://FILE (created if missing), postgres://user@host/db or
    /// mysql://user:pass@host:3306/db (MySQL 8.0+, MariaDB 10.6+; also mariadb://)
    /// [default: sqlite://docket.db].
    #[arg(long, env = "DOCKET_DATABASE_URL", global = true)]
    pub database: Option<String>,
    /// PostgreSQL schema for docket's tables (created if missing). MySQL: name the database in
    /// the URL instead.
    #[arg(long, env = "DOCKET_SCHEMA", global = true)]
    pub schema: Option<String>,
    /// PostgreSQL: make claims and completions wait for the WAL flush too (slower; by default
    /// only enqueues do — a crash then re-runs a few tasks, never loses one).
    #[arg(long, env = "DOCKET_STRICT_COMMIT", global = true)]
    pub strict_commit: bool,
}

#[derive(Args, Debug, Clone)]
pub struct ServerArgs {
    /// URL of a running `docket serve`.
    #[arg(
        long,
        env = "DOCKET_SERVER",
        default_value = "http://127.0.0.1:7070",
        global = true
    )]
    pub server: String,
    /// API token sent as `Authorization: Bearer …` (see `docket token create`).
    #[arg(long, env = "DOCKET_TOKEN", global = true, hide_env_values = true)]
    pub token: Option<String>,
    /// PEM file of CA certificates to trust for an `https://` server (besides the system's).
    #[arg(long, env = "DOCKET_CA_FILE", global = true)]
    pub ca_file: Option<std::path::PathBuf>,
}

impl ServerArgs {
    /// A client of the server with the token and CA file.
    ///
    /// # Errors
    /// A CA file that does not load.
    pub fn client(&self) -> anyhow::Result<docket_client::Client> {
        Ok(docket_client::Client::with_options(
            self.server.clone(),
            &docket_client::ClientOptions {
                token: self.token.clone(),
                ca_file: self.ca_file.clone(),
            },
        )?)
    }
}

#[derive(ValueEnum, Debug, Clone, Copy)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the HTTP API, scheduler and maintenance (migrates first).
    Serve(ServeArgs),
    /// Apply the embedded migrations and exit.
    Migrate {
        #[command(flatten)]
        db: DbArgs,
    },
    /// Create, list and revoke API tokens: through a server (--server/DOCKET_SERVER, with an
    /// admin token), or in a database directly (--database/DOCKET_DATABASE_URL: works before any
    /// token exists). One of the two must be given.
    Token {
        #[command(flatten)]
        db: DbArgs,
        /// URL of a running `docket serve` to manage tokens through (`/v1/tokens`).
        #[arg(long, env = "DOCKET_SERVER", global = true)]
        server: Option<String>,
        /// API token (needs the `admin` scope) sent to --server.
        #[arg(long, env = "DOCKET_TOKEN", global = true, hide_env_values = true)]
        token: Option<String>,
        /// PEM file of CA certificates to trust for an `https://` server (besides the system's).
        #[arg(long, env = "DOCKET_CA_FILE", global = true)]
        ca_file: Option<std::path::PathBuf>,
        #[command(subcommand)]
        cmd: TokenCmd,
    },
    /// Enqueue, list, show, cancel and retry tasks.
    Task {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        cmd: TaskCmd,
    },
    /// Show and change queues.
    Queue {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        cmd: QueueCmd,
    },
    /// Schedules: tasks enqueued on a repeat interval or a cron expression.
    Schedule {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        cmd: ScheduleCmd,
    },
    /// Batches: tasks grouped under one id, with callback tasks enqueued once when every one
    /// finished.
    Batch {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        cmd: BatchCmd,
    },
    /// Workflows: tasks with dependencies (a DAG); a task runs once every dependency completed.
    Workflow {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        cmd: WorkflowCmd,
    },
    /// Durable functions' runs: start one, read its state and journal, wait for its result,
    /// send it an event, cancel or retry it.
    WorkflowRun {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        cmd: WorkflowRunCmd,
    },
    /// Rate limits: named limits (window, bucket, concurrent) that tasks name in rate_limit.
    RateLimit {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        cmd: RateLimitCmd,
    },
    /// The cluster on one screen: queues, nodes, schedules, last hour's throughput.
    Status {
        #[command(flatten)]
        server: ServerArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print shell completions (bash, zsh, fish, elvish, powershell) to stdout.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) to stdout: `docket man > docket.1`.
    Man,
    /// List the nodes of the cluster; drain one or resume it.
    Node {
        #[command(flatten)]
        server: ServerArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(subcommand)]
        cmd: Option<NodeCmd>,
    },
    /// Configure namespaces of durable processes.
    Namespace {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        cmd: NamespaceCmd,
    },
    /// Durable processes: init, call, repair, get.
    Process {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        cmd: ProcessCmd,
    },
    /// Work a queue by running COMMAND once per task (payload on stdin); `--config FILE` runs
    /// several named workers under a supervisor; `docket worker list` shows every worker.
    Worker(WorkerArgs),
    /// Measure enqueue/work throughput and pickup latency.
    Bench(crate::bench::BenchArgs),
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub db: DbArgs,
    /// Config file (TOML): `database`, `schema`, `listen`, `node`, `[namespaces.NAME]`,
    /// `[[pg_task]]` and `[sql]`
    /// tables; flags and DOCKET_* variables override it.
    #[arg(long, env = "DOCKET_CONFIG")]
    pub config: Option<std::path::PathBuf>,
    /// Address to listen on [default: 127.0.0.1:7070].
    #[arg(long, env = "DOCKET_LISTEN")]
    pub listen: Option<String>,
    /// This node's name (default: hostname-pid).
    #[arg(long, env = "DOCKET_NODE")]
    pub node: Option<String>,
    /// How long in-flight requests may finish after SIGINT/SIGTERM [default: 30s].
    #[arg(long, value_parser = parse_duration)]
    pub grace: Option<Duration>,
    /// Longest wait between database looks when nothing wakes the node.
    #[arg(long, value_parser = parse_duration)]
    pub poll_interval: Option<Duration>,
    /// SQLite, MySQL/MariaDB: where this node receives the other nodes' wake-ups (UDP
    /// HOST:PORT; port 0 takes a free one), or `off` (other nodes' tasks are found by polling)
    /// [127.0.0.1:0]. Nodes on several machines: an address the others can reach.
    #[arg(long, env = "DOCKET_PEER_WAKE")]
    pub peer_wake: Option<String>,
    /// The address the other nodes send this node's wake-ups to (HOST:PORT), when it is not
    /// the bound one (a wildcard bind such as 0.0.0.0:7071, NAT).
    #[arg(long, env = "DOCKET_PEER_WAKE_ADVERTISE")]
    pub peer_wake_advertise: Option<String>,
    /// How often expired leases are rescued.
    #[arg(long, value_parser = parse_duration)]
    pub rescue_interval: Option<Duration>,
    /// PostgreSQL: the shortest time between turns of the ring of task slots (a slot filling
    /// slower than 8 MiB per turn waits a minute); dead tuples of finished tasks live about four
    /// turns, even while a snapshot is held open. MySQL/MariaDB: how often finished tasks move
    /// to docket_tasks_done [1s].
    #[arg(long, value_parser = parse_duration)]
    pub rotate_interval: Option<Duration>,
    /// Delivered process notifications are deleted after this [7d].
    #[arg(long, value_parser = parse_duration)]
    pub retention_notifications: Option<Duration>,
    /// Audit entries are deleted after this [90d].
    #[arg(long, value_parser = parse_duration)]
    pub retention_audit: Option<Duration>,
    /// Nodes stopped or lost for this long leave the node list [7d].
    #[arg(long, value_parser = parse_duration)]
    pub retention_nodes: Option<Duration>,
    /// Log format.
    #[arg(long, value_enum, default_value = "text", env = "DOCKET_LOG_FORMAT")]
    pub log_format: LogFormat,
    /// Export spans (task attempts, ...) as OpenTelemetry traces to this OTLP/HTTP collector
    /// (e.g. http://127.0.0.1:4318).
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
    /// Serve a pg_task table in this database (repeatable):
    /// `postgres://user@host/db?schema=public&table=task&sleep=1000&reset=1h&run=10`.
    #[arg(long = "pg-task", value_name = "URL")]
    pub pg_task: Vec<String>,
    /// A target `sql` tasks may name (repeatable): `NAME=CONNECTION-STRING`.
    #[arg(long = "sql-target", value_name = "NAME=URL")]
    pub sql_target: Vec<String>,
    /// Let `sql` tasks give a raw connection string instead of a target name.
    #[arg(long)]
    pub sql_allow_raw: bool,
    /// Whether requests need an API token: `auto` (required unless --listen is a loopback
    /// address), `required` or `off` [default: auto].
    #[arg(long, value_enum, env = "DOCKET_AUTH")]
    pub auth: Option<AuthArg>,
    /// Serve a non-loopback address with --auth off: anyone who reaches the port can read and
    /// change every task.
    #[arg(long)]
    pub allow_unauthenticated_network_access: bool,
    /// A host name requests may be addressed to (repeatable), besides 127.0.0.1, localhost and
    /// ::1 on a loopback listener; on another listener, given names are the only ones accepted.
    #[arg(long = "allowed-host", value_name = "NAME")]
    pub allowed_hosts: Vec<String>,
    /// An origin (`https://app.example`) whose pages may call the API from a browser
    /// (repeatable); without one docket sends no CORS headers and refuses cross-site writes.
    #[arg(long = "cors-origin", value_name = "ORIGIN", value_parser = parse_origin)]
    pub cors_origins: Vec<String>,
    /// Requests per second one token may make on average; past it, 429 `rate_limited` with
    /// Retry-After (0: no limit; applies under --auth required) [default: 1000].
    #[arg(long, env = "DOCKET_RATE_LIMIT")]
    pub rate_limit: Option<u32>,
    /// Requests one token may make at once above --rate-limit [default: 2000].
    #[arg(long, env = "DOCKET_RATE_BURST")]
    pub rate_burst: Option<u32>,
    /// Long-polls (claims with wait, event streams) one token may hold open at once
    /// (0: no limit; applies under --auth required) [default: 64].
    #[arg(long, env = "DOCKET_MAX_LONG_POLLS")]
    pub max_long_polls: Option<usize>,
    /// A host namespaces' processor and webhook URLs may name (repeatable; `*.example.com`
    /// for every name under it). Without one, any host.
    #[arg(long = "outbound-host", value_name = "HOST")]
    pub outbound_hosts: Vec<String>,
    /// Also serve another system's HTTP API: `asyncflow` mounts asyncflow's routes under
    /// `/api` (docs: compat/asyncflow.md). Off by default.
    #[arg(long, value_name = "SYSTEM", value_parser = ["asyncflow"])]
    pub compat: Option<String>,
    /// Serve HTTPS with this PEM certificate chain (with --tls-key); SIGHUP reloads both.
    #[arg(long, env = "DOCKET_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, env = "DOCKET_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthArg {
    Auto,
    Required,
    Off,
}

#[derive(Subcommand, Debug)]
pub enum NodeCmd {
    /// Drain a node (node-daemons' move tasks to another node): it claims nothing, its running
    /// tasks finish, its waiting tasks pinned to it move to --to (or to any node).
    Drain {
        name: String,
        /// The node that gets its pinned waiting tasks [any node].
        #[arg(long)]
        to: Option<String>,
    },
    /// End a node's drain: it claims again.
    Resume { name: String },
}

#[derive(Subcommand, Debug)]
pub enum TokenCmd {
    /// Create a token and print it (the only time it is shown; only its SHA-256 is stored).
    Create {
        /// Its name (recorded in the audit log; unique among live tokens).
        name: String,
        /// A scope (repeatable): admin, read, enqueue, work, process, sql.
        #[arg(long = "scope", required = true)]
        scopes: Vec<String>,
        /// With `work`: only this queue (repeatable) [every queue].
        #[arg(long = "queue")]
        queues: Vec<String>,
        /// Stops working after this long (e.g. 30d) [never].
        #[arg(long, value_parser = parse_duration)]
        expires_in: Option<Duration>,
    },
    /// List tokens (never the tokens themselves).
    List,
    /// Revoke a token: it stops working at once on every node.
    Revoke {
        /// Its name.
        name: String,
    },
}

#[derive(Args, Debug)]
pub struct TaskAddArgs {
    /// Task kind (handler name).
    #[arg(long)]
    pub kind: Option<String>,
    /// A `sql` task running this SQL (kind `sql`, queue `sql`); needs --target.
    #[arg(long, conflicts_with_all = ["kind", "payload"])]
    pub sql: Option<String>,
    /// Target of a --sql task: a name configured on the server, or a connection string
    /// where the server allows raw ones.
    #[arg(long, requires = "sql")]
    pub target: Option<String>,
    /// Payload JSON.
    #[arg(long)]
    pub payload: Option<String>,
    /// Queue (default "default").
    #[arg(long)]
    pub queue: Option<String>,
    /// Priority (higher first).
    #[arg(long, allow_hyphen_values = true)]
    pub priority: Option<i32>,
    /// Start at (RFC 3339).
    #[arg(long)]
    pub run_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Start after (e.g. 5m).
    #[arg(long, value_parser = parse_duration)]
    pub run_in: Option<Duration>,
    /// Not started by then (RFC 3339): discarded (node-daemons' finish_at).
    #[arg(long, conflicts_with = "expires_in")]
    pub expires_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Not started within this long of the enqueue (e.g. 1h): discarded.
    #[arg(long, value_parser = parse_duration)]
    pub expires_in: Option<Duration>,
    /// Attempts allowed.
    #[arg(long)]
    pub max_attempts: Option<i32>,
    /// Attempt timeout.
    #[arg(long, value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// Backoff as JSON: `{"kind": "linear", "step": "30s", "max": "10m"}` or
    /// `{"initial": "1s", "coefficient": 2, "max": "1h", "jitter": 0.1}`.
    #[arg(long)]
    pub backoff: Option<String>,
    /// Idempotency key.
    #[arg(long)]
    pub unique_key: Option<String>,
    /// A tag (repeatable, up to 20): `--tag customer:42 --tag plan:pro`.
    #[arg(long = "tag")]
    pub tags: Vec<String>,
    /// A label a worker must have to claim the task, NAME=VALUE (repeatable): `--requires
    /// gpu=a100`.
    #[arg(long = "requires", value_parser = parse_label)]
    pub requires: Vec<(String, String)>,
    /// A label the task prefers, NAME=VALUE (repeatable): for --prefer-for after it is due
    /// only a worker with these labels claims it, then any worker.
    #[arg(long = "prefer", value_parser = parse_label, requires = "prefer_for")]
    pub prefer: Vec<(String, String)>,
    /// How long the preference holds (e.g. 30s).
    #[arg(long, value_parser = parse_duration, requires = "prefer")]
    pub prefer_for: Option<Duration>,
    /// Debounce key: while a task with this key waits, this enqueue replaces it and moves its
    /// start to now + --debounce-period (never past its first enqueue + --debounce-max-wait).
    #[arg(long, requires = "debounce_period", conflicts_with_all = ["unique_key", "run_at", "run_in"])]
    pub debounce_key: Option<String>,
    /// Debounce quiet time (e.g. 5s): the task starts this long after the last enqueue.
    #[arg(long, value_parser = parse_duration, requires = "debounce_key")]
    pub debounce_period: Option<Duration>,
    /// Longest a debounced task waits after the enqueue that created it (e.g. 1m).
    #[arg(long, value_parser = parse_duration, requires = "debounce_key")]
    pub debounce_max_wait: Option<Duration>,
    /// Concurrency key.
    #[arg(long)]
    pub concurrency_key: Option<String>,
    /// Concurrency limit for the key.
    #[arg(long)]
    pub concurrency_limit: Option<i32>,
    /// Rate limit key: a limit's name (`docket rate-limit set`), or NAME:PARTITION.
    #[arg(long = "rate-limit-key")]
    pub rate_limit: Option<String>,
    /// The partition (tenant) the task belongs to: fair queues take partitions in turn.
    #[arg(long)]
    pub partition_key: Option<String>,
    /// Node affinity.
    #[arg(long)]
    pub node: Option<String>,
    /// The user the task is for (`docket task list --user-id U` lists them).
    #[arg(long)]
    pub user_id: Option<String>,
    /// The stage the task starts at (multi-stage tasks: a worker completing it names the next).
    #[arg(long)]
    pub stage: Option<String>,
    /// Enqueue one JSON task spec per line from FILE ("-" for stdin).
    #[arg(long)]
    pub file: Option<String>,
    /// Specs per request with --file.
    #[arg(long, default_value_t = 1000)]
    pub batch: usize,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Subcommand, Debug)]
pub enum TaskCmd {
    /// Enqueue a task (or many with --file).
    Add(Box<TaskAddArgs>),
    /// List tasks.
    List {
        #[arg(long)]
        queue: Option<String>,
        #[arg(long)]
        state: Option<String>,
        #[arg(long)]
        kind: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: i64,
        #[arg(long)]
        after: Option<i64>,
        /// Newest first.
        #[arg(long)]
        desc: bool,
        /// Only tasks whose payload or errors contain this text.
        #[arg(long)]
        text: Option<String>,
        /// Only this user's tasks (several states: `--state running,retryable`).
        #[arg(long)]
        user_id: Option<String>,
        /// Only tasks with this trace id (`--text`, `--trace-id` and `--worker` read at most
        /// 100,000 ids per page; `more: --after N` goes on).
        #[arg(long)]
        trace_id: Option<String>,
        /// Only tasks with this unique key.
        #[arg(long)]
        unique_key: Option<String>,
        /// Only tasks with this tag (indexed).
        #[arg(long)]
        tag: Option<String>,
        /// Only tasks whose last attempt ran on this worker.
        #[arg(long)]
        worker: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Change a task that waits (PATCH /v1/tasks/{id}): priority, start, payload, node,
    /// queue, attempts, stage. Prints the task after.
    Set {
        id: i64,
        /// New priority.
        #[arg(long, allow_hyphen_values = true)]
        priority: Option<i32>,
        /// New start (RFC 3339).
        #[arg(long, conflicts_with = "run_in")]
        run_at: Option<chrono::DateTime<chrono::Utc>>,
        /// New start after this delay from now (e.g. 5m).
        #[arg(long, value_parser = parse_duration)]
        run_in: Option<Duration>,
        /// New payload JSON.
        #[arg(long)]
        payload: Option<String>,
        /// Pin to this node.
        #[arg(long, conflicts_with = "any_node")]
        node: Option<String>,
        /// Let any node run it (clears the pin).
        #[arg(long)]
        any_node: bool,
        /// Move to this queue.
        #[arg(long)]
        queue: Option<String>,
        /// New attempt budget.
        #[arg(long)]
        max_attempts: Option<i32>,
        /// Move to this stage.
        #[arg(long)]
        stage: Option<String>,
        /// Only if the task is still at this version (its ETag, from `GET /v1/tasks/{id}`).
        #[arg(long)]
        if_version: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Show every field of a task.
    Show {
        id: i64,
        #[arg(long)]
        json: bool,
    },
    /// Cancel a task.
    /// Cancel a task, or every task matching a filter (`--queue/--kind/--state/--text`).
    Cancel {
        id: Option<i64>,
        #[command(flatten)]
        filter: BulkFilter,
        #[arg(long)]
        json: bool,
    },
    /// Make a finished task available again, or every task matching a filter.
    Retry {
        id: Option<i64>,
        #[command(flatten)]
        filter: BulkFilter,
        #[arg(long)]
        json: bool,
    },
    /// Cancel, retry, run now or delete every task a filter matches, on the server in the
    /// background (`POST /v1/tasks/bulk`, an admin token): counts them, asks (unless --yes),
    /// then follows the progress. Ctrl-C stops the following, not the bulk action (cancel it
    /// with `docket task cancel ID`).
    Bulk {
        /// cancel, retry, run-now or delete.
        action: String,
        #[command(flatten)]
        filter: ServerBulkFilter,
        /// Only count the matching tasks.
        #[arg(long)]
        dry_run: bool,
        /// Do not ask for confirmation (needed without a terminal).
        #[arg(long)]
        yes: bool,
        /// Print the bulk action's id and return without following it.
        #[arg(long)]
        no_wait: bool,
        #[arg(long)]
        json: bool,
    },
    /// Follow a task until it finishes: prints each change; exits 0 when it completed, 1 when
    /// it was discarded or cancelled.
    Watch {
        id: i64,
        #[arg(long)]
        json: bool,
    },
}

/// Which tasks `docket task bulk` takes: the filters an index serves.
#[derive(Args, Debug, Default)]
pub struct ServerBulkFilter {
    /// Only this queue.
    #[arg(long)]
    pub queue: Option<String>,
    /// Only this kind.
    #[arg(long)]
    pub kind: Option<String>,
    /// Only these states (`discarded,cancelled`); default: every state the action changes.
    #[arg(long)]
    pub state: Option<String>,
    /// Only this user's tasks.
    #[arg(long)]
    pub user_id: Option<String>,
    /// Only tasks with this unique key.
    #[arg(long)]
    pub unique_key: Option<String>,
    /// Only tasks with this tag.
    #[arg(long)]
    pub tag: Option<String>,
}

/// Which tasks a bulk cancel/retry takes (at least one filter). Without `--text` the server
/// does it (`docket task bulk … --yes`); with it the CLI walks the matches itself, one request
/// per task (Ctrl-C stops after the current task, nothing half-done).
#[derive(Args, Debug, Default)]
pub struct BulkFilter {
    /// Only this queue.
    #[arg(long)]
    pub queue: Option<String>,
    /// Only this kind.
    #[arg(long)]
    pub kind: Option<String>,
    /// Only this state.
    #[arg(long)]
    pub state: Option<String>,
    /// Only tasks whose payload or errors contain this text.
    #[arg(long)]
    pub text: Option<String>,
}

impl BulkFilter {
    /// Whether any filter is set.
    pub fn any(&self) -> bool {
        self.queue.is_some() || self.kind.is_some() || self.state.is_some() || self.text.is_some()
    }
}

#[derive(Args, Debug)]
pub struct QueueSetArgs {
    pub queue: String,
    /// Cluster-wide concurrency limit (0 = none).
    #[arg(long)]
    pub concurrency_limit: Option<i32>,
    /// Fair claims: the partitions (tasks' partition_key) take turns (true/false).
    #[arg(long)]
    pub fair: Option<bool>,
    /// At most this many tasks of one partition run at once (0 = none).
    #[arg(long)]
    pub partition_limit: Option<i32>,
    /// A partition's weight in fair claims, PARTITION=WEIGHT (repeatable; 1..=100).
    #[arg(long, value_name = "PARTITION=WEIGHT")]
    pub partition_weight: Vec<String>,
    /// Rate limit key of tasks enqueued without one ("" = none).
    #[arg(long = "rate-limit-key")]
    pub rate_limit: Option<String>,
    /// Dead-letter queue: a task discarded after its last attempt is also enqueued there, with
    /// `dead_letter_of` naming it ("" to clear).
    #[arg(long)]
    pub dead_letter: Option<String>,
    /// Default max attempts (0 = server default; asyncflow max_retry_num).
    #[arg(long, visible_alias = "max-retry-num")]
    pub max_attempts: Option<i32>,
    /// Default attempt timeout (asyncflow max_processing_time).
    #[arg(long, value_parser = parse_duration, visible_alias = "max-processing-time")]
    pub timeout: Option<Duration>,
    /// Most tasks one claim may take (0 = no cap; asyncflow schedule_limit).
    #[arg(long)]
    pub schedule_limit: Option<i32>,
    /// How often idle claims of the queue poll the database (0s = the server's
    /// --poll-interval; asyncflow schedule_interval).
    #[arg(long, value_parser = parse_duration)]
    pub schedule_interval: Option<Duration>,
    /// Keep completed tasks this long.
    #[arg(long, value_parser = parse_duration)]
    pub retention_completed: Option<Duration>,
    /// Keep discarded/cancelled tasks this long.
    #[arg(long, value_parser = parse_duration)]
    pub retention_failed: Option<Duration>,
    /// Default backoff: `exponential` or `linear` (node-daemons' delayRatio: attempt × initial).
    #[arg(long, value_parser = ["exponential", "linear"])]
    pub backoff_kind: Option<String>,
    /// Default backoff: first delay (linear: the step; asyncflow retry_interval).
    #[arg(long, value_parser = parse_duration, visible_alias = "retry-interval")]
    pub backoff_initial: Option<Duration>,
    /// Default backoff: cap (asyncflow max_retry_interval).
    #[arg(long, value_parser = parse_duration, visible_alias = "max-retry-interval")]
    pub backoff_max: Option<Duration>,
    /// Default backoff: coefficient.
    #[arg(long)]
    pub backoff_coefficient: Option<f64>,
    /// Default backoff: jitter (0..1).
    #[arg(long)]
    pub backoff_jitter: Option<f64>,
}

#[derive(Subcommand, Debug)]
pub enum QueueCmd {
    /// Every queue with counts by state.
    List {
        #[arg(long)]
        json: bool,
    },
    /// One queue's settings and counts.
    Show {
        queue: String,
        #[arg(long)]
        json: bool,
    },
    /// Change a queue's settings (others are kept).
    Set(Box<QueueSetArgs>),
    /// Pause a queue: nothing of it is claimed.
    Pause { queue: String },
    /// Resume a paused queue.
    Resume { queue: String },
}

#[derive(Subcommand, Debug)]
pub enum ScheduleCmd {
    /// Create (or replace) a schedule: `--every 5m` or `--cron '0 3 * * *'`, and the task
    /// as for `task add` (`--kind`/`--payload`, or `--sql`/`--target`).
    Add(Box<ScheduleAddArgs>),
    /// Every schedule.
    List {
        #[arg(long)]
        json: bool,
    },
    /// One schedule.
    Show {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Pause: no occurrence fires.
    Pause { name: String },
    /// Resume from the next occurrence after now.
    Resume { name: String },
    /// Remove a schedule (its tasks stay).
    Remove { name: String },
}

#[derive(Subcommand, Debug)]
pub enum WorkflowCmd {
    /// Create a workflow from a JSON spec (`POST /v1/workflows`: `{"name"?, "tasks": [{"ref",
    /// "depends_on"?, …task spec}], "workflows"?: [{"ref", "depends_on"?, "tasks"}],
    /// "callbacks"?}`), read from FILE or `-` (stdin).
    Create {
        file: String,
        #[arg(long)]
        json: bool,
    },
    /// One workflow: each task's ref, state and what it waits for.
    Show {
        id: i64,
        #[arg(long)]
        json: bool,
    },
    /// Cancel every unfinished task of a workflow.
    Cancel {
        id: i64,
        #[arg(long)]
        json: bool,
    },
    /// Retry a workflow: its discarded and cancelled tasks run again, those with dependencies
    /// once these complete; its callbacks fire again when it next finishes.
    Retry {
        id: i64,
        #[arg(long)]
        json: bool,
    },
    /// Add tasks (and sub-workflows) to a running workflow from a JSON spec
    /// (`POST /v1/workflows/{id}/tasks`: `{"tasks": [{"ref", "depends_on"?, …}], "workflows"?}`;
    /// depends_on may name the workflow's refs), read from FILE or `-` (stdin).
    Add {
        id: i64,
        file: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum WorkflowRunCmd {
    /// Start a run of WORKFLOW (a function a worker registered under that name) with INPUT
    /// (JSON; default null). Starting an id again answers the run started first.
    Start {
        workflow: String,
        input: Option<String>,
        /// The run's id [a UUID v7].
        #[arg(long)]
        id: Option<String>,
        /// The queue its task runs in [workflows].
        #[arg(long)]
        queue: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// One run.
    Show {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// A run's journal: its steps, sleeps, events, children.
    Steps {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Wait for a run to finish (up to --wait, at most 60s) and print its result; exits 1 when
    /// it failed or was cancelled, 2 when it had not finished.
    Result {
        id: String,
        #[arg(long, default_value = "30s", value_parser = crate::cli::parse_duration)]
        wait: std::time::Duration,
        #[arg(long)]
        json: bool,
    },
    /// Runs, newest first.
    List {
        #[arg(long)]
        workflow: Option<String>,
        /// running, sleeping, waiting, completed, failed or cancelled.
        #[arg(long)]
        state: Option<String>,
        #[arg(long)]
        parent: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: i64,
        #[arg(long)]
        json: bool,
    },
    /// Send event NAME with PAYLOAD (JSON; default null) to a run.
    Send {
        id: String,
        name: String,
        payload: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Cancel a run and its unfinished children.
    Cancel {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Run a failed or cancelled run again (its journal is replayed).
    Retry {
        id: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum RateLimitCmd {
    /// Create or replace a limit: `--kind window|bucket --limit N --period 1s`, or
    /// `--kind concurrent --limit N`. Tasks name it in rate_limit (`NAME` or
    /// `NAME:partition`).
    Set {
        name: String,
        /// window: N per fixed window; bucket: bursts of N, N per period on average;
        /// concurrent: N running at once.
        #[arg(long, value_parser = ["window", "bucket", "concurrent"])]
        kind: String,
        /// Admissions per period, or running at once (1–1,000,000).
        #[arg(long)]
        limit: i64,
        /// Window or refill period (window, bucket), e.g. 1s, 1m.
        #[arg(long, value_parser = parse_duration)]
        period: Option<Duration>,
        #[arg(long)]
        json: bool,
    },
    /// Every limit with what it admitted and delayed.
    List {
        #[arg(long)]
        json: bool,
    },
    /// One limit.
    Show {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Delete a limit (its tasks run unlimited).
    Delete { name: String },
}

#[derive(Subcommand, Debug)]
pub enum BatchCmd {
    /// Create a batch from a JSON spec (`POST /v1/batches`: `{"name"?, "tasks": [...],
    /// "callbacks": {"completed"?, "succeeded"?, "discarded"?, "cancelled"?}, "open"?}`), read
    /// from FILE or `-` (stdin).
    Create {
        file: String,
        #[arg(long)]
        json: bool,
    },
    /// Add tasks (a JSON array of task specs, from FILE or `-`) to a batch that has not
    /// settled.
    Add {
        id: i64,
        file: String,
        /// Seal the batch too.
        #[arg(long)]
        seal: bool,
        #[arg(long)]
        json: bool,
    },
    /// Seal an open batch: its callbacks run once every task finished.
    Seal {
        id: i64,
        #[arg(long)]
        json: bool,
    },
    /// One batch: progress by state, callbacks, which were enqueued.
    Show {
        id: i64,
        #[arg(long)]
        json: bool,
    },
    /// Batches, newest first.
    List {
        /// At most this many (1–100).
        #[arg(long, default_value_t = 20)]
        limit: i64,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args, Debug)]
pub struct ScheduleAddArgs {
    /// Schedule name.
    pub name: String,
    /// Repeat interval (e.g. 30s, 5m, 1h).
    #[arg(long, value_parser = parse_duration, required_unless_present = "cron")]
    pub every: Option<Duration>,
    /// With --every: the next run is the interval after the moment it fired, not on the grid.
    #[arg(long, requires = "every", conflicts_with = "after_end")]
    pub drift: bool,
    /// With --every: the next run is the interval after the previous run's task finished, and
    /// none starts while it is unfinished (node-daemons' worker sleeps after a run).
    #[arg(long, requires = "every")]
    pub after_end: bool,
    /// First occurrence and grid origin of --every (RFC 3339) [now].
    #[arg(long, requires = "every")]
    pub start_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Cron expression: 5 fields, or 6 with seconds first.
    #[arg(long, conflicts_with = "every")]
    pub cron: Option<String>,
    /// IANA time zone of --cron [UTC].
    #[arg(long, requires = "cron")]
    pub timezone: Option<String>,
    #[command(flatten)]
    pub task: TaskAddArgs,
}

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct WorkerArgs {
    #[command(subcommand)]
    pub cmd: Option<WorkerCmd>,
    #[command(flatten)]
    pub server: ServerArgs,
    /// Run the named workers of this TOML file under a supervisor (node-daemons' cluster
    /// master): docs: cli.md, "Worker supervisor".
    #[arg(long, conflicts_with_all = ["command", "name"])]
    pub config: Option<std::path::PathBuf>,
    /// How often the worker reports its state to the server (0s: never).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub report_interval: Duration,
    /// Set by the supervisor: how often it restarted this worker.
    #[arg(long, env = "DOCKET_WORKER_RESTARTS", default_value_t = 0, hide = true)]
    pub restarts: u32,
    /// Queue to work.
    #[arg(long, default_value = "default")]
    pub queue: String,
    /// Only tasks of this kind (repeatable); default every kind of the queue. Tasks of other
    /// kinds wait for a worker that takes them.
    #[arg(long = "kind")]
    pub kinds: Vec<String>,
    /// Only tasks at this stage (repeatable); default any stage (asyncflow's task_stage). The
    /// command learns it from `DOCKET_TASK_STAGE`.
    #[arg(long = "stage")]
    pub stages: Vec<String>,
    /// A label of this worker, NAME=VALUE (repeatable, up to 20): tasks that require or
    /// prefer it come here (`--label gpu=a100 --label region=eu`).
    #[arg(long = "label", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
    /// Commands run at once.
    #[arg(long, default_value_t = 1)]
    pub concurrency: usize,
    /// Lease per task; heartbeats extend it while the command runs.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub lease: Duration,
    /// Worker name recorded on tasks.
    #[arg(long)]
    pub name: Option<String>,
    /// How long running commands may finish after SIGINT/SIGTERM.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub grace: Duration,
    /// At a task's timeout the command's process group gets SIGTERM, then SIGKILL after this.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub kill_grace: Duration,
    /// Log format.
    #[arg(long, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Export spans (task attempts, ...) as OpenTelemetry traces to this OTLP/HTTP collector
    /// (e.g. http://127.0.0.1:4318).
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required_unless_present = "config")]
    pub command: Vec<String>,
}

#[derive(Subcommand, Debug)]
pub enum WorkerCmd {
    /// Every worker that reported: state (idle, work, stop, lost), tasks in hand.
    List {
        #[command(flatten)]
        server: ServerArgs,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum NamespaceCmd {
    /// Create or replace a namespace.
    Put {
        namespace: String,
        /// URL of the processor docket POSTs to.
        #[arg(long)]
        processor_url: String,
        /// Any other settings as JSON (retry_policy, worker_pool_size, process_step_timeout, …).
        #[arg(long)]
        config: Option<String>,
    },
    /// List namespaces.
    List,
}

#[derive(Args, Debug)]
pub struct ProcessReqArgs {
    pub namespace: String,
    pub id: String,
    /// Args JSON for the processor.
    #[arg(long)]
    pub args: Option<String>,
    /// Context JSON.
    #[arg(long)]
    pub context: Option<String>,
    /// Idempotency key.
    #[arg(long)]
    pub idempotency_key: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum ProcessCmd {
    /// Create a process and run its init (prints the processor's response).
    Init(ProcessReqArgs),
    /// Call a process.
    Call(ProcessReqArgs),
    /// Repair a process in error.
    Repair(ProcessReqArgs),
    /// Put an `error` process back to `running` without calling the processor.
    SimpleRepair { namespace: String, id: String },
    /// Every task of a process with the events it produced.
    Trace { namespace: String, id: String },
    /// Processes of a namespace.
    List {
        namespace: String,
        #[arg(long)]
        status: Option<String>,
        #[arg(long, default_value_t = 100)]
        limit: i64,
        #[arg(long)]
        after: Option<String>,
    },
    /// Show a process and its history.
    Get {
        namespace: String,
        id: String,
        #[arg(long)]
        offset: Option<i64>,
        #[arg(long)]
        limit: Option<i64>,
        /// Newest first.
        #[arg(long)]
        backward: bool,
    },
}

/// An origin as browsers send it: `scheme://host[:port]`, nothing after.
pub(crate) fn parse_origin(s: &str) -> Result<String, String> {
    let ok = ["http://", "https://"].iter().any(|p| {
        s.strip_prefix(p)
            .is_some_and(|h| !h.is_empty() && !h.contains('/'))
    });
    if ok {
        Ok(s.to_string())
    } else {
        Err(format!(
            "{s:?} is not an origin: write scheme://host[:port], e.g. https://app.example"
        ))
    }
}
