//! What a backend must provide for the store methods written once for all of them
//! ([`crate::portable`]): run one of its statements with arguments and hand back its rows. River's
//! driver is the model — the dialect lives in the statements (`sql/<noun>.sql`, the same names
//! and argument order on every backend) and in how a value is bound (`Arg`); the flow of the
//! method (what is read, in which order, what it answers) is the portable code's.
//!
//! Statements are named with [`stmt!`]`(noun, name)`. PostgreSQL numbers its placeholders `$N`,
//! SQLite `?N` and MySQL `?N` too (the loader turns them into MySQL's `?` and remembers which
//! argument each takes), so one argument list serves the three.

use crate::row::Cols;
use crate::Result;
use async_trait::async_trait;
use docket_core::Timestamp;
use serde_json::Value;

/// A statement's name: its noun (file) and name.
pub(crate) type StmtName = (&'static str, &'static str);

/// Names a statement for [`Driver`]: `stmt!(tokens, by_hash)`.
macro_rules! stmt {
    ($noun:ident, $name:ident) => {
        (stringify!($noun), stringify!($name))
    };
}
pub(crate) use stmt;

/// One argument of a statement; each backend binds it as its columns keep the value.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arg<'a> {
    /// Text (or NULL).
    Text(Option<&'a str>),
    /// A 64-bit integer (or NULL).
    Int(Option<i64>),
    /// A 32-bit integer (or NULL).
    Int32(Option<i32>),
    /// A 64-bit float (or NULL).
    Float(Option<f64>),
    /// A flag.
    Bool(bool),
    /// A time (or NULL).
    Time(Option<Timestamp>),
    /// JSON (or NULL).
    Json(Option<&'a Value>),
    /// A lease token's nonce (or NULL): PostgreSQL's `uuid`, 32 hex digits elsewhere.
    Nonce(Option<u128>),
    /// A list of ids: a `bigint[]` on PostgreSQL, a JSON array (text) on SQLite; on MySQL its
    /// placeholder becomes one `?` per id (`NULL` for none), for an `IN (…)`.
    Ints(&'a [i64]),
    /// A list of texts: a `text[]` on PostgreSQL, a JSON array on SQLite, one `?` per text on
    /// MySQL.
    Texts(&'a [String]),
    /// A list of times (or NULLs): a `timestamptz[]` on PostgreSQL, a JSON array of µs on
    /// SQLite, one `?` per time on MySQL.
    Times(&'a [Option<Timestamp>]),
    /// A list of nonces (as [`Arg::Nonce`]): a `uuid[]` on PostgreSQL, a JSON array of hex
    /// texts on SQLite, one `?` per nonce on MySQL.
    Nonces(&'a [u128]),
    /// A list of JSON values: a `jsonb[]` on PostgreSQL, a JSON array on SQLite, one `?` per
    /// value (its text) on MySQL.
    Jsons(&'a [Value]),
}

impl<'a> Arg<'a> {
    /// A list argument's elements as single arguments (MySQL binds each with its own `?`);
    /// `None` for a single argument.
    pub(crate) fn elements(self) -> Option<Vec<Arg<'a>>> {
        match self {
            Arg::Ints(v) => Some(v.iter().map(|i| Arg::Int(Some(*i))).collect()),
            Arg::Texts(v) => Some(v.iter().map(|t| Arg::Text(Some(t))).collect()),
            Arg::Times(v) => Some(v.iter().map(|t| Arg::Time(*t)).collect()),
            Arg::Nonces(v) => Some(v.iter().map(|n| Arg::Nonce(Some(*n))).collect()),
            Arg::Jsons(v) => Some(v.iter().map(|j| Arg::Json(Some(j))).collect()),
            _ => None,
        }
    }

    /// A list argument as one JSON array (SQLite's binding); `None` for a single argument.
    pub(crate) fn json_list(self) -> Option<String> {
        let v: Value = match self {
            Arg::Ints(v) => v.iter().copied().collect(),
            Arg::Texts(v) => v.iter().map(String::as_str).collect(),
            Arg::Times(v) => v.iter().map(|t| t.map(|t| t.timestamp_micros())).collect(),
            Arg::Nonces(v) => v
                .iter()
                .map(|n| Value::from(docket_core::lease::nonce_hex(*n)))
                .collect(),
            Arg::Jsons(v) => Value::Array(v.to_vec()),
            _ => return None,
        };
        Some(v.to_string())
    }
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(v: &'a str) -> Self {
        Arg::Text(Some(v))
    }
}
impl<'a> From<&'a String> for Arg<'a> {
    fn from(v: &'a String) -> Self {
        Arg::Text(Some(v))
    }
}
impl<'a> From<Option<&'a str>> for Arg<'a> {
    fn from(v: Option<&'a str>) -> Self {
        Arg::Text(v)
    }
}
impl From<i64> for Arg<'_> {
    fn from(v: i64) -> Self {
        Arg::Int(Some(v))
    }
}
impl From<Option<i64>> for Arg<'_> {
    fn from(v: Option<i64>) -> Self {
        Arg::Int(v)
    }
}
impl From<i32> for Arg<'_> {
    fn from(v: i32) -> Self {
        Arg::Int32(Some(v))
    }
}
impl From<Option<i32>> for Arg<'_> {
    fn from(v: Option<i32>) -> Self {
        Arg::Int32(v)
    }
}
impl From<f64> for Arg<'_> {
    fn from(v: f64) -> Self {
        Arg::Float(Some(v))
    }
}
impl From<bool> for Arg<'_> {
    fn from(v: bool) -> Self {
        Arg::Bool(v)
    }
}
impl From<Timestamp> for Arg<'_> {
    fn from(v: Timestamp) -> Self {
        Arg::Time(Some(v))
    }
}
impl From<Option<Timestamp>> for Arg<'_> {
    fn from(v: Option<Timestamp>) -> Self {
        Arg::Time(v)
    }
}
impl<'a> From<&'a Value> for Arg<'a> {
    fn from(v: &'a Value) -> Self {
        Arg::Json(Some(v))
    }
}
impl<'a> From<&'a [i64]> for Arg<'a> {
    fn from(v: &'a [i64]) -> Self {
        Arg::Ints(v)
    }
}
impl<'a> From<&'a Vec<i64>> for Arg<'a> {
    fn from(v: &'a Vec<i64>) -> Self {
        Arg::Ints(v)
    }
}
impl<'a> From<Option<&'a Value>> for Arg<'a> {
    fn from(v: Option<&'a Value>) -> Self {
        Arg::Json(v)
    }
}

/// The arguments of a statement, in its placeholders' numbering: `args![name, now]`.
macro_rules! args {
    ($($e:expr),* $(,)?) => {
        &[$(crate::driver::Arg::from($e)),*]
    };
}
pub(crate) use args;

/// [`DriverTx::insert_task`] of each of `tasks` in `tx`, in order.
///
/// # Errors
/// The database failed.
pub(crate) async fn insert_one_by_one<T: DriverTx>(
    tx: &mut T,
    tasks: &[docket_core::task::ResolvedTask],
    now: Timestamp,
) -> Result<Vec<Option<docket_core::Task>>> {
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        out.push(tx.insert_task(t, now).await?);
    }
    Ok(out)
}

/// Runs a backend's statements (see the module's documentation).
#[async_trait]
pub(crate) trait Driver: Send + Sync + Sized {
    /// The backend's row.
    type Row: Cols + Send + Sync;
    /// One of its transactions.
    type Tx: DriverTx<Row = Self::Row>;

    /// Starts a transaction (SQLite: takes the writer lock at once, `BEGIN IMMEDIATE`).
    ///
    /// # Errors
    /// The database failed.
    async fn begin(&self) -> Result<Self::Tx>;

    /// A transaction of flows that find every row they read by its key (durable runs'):
    /// PostgreSQL's plans it by index (`enable_seqscan = off`). A prepared statement's generic
    /// plan, built at its sixth run and kept until the table's next `ANALYZE`, fits the table
    /// as it was then: one built while the runs table held a few rows scans it whole at every
    /// call once it has grown (the durable-functions bench, 2,000 runs on a fresh database:
    /// 1,045 scans of `docket_workflow_runs` reading 1.1 million rows, a third of
    /// PostgreSQL's statement time). Elsewhere [`Driver::begin`].
    ///
    /// # Errors
    /// The database failed.
    async fn begin_keyed(&self) -> Result<Self::Tx> {
        self.begin().await
    }

    /// How many tries [`again_up_to`] gives a flow that contends for rows every node writes
    /// (claims, process steps' event sequence) [10]: a Galera node's rivals are every other
    /// node's transactions, each one's write-set certified only at COMMIT, so it takes more.
    fn contended_tries(&self) -> u32 {
        10
    }

    /// This backend's statement `s` (its `sql/` or `sql_shared/`).
    fn stmt(s: StmtName) -> &'static crate::sql::Stmt;

    /// Runs `st` (a statement of [`Driver::stmt`], perhaps with its text filled in at run
    /// time, as the task list's order) and returns its rows.
    ///
    /// # Errors
    /// The database failed ([`crate::StoreError`]'s one mapping).
    async fn fetch_stmt(&self, st: &crate::sql::Stmt, args: &[Arg<'_>]) -> Result<Vec<Self::Row>>;

    /// Runs `st` and returns how many rows it changed.
    ///
    /// # Errors
    /// The database failed.
    async fn execute_stmt(&self, st: &crate::sql::Stmt, args: &[Arg<'_>]) -> Result<u64>;

    /// Runs statement `s` and returns its rows.
    ///
    /// # Errors
    /// The database failed ([`crate::StoreError`]'s one mapping).
    async fn fetch(&self, s: StmtName, args: &[Arg<'_>]) -> Result<Vec<Self::Row>> {
        self.fetch_stmt(Self::stmt(s), args).await
    }

    /// Runs statement `s` and returns how many rows it changed.
    ///
    /// # Errors
    /// The database failed.
    async fn execute(&self, s: StmtName, args: &[Arg<'_>]) -> Result<u64> {
        self.execute_stmt(Self::stmt(s), args).await
    }

    /// Runs statement `s`, which takes no arguments, as plain text (DDL that a backend does not
    /// prepare: MySQL's `CREATE TRIGGER`).
    ///
    /// # Errors
    /// The database failed.
    async fn execute_text(&self, s: StmtName) -> Result<()>;

    /// Runs statement `s` and returns its first row, if any.
    ///
    /// # Errors
    /// The database failed.
    async fn fetch_one(&self, s: StmtName, args: &[Arg<'_>]) -> Result<Option<Self::Row>> {
        Ok(self.fetch(s, args).await?.into_iter().next())
    }

    /// The ids a page filtered by a tag (`p.tag`) may hold, least and greatest (past `p`'s
    /// cursor, inside its id window), where the tag's index does not give them in id order, so
    /// that the page reads them in parts (`portable/tasks.rs` `TagScan`): PostgreSQL's GIN.
    /// `None` (one statement) elsewhere, whose side table `(tag, task_id)` gives them in order,
    /// and for an empty span.
    ///
    /// # Errors
    /// The database failed.
    async fn tag_id_span(
        &self,
        _p: &docket_core::api::TaskListParams,
    ) -> Result<Option<(i64, i64)>> {
        Ok(None)
    }
}

/// The arguments of `stmt` in the order its placeholders take them (MySQL's numbered
/// placeholders; see [`crate::sql::Stmt::order`]).
pub(crate) fn ordered<'s, 'a>(
    stmt: &'s crate::sql::Stmt,
    args: &'s [Arg<'a>],
) -> impl Iterator<Item = Arg<'a>> + 's {
    let n = if stmt.order.is_empty() {
        args.len()
    } else {
        stmt.order.len()
    };
    (0..n).map(move |i| {
        let k = if stmt.order.is_empty() {
            i
        } else {
            stmt.order[i]
        };
        args[k]
    })
}

/// Statements run in one transaction, and the wake-ups it sends when it commits.
#[async_trait]
pub(crate) trait DriverTx: Send + Sized {
    /// The backend's row.
    type Row: Cols + Send + Sync;

    /// Runs statement `s` in the transaction and returns its rows.
    ///
    /// # Errors
    /// The database failed.
    async fn fetch(&mut self, s: StmtName, args: &[Arg<'_>]) -> Result<Vec<Self::Row>>;

    /// Runs statement `s` in the transaction and returns how many rows it changed.
    ///
    /// # Errors
    /// The database failed.
    async fn execute(&mut self, s: StmtName, args: &[Arg<'_>]) -> Result<u64>;

    /// Runs statement `s` in the transaction and returns its first row, if any.
    ///
    /// # Errors
    /// The database failed.
    async fn fetch_one(&mut self, s: StmtName, args: &[Arg<'_>]) -> Result<Option<Self::Row>> {
        Ok(self.fetch(s, args).await?.into_iter().next())
    }

    /// Runs `s`, a change of task `id` written `… RETURNING {COLS}`, and returns the task's
    /// row as the change left it, or `None` when the statement changed nothing. MySQL has no
    /// `RETURNING`: its statement is the change alone, and the row is read back in the
    /// transaction (the change locked it).
    ///
    /// # Errors
    /// The database failed.
    async fn change_task(
        &mut self,
        s: StmtName,
        args: &[Arg<'_>],
        _id: i64,
    ) -> Result<Option<Self::Row>> {
        self.fetch_one(s, args).await
    }

    /// Appends `events` to process `namespace`/`id`: PostgreSQL in one statement of arrays,
    /// the others a statement per event (`processes.insert_event`).
    ///
    /// # Errors
    /// The database failed.
    async fn insert_events(
        &mut self,
        namespace: &str,
        id: &str,
        events: &[docket_core::process::Event],
    ) -> Result<()>;

    /// Puts processes in `error`, cancels their waiting tasks and publishes `failed` for each
    /// in one go where the backend can (PostgreSQL: three statements for all of them) and
    /// answers true; false (the default): the portable code breaks them one by one.
    ///
    /// # Errors
    /// The database failed.
    async fn break_processes(
        &mut self,
        _broken: &[Broken],
        _detail: &str,
        _now: Timestamp,
    ) -> Result<bool> {
        Ok(false)
    }

    /// Synchronous callers waiting on these process steps learn they finished once this
    /// commits: PostgreSQL notifies every node; the other backends' callers poll.
    ///
    /// # Errors
    /// The database failed.
    async fn steps_done(&mut self, _ids: &[i64]) -> Result<()> {
        Ok(())
    }

    /// After `processes.detach_finished` of a removed process (`key`, its concurrency key):
    /// MySQL detaches the finished tasks it keeps in `docket_tasks_done` too; a no-op
    /// elsewhere.
    ///
    /// # Errors
    /// The database failed.
    async fn detach_archived(&mut self, _key: &str) -> Result<()> {
        Ok(())
    }

    /// Claimers of `queues` look again once this commits: PostgreSQL notifies every node in
    /// the transaction; SQLite and MySQL wake this process's claimers after the commit (other
    /// nodes poll).
    ///
    /// # Errors
    /// The database failed.
    async fn wake(&mut self, queues: &[String]) -> Result<()>;

    /// Publishes process notifications (`docket_notifications`) in the transaction, in order,
    /// so that stream readers see them in commit order.
    ///
    /// # Errors
    /// The database failed.
    async fn publish(
        &mut self,
        namespace: &str,
        id: &str,
        notices: &[docket_core::process::Notice],
        now: Timestamp,
    ) -> Result<()>;

    /// Inserts one resolved task in the transaction; `None` when its unique key is held by an
    /// unfinished task. Its queue's claimers are woken when this commits if it can run now.
    ///
    /// # Errors
    /// The database failed.
    async fn insert_task(
        &mut self,
        t: &docket_core::task::ResolvedTask,
        now: Timestamp,
    ) -> Result<Option<docket_core::Task>>;

    /// [`DriverTx::insert_task`] of each of `tasks`, in order: PostgreSQL writes tasks without
    /// a unique key with one statement (arrays), the others a statement each.
    ///
    /// # Errors
    /// The database failed.
    async fn insert_tasks(
        &mut self,
        tasks: Vec<docket_core::task::ResolvedTask>,
        now: Timestamp,
    ) -> Result<Vec<Option<docket_core::Task>>> {
        insert_one_by_one(self, &tasks, now).await
    }

    /// Brings finished tasks `ids` back to where statements change tasks, before a change
    /// that makes them unfinished again: MySQL moves finished tasks to `docket_tasks_done`
    /// (migration 0004); the other backends keep them in place.
    ///
    /// # Errors
    /// The database failed.
    async fn unarchive(&mut self, _ids: &[i64]) -> Result<()> {
        Ok(())
    }

    /// Task `id`'s tags were just changed to `tags` by a statement: MySQL rewrites its side
    /// table (its triggers follow inserts and deletes only — an UPDATE trigger would run on
    /// every claim and completion); PostgreSQL keeps tags in the row, SQLite's trigger on
    /// `UPDATE OF tags` follows.
    ///
    /// # Errors
    /// The database failed.
    async fn retag(&mut self, _id: i64, _tags: &[String]) -> Result<()> {
        Ok(())
    }

    /// Tasks `ids` were just deleted for good (not moved between MySQL's tables): MySQL
    /// deletes their rows in its side tables, `docket_task_tags` and `docket_debounce_waiting`
    /// (migration 0018: no trigger does it there); SQLite's triggers and PostgreSQL's columns
    /// need nothing.
    ///
    /// # Errors
    /// The database failed.
    async fn forget(&mut self, _ids: &[i64]) -> Result<()> {
        Ok(())
    }

    /// Task `id`, just inserted by a debounced enqueue (issue 43) and marked with debounce key
    /// `key` (`debounce_mark`), becomes the one task waiting with it. PostgreSQL and SQLite:
    /// nothing — their partial unique index `docket_tasks_debounce_idx` refuses a second
    /// waiting task at the mark. MySQL (no partial index): the key's row in
    /// `docket_debounce_waiting` (migration 0018) is added, or taken over from a task that no
    /// longer waits.
    ///
    /// # Errors
    /// [`StoreError::Conflict`](crate::StoreError::Conflict) when another task still waits with
    /// `key` (the flow goes again and replaces it); the database failed.
    async fn debounce_own(&mut self, _id: i64, _key: &str) -> Result<()> {
        Ok(())
    }

    /// The finished tasks among `ids` kept apart from `docket_tasks`, read unlocked (nothing
    /// changes a finished task there): MySQL's `docket_tasks_done` (migration 0004); nothing
    /// elsewhere, where statements on `docket_tasks` find every task.
    ///
    /// # Errors
    /// The database failed.
    async fn fetch_archived(&mut self, _ids: &[i64]) -> Result<Vec<Self::Row>> {
        Ok(vec![])
    }

    /// Plans a fair claim's candidates statement as it runs fastest: PostgreSQL's settings
    /// (see its implementation); nothing elsewhere.
    ///
    /// # Errors
    /// The database failed.
    async fn fair_settings(&mut self) -> Result<()> {
        Ok(())
    }

    /// Holds the lock `name` until the transaction ends; callers take several in sorted order,
    /// so that no two transactions wait on each other. PostgreSQL: an advisory lock; MySQL: a
    /// lock row, written (not only locked: on Galera only a write is certified across nodes,
    /// mysql 0015); SQLite: nothing, its writer lock is held for the whole transaction.
    ///
    /// # Errors
    /// The database failed.
    async fn lock(&mut self, _name: &str) -> Result<()> {
        Ok(())
    }

    /// Runs statement `s`, which writes one row, for each of `rows` — its arguments are
    /// `shared` then the row's — and returns the ids of the rows it changed (tasks: the row's
    /// first argument, an [`Arg::Int`] id; what else calls it — durable runs' inserts and
    /// updates — reads no answer). SQLite and MySQL run it once per row; PostgreSQL overrides
    /// this with one statement, each column of the rows bound as an array (`unnest`), answering
    /// `RETURNING … AS id`.
    ///
    /// # Errors
    /// The database failed.
    async fn update_each(
        &mut self,
        s: StmtName,
        shared: &[Arg<'_>],
        rows: &[Vec<Arg<'_>>],
    ) -> Result<Vec<i64>> {
        let mut done = Vec::with_capacity(rows.len());
        for r in rows {
            let all: Vec<Arg<'_>> = shared.iter().chain(r).copied().collect();
            if self.execute(s, &all).await? > 0 {
                if let Some(Arg::Int(Some(id))) = r.first() {
                    done.push(*id);
                }
            }
        }
        Ok(done)
    }

    /// Commits (then sends the wake-ups of backends without LISTEN/NOTIFY).
    ///
    /// # Errors
    /// The database failed; nothing of the transaction is kept.
    async fn commit(self) -> Result<()>;
}

/// The lease flows' dialect ([`crate::portable`]'s claims, heartbeats, completions and
/// failures are written once over [`Driver`]); each hook is where the databases really differ.
#[async_trait]
pub(crate) trait LeaseDriver: Driver {
    /// Statements hand back the rows they change (`RETURNING`): PostgreSQL and SQLite. Then a
    /// completion is one statement that completes every item `docket_core::lease::check`
    /// finds `Held` (the rule restated in SQL: `complete_held`); MySQL locks, checks in Rust,
    /// writes and reads again.
    fn returning(&self) -> bool {
        true
    }

    /// A transaction of the hot path (claims, completions) [`Driver::begin`]; PostgreSQL's
    /// does not wait for the WAL flush unless strict, and plans by index.
    ///
    /// # Errors
    /// The database failed.
    async fn begin_hot(&self) -> Result<Self::Tx> {
        self.begin().await
    }

    /// A claim in one statement, tried before the transaction: `Some(tasks)` when it
    /// answered (PostgreSQL's `claim_fast`, counted in `claims_in_one_statement`), `None`
    /// when the claim needs the transaction (a concurrency key, a queue limit, a rate limit,
    /// a fair queue, a lease too long) or the backend has none.
    ///
    /// # Errors
    /// The database failed.
    async fn claim_fast(
        &self,
        _p: &crate::TaskClaimParams,
        _nonce: u128,
    ) -> Result<Option<Vec<docket_core::Task>>> {
        Ok(None)
    }
}

/// A process a step given up on or a zombie puts in `error` ([`DriverTx::break_processes`]).
#[derive(Debug, Clone)]
pub(crate) struct Broken {
    /// The process's namespace.
    pub namespace: String,
    /// The process's id.
    pub id: String,
    /// The task whose failure broke it.
    pub task_id: i64,
    /// That task again when the process is marked corrupted by it.
    pub corrupted_by: Option<i64>,
}

/// Runs `op` again, up to 10 times in all, while the database refuses it with a serialization
/// failure or deadlock (class 40; SQLite's busy): each try is one transaction, rolled back whole,
/// so going again is safe (PostgreSQL: a row moved to another partition meanwhile; MySQL: two
/// claimers' lock rows).
pub(crate) async fn again<T, F, Fut>(op: F) -> Result<T>
where
    F: FnMut() -> Fut + Send,
    Fut: std::future::Future<Output = Result<T>> + Send,
{
    again_up_to(10, op).await
}

/// [`again`] with up to `most` tries in all.
pub(crate) async fn again_up_to<T, F, Fut>(most: u32, mut op: F) -> Result<T>
where
    F: FnMut() -> Fut + Send,
    Fut: std::future::Future<Output = Result<T>> + Send,
{
    let mut tries = 1;
    loop {
        match op().await {
            Err(e) if e.db_kind() == Some(crate::DbErrorKind::Retryable) && tries < most => {
                // Rivals that collided go again at different moments, or they collide again
                // (Galera: claims through different nodes picking the same first tasks). Up
                // to 2^tries ms, at most 64.
                let cap = 1u64 << tries.min(6);
                let pause = rand::random::<u64>() % (cap + 1);
                if pause > 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
                }
                tries += 1;
            }
            r => return r,
        }
    }
}

/// How a backend hears of changes (the part of [`crate::NotificationStore`] that is not
/// statements): PostgreSQL's LISTEN, the other backends' in-process wake-ups.
#[async_trait]
pub(crate) trait Listen {
    /// See [`crate::NotificationStore::listen`].
    ///
    /// # Errors
    /// The database failed.
    async fn listen(&self) -> Result<Option<tokio::sync::mpsc::Receiver<crate::Wake>>>;
}

/// The task call whose statements differ in shape by backend: the insert is batched as each
/// database allows (PostgreSQL: one `unnest` statement; MySQL: multi-row statements of tasks
/// without a unique key; SQLite: row by row on its one writer).
#[async_trait]
pub(crate) trait TaskDriver: Driver {
    /// See [`crate::TaskStore::task_insert_many`].
    ///
    /// # Errors
    /// The database failed.
    async fn task_insert_many(
        &self,
        p: crate::TaskInsertManyParams,
    ) -> Result<Vec<docket_core::Task>>;
}

/// The maintenance steps whose flow differs by backend (the rest of
/// [`crate::MaintenanceStore`] is written once, around these): PostgreSQL and SQLite change a
/// batch in one statement (`… WHERE id IN (SELECT … LIMIT n) RETURNING …`); MySQL cannot `LIMIT`
/// a subquery of `IN` nor read the table a `DELETE` changes, so it first selects its batch of
/// ids without locks, then locks them by primary key (a locking scan would lock rows a claim's
/// `SKIP LOCKED` then skips), then changes them, and keeps finished tasks in two tables.
#[async_trait]
pub(crate) trait MaintenanceDriver: Driver {
    /// Makes at most `limit` scheduled or retryable tasks due at `now` available, in `run_at`
    /// order, skipping rows others hold; returns their queues, one per task.
    ///
    /// # Errors
    /// The database failed.
    async fn promote_in(
        &self,
        tx: &mut Self::Tx,
        now: Timestamp,
        limit: i64,
    ) -> Result<Vec<String>>;

    /// Discards at most `limit` waiting tasks whose `expires_at` is past; returns how many.
    ///
    /// # Errors
    /// The database failed.
    async fn expire_in(&self, tx: &mut Self::Tx, now: Timestamp, limit: i64) -> Result<u64>;

    /// Deletes one batch of finished tasks past their retention (a queue's own, else the
    /// defaults) that no live process needs; returns (queue, state, finished_at) of each, for
    /// the kept counts ([`docket_core::counts`]).
    ///
    /// # Errors
    /// The database failed.
    async fn prune_in(
        &self,
        tx: &mut Self::Tx,
        p: &crate::TaskPruneParams,
    ) -> Result<Vec<(String, docket_core::TaskState, Option<Timestamp>)>>;

    /// See [`crate::MaintenanceStore::task_rotate`]: PostgreSQL turns its ring of slots,
    /// MySQL moves finished tasks to `docket_tasks_done`, SQLite has neither.
    ///
    /// # Errors
    /// The database failed.
    async fn task_rotate(&self, p: crate::TaskRotateParams) -> Result<crate::Rotation>;
}

/// How long a pooled connection may sit idle and still be handed out without a ping.
pub(crate) const TRUST_IDLE: std::time::Duration = std::time::Duration::from_secs(1);

/// Pool options for a database across the network (PostgreSQL, MySQL): a connection used
/// within [`TRUST_IDLE`] is handed out as it is; one idle longer is pinged first. sqlx pings on
/// every acquire by default — one more round trip before each transaction of the hot path (a
/// claim was six round trips, where the ping was one; issue 24). A connection that dies within
/// the second fails the statement it carries, as any statement in flight would.
///
/// With several hosts in the URL ([`crate::failover`]), a connection made before the node moved
/// to another host is dropped instead of handed out.
pub(crate) fn pool_options<DB: sqlx::Database>(
    switch: Option<std::sync::Arc<crate::failover::Switch>>,
) -> sqlx::pool::PoolOptions<DB> {
    sqlx::pool::PoolOptions::<DB>::new()
        .test_before_acquire(false)
        .before_acquire(move |conn, meta| {
            let stale = switch.as_ref().is_some_and(|s| s.stale(meta.age));
            Box::pin(async move {
                if stale {
                    return Ok(false);
                }
                if meta.idle_for >= TRUST_IDLE {
                    sqlx::Connection::ping(conn).await?;
                }
                Ok(true)
            })
        })
}
