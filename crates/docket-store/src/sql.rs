//! Where each backend's SQL lives and how it is loaded.
//!
//! Every statement longer than a line is in `src/<backend>/sql/<noun>.sql` — the same nouns as
//! the store's traits (`tasks.sql` for [`crate::TaskStore`], `leases.sql` for
//! [`crate::LeaseStore`], …) — under a line `-- name: <what it does>`. Code names it with
//! `sql!(noun, name)`, e.g. `sql!(leases, claim_candidates)`, which is the statement's text
//! (`&'static str`). So the SQL behind a store method on a backend is in the file of the
//! method's noun, in the backend's `sql/` folder; `grep -n "name: claim" src/*/sql/leases.sql`
//! shows it on the three. A statement written alike on several backends is kept once in
//! `src/sql_shared/<noun>.sql` ([`SHARED`], numbered placeholders `?N`): each backend whose own
//! file has no statement of that name loads it, PostgreSQL with `$N`.
//!
//! A backend's files are read once, when its first statement is used, and these markers are
//! expanded then:
//! - `{COLS}`, `{SCHEDULE_COLS}`, `{TOKEN_COLS}`: the column lists a task, a schedule and a token
//!   are decoded from (the same on every backend, [`TASK_COLS`] and the others below);
//! - `{runs:OUTCOME:NOW}`: the assignments that append the run-log entry of the attempt the row
//!   holds, ended at the SQL expression `NOW` with `OUTCOME`, and count it — the backend's
//!   `fragments.sql` statement `runs`, with `{outcome}`, `{now}` and `{keep}`
//!   ([`docket_core::run::RUN_LOG_KEEP`]) filled in;
//! - `{affinity:T:LABELS:NOW}`: whether a claim with labels `LABELS` may take row `T` at `NOW`
//!   (`fragments.sql` statement `affinity`; issue 43's worker labels).
//! - `{claim_order:T}`: the claim order (`ORDER BY` terms) of the rows of alias `T` — the
//!   backend's `fragments.sql` statement `claim_order`, with `{t}` filled in (the order Rust
//!   sorts claimed tasks in, [`crate::leases::sort_claim_order`]).
//! - `{latency_bucket:LAT}`: the latency bucket of the ms in SQL expression `LAT`, a `CASE`
//!   over [`docket_core::history::LATENCY_BOUNDS_MS`] (the rule `docket_core::history::bucket`).
//!
//! Statements sized at run time (an `IN (…)` of a batch's length) keep a `{…}` slot in the file
//! that the code fills (`{ids}`: the placeholders of the batch).
//!
//! Tests check that every `sql!` in a backend's code names a statement of its files and that
//! every statement is used.

use std::collections::HashMap;

/// Every column of `docket_tasks` a [`docket_core::Task`] is decoded from (every backend).
pub(crate) const TASK_COLS: &str =
    "id, queue, kind, payload, priority, state, run_at, expires_at, attempt, \
    max_attempts, backoff_initial_ms, backoff_coefficient, backoff_max_ms, backoff_jitter, \
    timeout_ms, unique_key, concurrency_key, concurrency_limit, node, result, errors, progress, \
    created_at, attempted_at, finished_at, worker, lease_token, lease_ms, lease_expires_at, \
    cancel_requested_at, trace_id, namespace, process_id, backoff_kind, user_id, stage, \
    stages_done, runs, run_count, attempt_node, edited_at, batch_id, rate_limit, partition_key, debounce_key, dead_letter_of, tags, \
    affinity";

/// The columns a [`docket_core::Schedule`] is decoded from.
pub(crate) const SCHEDULE_COLS: &str =
    "spec, paused, next_run_at, last_run_at, last_task_id, created_at, updated_at";

/// The columns a [`crate::TokenRecord`] is decoded from.
/// The columns of a workflow run (`row::workflow_run`).
pub(crate) const RUN_COLS: &str = "id, workflow, queue, state, input, result, error, parent_id, \
    task_id, steps, waiting_for, wake_at, created_at, updated_at, finished_at";
/// The columns of a journal entry (`row::entry`).
pub(crate) const ENTRY_COLS: &str = "seq, kind, name, state, output, error, attempts, child_id, \
    started_at, finished_at, wake_at";
pub(crate) const TOKEN_COLS: &str =
    "id, name, hash, scopes, queues, created_at, expires_at, revoked_at, last_used_at";

/// One backend's statements, by (noun, name).
#[derive(Debug)]
pub(crate) struct Statements {
    backend: &'static str,
    by_noun: HashMap<&'static str, HashMap<&'static str, Stmt>>,
}

/// A statement as the driver runs it (see [`crate::driver`]).
#[derive(Debug)]
pub(crate) struct Stmt {
    /// The text sent to the database.
    pub text: String,
    /// MySQL only: which argument (0-based) each `?` takes, for a statement written with
    /// numbered placeholders `?1`, `?2` (as SQLite's) — MySQL has only `?`, so `?2 … ?2` binds
    /// the second argument twice. Empty: the arguments in order.
    pub order: Vec<usize>,
    /// A plain read (`SELECT`/`WITH … SELECT` without a change): SQLite runs it on its reader
    /// pool, everything else on its single writer.
    pub read: bool,
}

impl Stmt {
    /// This statement with its run-time markers filled in (`{cmp}`, `{order}`, …; see
    /// [`fill`]), its placeholders' order kept.
    pub(crate) fn filled(&self, with: &[(&str, &str)]) -> Stmt {
        Stmt {
            text: fill(&self.text, with),
            order: self.order.clone(),
            read: self.read,
        }
    }

    fn new(backend: &str, text: String) -> Stmt {
        let mut order = vec![];
        let mut text = text;
        if backend == "mysql" && text.contains("?1") {
            // Comments may name placeholders too: they go before the `?` are counted.
            text = text
                .lines()
                .filter(|l| !l.trim_start().starts_with("--"))
                .collect::<Vec<_>>()
                .join("\n");
            let mut out = String::with_capacity(text.len());
            let mut rest = text.as_str();
            while let Some(i) = rest.find('?') {
                out.push_str(&rest[..i + 1]);
                let digits: String = rest[i + 1..]
                    .chars()
                    .take_while(char::is_ascii_digit)
                    .collect();
                let n: usize = digits.parse().expect("a numbered placeholder: ?N");
                order.push(n - 1);
                rest = &rest[i + 1 + digits.len()..];
            }
            out.push_str(rest);
            text = out;
        }
        let head = text
            .lines()
            .find(|l| !l.trim_start().starts_with("--"))
            .unwrap_or("")
            .trim_start()
            .to_ascii_uppercase();
        let read = head.starts_with("SELECT")
            && !["INSERT", "UPDATE", "DELETE", "FOR UPDATE"]
                .iter()
                .any(|w| text.to_ascii_uppercase().contains(w));
        Stmt { text, order, read }
    }
}

impl Statements {
    /// Parses `files` (noun, text) of `backend` and expands their markers.
    ///
    /// # Panics
    /// On a malformed file (a statement before any `-- name:`, a name given twice, an unknown
    /// marker): the files are part of the binary, so this is a bug a test catches.
    pub(crate) fn load(
        backend: &'static str,
        files: &[(&'static str, &'static str)],
        shared: &[(&'static str, &'static str)],
    ) -> Self {
        let mut raw: HashMap<(&'static str, &'static str), String> = HashMap::new();
        for (noun, text) in files {
            let parsed = docket_core::sqlfile::statements(text)
                .unwrap_or_else(|e| panic!("{backend}: sql/{noun}.sql: {e}"));
            for (name, body) in parsed {
                raw.insert((noun, name), body);
            }
        }
        for (noun, text) in shared {
            let parsed = docket_core::sqlfile::statements(text)
                .unwrap_or_else(|e| panic!("sql_shared/{noun}.sql: {e}"));
            for (name, body) in parsed {
                raw.entry((noun, name)).or_insert_with(|| {
                    if backend == "postgres" {
                        dollars(&body)
                    } else {
                        body
                    }
                });
            }
        }
        // tasks.list has a {tag} marker: `list` without a tag filter, and `list_tagged` with
        // the backend's (fragments.tag_filter), each planned for what it is (a tag filter the
        // generic plan of one statement would not take its index for).
        if let Some(list) = raw.get(&("tasks", "list")).cloned() {
            let filter = raw
                .get(&("fragments", "tag_filter"))
                .cloned()
                .unwrap_or_default();
            raw.insert(("tasks", "list_tagged"), list.replace("{tag}", &filter));
            raw.insert(("tasks", "list"), list.replace("{tag}", ""));
        }
        let runs = raw.get(&("fragments", "runs")).cloned().unwrap_or_default();
        let order = raw
            .get(&("fragments", "claim_order"))
            .cloned()
            .unwrap_or_default();
        let affinity = raw
            .get(&("fragments", "affinity"))
            .cloned()
            .unwrap_or_default();
        let mut by_noun: HashMap<&'static str, HashMap<&'static str, Stmt>> = HashMap::new();
        for ((noun, name), v) in raw {
            let v = expand(&v, &runs, &order);
            let v = expand_affinity(&v, &affinity);
            assert!(
                !v.contains("{runs:")
                    && !v.contains("{COLS}")
                    && !v.contains("{claim_order:")
                    && !v.contains("{affinity:")
                    && !v.contains("{latency_bucket:"),
                "{backend}: {noun}.sql {name} keeps a marker"
            );
            by_noun
                .entry(noun)
                .or_default()
                .insert(name, Stmt::new(backend, v));
        }
        Statements { backend, by_noun }
    }

    /// The statement `name` of `noun.sql`.
    ///
    /// # Panics
    /// When there is none (a test checks every name used).
    pub(crate) fn get(&self, noun: &str, name: &str) -> &str {
        &self.stmt(noun, name).text
    }

    /// Statement `name` of `noun.sql` with how to bind it.
    ///
    /// # Panics
    /// When there is none (a test checks every name used).
    pub(crate) fn stmt(&self, noun: &str, name: &str) -> &Stmt {
        match self.by_noun.get(noun).and_then(|n| n.get(name)) {
            Some(s) => s,
            None => panic!("{}: no statement {name} in sql/{noun}.sql", self.backend),
        }
    }

    /// Every (noun, name) loaded.
    #[cfg(test)]
    pub(crate) fn names(&self) -> impl Iterator<Item = (&'static str, &'static str)> + '_ {
        self.by_noun
            .iter()
            .flat_map(|(noun, n)| n.keys().map(move |name| (*noun, *name)))
    }
}

/// The statements written alike on several backends (`src/sql_shared/<noun>.sql`, numbered
/// placeholders `?N`): a backend loads each one whose name its own `sql/<noun>.sql` does not
/// give, PostgreSQL with `$N` for `?N`.
pub(crate) const SHARED: &[(&str, &str)] = &[
    ("audit", include_str!("sql_shared/audit.sql")),
    ("batches", include_str!("sql_shared/batches.sql")),
    ("leases", include_str!("sql_shared/leases.sql")),
    ("maintenance", include_str!("sql_shared/maintenance.sql")),
    ("nodes", include_str!("sql_shared/nodes.sql")),
    (
        "notifications",
        include_str!("sql_shared/notifications.sql"),
    ),
    ("processes", include_str!("sql_shared/processes.sql")),
    ("queues", include_str!("sql_shared/queues.sql")),
    ("rate_limits", include_str!("sql_shared/rate_limits.sql")),
    ("runs", include_str!("sql_shared/runs.sql")),
    ("schedules", include_str!("sql_shared/schedules.sql")),
    ("tasks", include_str!("sql_shared/tasks.sql")),
    ("tokens", include_str!("sql_shared/tokens.sql")),
];

/// `?N` placeholders as PostgreSQL's `$N`.
fn dollars(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

/// Expands `{affinity:T:LABELS:NOW}`: whether a claim with the labels `LABELS` (a JSON object
/// placeholder) may take row `T` at `NOW` — the backend's `fragments.sql` statement `affinity`
/// with `{t}`, `{labels}` and `{now}` filled in (`docket_core::labels::may_claim`'s rule).
fn expand_affinity(sql: &str, affinity: &str) -> String {
    // Left to right, never into what was put in (the fragment's own text is not expanded).
    let mut out = String::with_capacity(sql.len());
    let mut rest = sql;
    while let Some(i) = rest.find("{affinity:") {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 10..];
        let end = tail.find('}').expect("an {affinity:…} marker is closed");
        let parts: Vec<&str> = tail[..end].split(':').collect();
        let [t, labels, now] = parts[..] else {
            panic!("an {{affinity:T:LABELS:NOW}} marker has three parts")
        };
        out.push_str(
            &affinity
                .replace("{t}", t)
                .replace("{labels}", labels)
                .replace("{now}", now),
        );
        rest = &tail[end + 1..];
    }
    out.push_str(rest);
    out
}

/// Expands the column lists, the claim order and the run-log markers of one statement.
fn expand(sql: &str, runs: &str, order: &str) -> String {
    let mut sql = sql
        .replace("{COLS}", TASK_COLS)
        .replace("{SCHEDULE_COLS}", SCHEDULE_COLS)
        .replace("{TOKEN_COLS}", TOKEN_COLS)
        .replace("{RUN_COLS}", RUN_COLS)
        .replace("{ENTRY_COLS}", ENTRY_COLS);
    while let Some(i) = sql.find("{claim_order:") {
        let end = i + sql[i..]
            .find('}')
            .expect("a {claim_order:…} marker is closed");
        let alias = sql[i + 13..end].to_string();
        sql.replace_range(i..=end, &order.replace("{t}", &alias));
    }
    while let Some(i) = sql.find("{latency_bucket:") {
        let end = i + sql[i..]
            .find('}')
            .expect("a {latency_bucket:…} marker is closed");
        let lat = sql[i + 16..end].to_string();
        sql.replace_range(i..=end, &latency_bucket(&lat));
    }
    let mut out = String::with_capacity(sql.len() + 512);
    let mut rest = sql.as_str();
    while let Some(i) = rest.find("{runs:") {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 6..];
        let end = tail.find('}').expect("a {runs:…} marker is closed");
        let (outcome, now) = tail[..end]
            .split_once(':')
            .expect("a {runs:OUTCOME:NOW} marker names the time");
        out.push_str(
            &runs
                .replace("{outcome}", outcome)
                .replace("{now}", now)
                .replace("{keep}", &docket_core::run::RUN_LOG_KEEP.to_string()),
        );
        rest = &tail[end + 1..];
    }
    out.push_str(rest);
    out
}

/// The latency bucket ([`docket_core::history::bucket`]) of the ms in SQL expression `lat`, as a
/// `CASE` over [`docket_core::history::LATENCY_BOUNDS_MS`] (`NULL` for a `NULL` latency).
fn latency_bucket(lat: &str) -> String {
    let bounds = docket_core::history::LATENCY_BOUNDS_MS;
    let mut case = String::from("CASE");
    for (i, b) in bounds.iter().enumerate() {
        case.push_str(&format!(" WHEN {lat} < {b} THEN {i}"));
    }
    case.push_str(&format!(
        " WHEN {lat} IS NOT NULL THEN {} END",
        bounds.len()
    ));
    case
}

pub(crate) use docket_core::sqlfile::fill;

/// The text of statement `name` of `noun.sql` of the backend whose `STATEMENTS` is in scope.
macro_rules! sql {
    ($noun:ident, $name:ident) => {
        STATEMENTS.get(stringify!($noun), stringify!($name))
    };
}
pub(crate) use sql;

/// Declares a backend's `STATEMENTS`, loaded from its `sql/<noun>.sql` files on first use.
macro_rules! statements {
    ($backend:literal: $($noun:ident),* $(,)?) => {
        /// This backend's statements (see [`crate::sql`]).
        pub(crate) static STATEMENTS: std::sync::LazyLock<crate::sql::Statements> =
            std::sync::LazyLock::new(|| {
                crate::sql::Statements::load(
                    $backend,
                    &[$((stringify!($noun), include_str!(concat!("sql/", stringify!($noun), ".sql")))),*],
                    crate::sql::SHARED,
                )
            });

        #[cfg(test)]
        mod statements_used {
            /// Every `sql!(noun, name)` in this backend's code names a statement, and every
            /// statement is named somewhere.
            #[test]
            fn every_statement_is_known_and_used() {
                // Read at run time: the files that may name statements are every file of the
                // backend's folder, of `portable/` and `rate_limits.rs`, whatever they are.
                let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
                let code = crate::sql::sources(&[src.join($backend), src.join("portable")], &[src.join("rate_limits.rs")]);
                let code: Vec<&str> = code.iter().map(String::as_str).collect();
                let code = &code[..];
                crate::sql::check_used(&super::STATEMENTS, code);
            }
        }
    };
}
pub(crate) use statements;

/// The text of every `.rs` file in `dirs` and of `files`, for [`check_used`].
#[cfg(test)]
pub(crate) fn sources(dirs: &[std::path::PathBuf], files: &[std::path::PathBuf]) -> Vec<String> {
    let mut paths: Vec<std::path::PathBuf> = files.to_vec();
    for d in dirs {
        for e in std::fs::read_dir(d).expect("a source folder") {
            let p = e.expect("a folder entry").path();
            if p.extension().is_some_and(|x| x == "rs") {
                paths.push(p);
            }
        }
    }
    paths
        .iter()
        .map(|p| std::fs::read_to_string(p).expect("a source file"))
        .collect()
}

/// The check behind `statements!`'s test: the `sql!(noun, name)` and `stmt!(noun, name)` in
/// `code` and the statements of `s` are the same set (`fragments` excepted).
#[cfg(test)]
pub(crate) fn check_used(s: &Statements, code: &[&str]) {
    let mut used = std::collections::BTreeSet::new();
    for src in code {
        let mut rest = *src;
        let next = |r: &str| {
            [r.find("sql!("), r.find("stmt!(")]
                .into_iter()
                .flatten()
                .min()
        };
        while let Some(i) = next(rest) {
            let i = i + rest[i..].find('(').expect("a macro call");
            rest = &rest[i + 1..];
            let end = rest.find(')').expect("sql!( is closed");
            let args: Vec<&str> = rest[..end].split(',').map(str::trim).collect();
            if let [noun, name] = args[..] {
                used.insert((noun.to_string(), name.to_string()));
            }
        }
    }
    for (noun, name) in &used {
        let _ = s.get(noun, name);
    }
    let unused: Vec<_> = s
        .names()
        .filter(|(noun, _)| *noun != "fragments")
        .filter(|(noun, name)| !used.contains(&(noun.to_string(), name.to_string())))
        .collect();
    assert!(
        unused.is_empty(),
        "{}: statements never used: {unused:?}",
        s.backend
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_split_by_name_and_markers_expand() {
        let s = Statements::load(
            "test",
            &[
                (
                    "fragments",
                    "-- name: runs\nR({now},{outcome},{keep})\n-- name: claim_order\n{t}.p DESC, {t}.id\n",
                ),
                (
                    "tasks",
                    "-- a file comment\n-- name: one\nSELECT 1 ORDER BY {claim_order:x};\n\n-- name: two\n-- why\nUPDATE t SET a = 1, {runs:completed:$2} WHERE x\n",
                ),
            ],
            &[],
        );
        assert_eq!(s.get("tasks", "one"), "SELECT 1 ORDER BY x.p DESC, x.id");
        assert_eq!(
            s.get("tasks", "two"),
            format!(
                "-- why\nUPDATE t SET a = 1, R($2,completed,{}) WHERE x",
                docket_core::run::RUN_LOG_KEEP
            )
        );
    }

    #[test]
    fn mysql_numbered_placeholders_bind_in_their_order() {
        let s = Stmt::new(
            "mysql",
            "-- the ?9 of a comment\nSELECT ?2, ?1 WHERE a = ?2".into(),
        );
        assert_eq!(s.text, "SELECT ?, ? WHERE a = ?");
        assert_eq!(s.order, vec![1, 0, 1]);
        assert!(s.read);
        let plain = Stmt::new("mysql", "UPDATE t SET a = ? WHERE b = ?".into());
        assert!(plain.order.is_empty() && !plain.read);
        let pg = Stmt::new("postgres", "SELECT $1 FOR UPDATE".into());
        assert!(pg.order.is_empty() && !pg.read);
    }

    #[test]
    fn the_latency_bucket_is_a_case_over_the_rule_s_bounds() {
        assert_eq!(
            expand("SELECT {latency_bucket:x.lat} AS b", "", ""),
            "SELECT CASE WHEN x.lat < 10 THEN 0 WHEN x.lat < 50 THEN 1 WHEN x.lat < 100 THEN 2 \
             WHEN x.lat < 250 THEN 3 WHEN x.lat < 500 THEN 4 WHEN x.lat < 1000 THEN 5 \
             WHEN x.lat < 2500 THEN 6 WHEN x.lat < 5000 THEN 7 WHEN x.lat < 10000 THEN 8 \
             WHEN x.lat < 30000 THEN 9 WHEN x.lat < 60000 THEN 10 WHEN x.lat < 300000 THEN 11 \
             WHEN x.lat IS NOT NULL THEN 12 END AS b"
        );
    }

    #[test]
    fn a_shared_statement_fills_in_where_the_backend_has_none() {
        let shared = &[(
            "tasks",
            "-- name: one\nSELECT ?1\n-- name: two\nSELECT ?2, ?1\n",
        )];
        let own = &[("tasks", "-- name: one\nSELECT $1::text\n")];
        let pg = Statements::load("postgres", own, shared);
        assert_eq!(pg.get("tasks", "one"), "SELECT $1::text");
        assert_eq!(pg.get("tasks", "two"), "SELECT $2, $1");
        let my = Statements::load("mysql", &[], shared);
        assert_eq!(my.get("tasks", "two"), "SELECT ?, ?");
        assert_eq!(my.stmt("tasks", "two").order, vec![1, 0]);
    }

    #[test]
    #[should_panic(expected = "no statement three")]
    fn an_unknown_name_is_a_clear_panic() {
        Statements::load("test", &[("tasks", "-- name: one\nSELECT 1\n")], &[])
            .get("tasks", "three");
    }
}
