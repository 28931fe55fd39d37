//! The store conformance suite: one set of cases, run against every backend (River's
//! `riverdrivertest` is the model). A backend's test file is a few lines:
//!
//! ```ignore
//! #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
//! async fn conformance() {
//!     docket_store::testing::exercise(docket_store::testing::TestStore::sqlite).await;
//! }
//! ```
//!
//! [`exercise`] runs every case, each on a fresh store, through a wrapper that records which
//! [`Store`] methods were called, and fails unless every method of the trait was. Time is passed
//! explicitly, so no case sleeps. `DOCKET_CONFORMANCE_CASE=name` runs the cases whose name
//! contains `name` (and skips the coverage check). Behind the `testing` feature.

mod batches;
mod claims;
mod failures;
mod fair;
mod fixtures;
mod leases;
mod maintenance;
mod nodes;
mod notifications;
mod processes;
mod processor;
mod queues;
mod rate_limits;
mod recording;
mod runs;
mod schedules;
mod tasks;
mod tokens;

pub use processor::spawn_example_processor;

use crate::{connect, Backend, ConnectOptions, Store};
use fixtures::Bundle;
use futures::future::BoxFuture;
use std::collections::BTreeSet;
use std::future::Future;
use std::sync::{Arc, Mutex};

/// A fresh, migrated store for one test: its own PostgreSQL schema, MySQL database or SQLite file.
#[derive(Debug)]
pub struct TestStore {
    /// The store.
    pub store: Arc<dyn Store>,
    /// PostgreSQL: the schema; MySQL: the database; SQLite: `None` (see [`TestStore::path`]).
    pub schema: Option<String>,
    max_connections: u32,
    _dir: Option<tempfile::TempDir>,
}

impl TestStore {
    /// The PostgreSQL of `DOCKET_TEST_PG_URL` (default `postgres://postgres@127.0.0.1:5432/postgres`).
    pub fn pg_url() -> String {
        std::env::var("DOCKET_TEST_PG_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
    }

    /// A new schema `t_<uuid>` in [`TestStore::pg_url`], migrated (12 connections).
    ///
    /// # Panics
    /// When PostgreSQL cannot be reached (`scripts/test.sh` starts it).
    pub async fn postgres() -> TestStore {
        Self::postgres_with(12).await
    }

    /// [`TestStore::postgres`] with at most `max_connections` (tests that open several
    /// nodes keep under the server's connection limit this way).
    ///
    /// # Panics
    /// When PostgreSQL cannot be reached.
    pub async fn postgres_with(max_connections: u32) -> TestStore {
        let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
        let store = connect(&ConnectOptions {
            url: Self::pg_url(),
            schema: Some(schema.clone()),
            max_connections: Some(max_connections),
            strict_commit: false,
        })
        .await
        .expect("PostgreSQL is running (scripts/test.sh starts it)");
        store.migrate().await.expect("migrations apply");
        TestStore {
            store,
            schema: Some(schema),
            max_connections,
            _dir: None,
        }
    }

    /// A new SQLite file in a temporary directory, migrated.
    ///
    /// # Panics
    /// When the file cannot be created.
    pub async fn sqlite() -> TestStore {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let url = format!("sqlite://{}", dir.path().join("t.db").display());
        let store = connect(&ConnectOptions::new(url))
            .await
            .expect("SQLite opens");
        store.migrate().await.expect("migrations apply");
        TestStore {
            store,
            schema: None,
            max_connections: 0,
            _dir: Some(dir),
        }
    }

    /// The MySQL/MariaDB server of `DOCKET_TEST_MYSQL_URL` (default
    /// `mysql://root@127.0.0.1:3306/test`); tests create their own databases on it.
    pub fn mysql_url() -> String {
        std::env::var("DOCKET_TEST_MYSQL_URL")
            .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into())
    }

    /// The URL of database `db` on [`TestStore::mysql_url`]'s server.
    pub fn mysql_db_url(db: &str) -> String {
        crate::mysql::MySqlStore::url_with_database(&Self::mysql_url(), db)
    }

    /// A new database `t_<uuid>` on [`TestStore::mysql_url`]'s server, migrated (8
    /// connections). `scripts/test.sh` drops the ones older runs left.
    ///
    /// # Panics
    /// When the server cannot be reached (`scripts/test.sh` starts MariaDB).
    pub async fn mysql() -> TestStore {
        Self::mysql_with(8).await
    }

    /// [`TestStore::mysql`] with at most `max_connections`.
    ///
    /// # Panics
    /// When the server cannot be reached.
    pub async fn mysql_with(max_connections: u32) -> TestStore {
        let db = format!("t_{}", uuid::Uuid::new_v4().simple());
        let url = crate::mysql::MySqlStore::create_database(&Self::mysql_url(), &db)
            .await
            .expect("MariaDB/MySQL is running (scripts/test.sh starts it)");
        let store = connect(&ConnectOptions {
            url,
            schema: None,
            max_connections: Some(max_connections),
            strict_commit: false,
        })
        .await
        .expect("the test database");
        store.migrate().await.expect("migrations apply");
        TestStore {
            store,
            schema: Some(db),
            max_connections,
            _dir: None,
        }
    }

    /// The server a second node reaches MySQL through: `DOCKET_TEST_MYSQL_URL_2` when set (another
    /// node of a Galera cluster, issue 38: the two nodes then write through different database
    /// nodes), else [`TestStore::mysql_url`]'s.
    pub fn mysql_url_2() -> String {
        std::env::var("DOCKET_TEST_MYSQL_URL_2").unwrap_or_else(|_| Self::mysql_url())
    }

    /// Another store on the same database (schema or file), as a second node would open it
    /// (on MySQL through [`TestStore::mysql_url_2`]).
    ///
    /// # Panics
    /// When the database cannot be reached.
    pub async fn another_node(&self) -> Arc<dyn Store> {
        connect(&self.connect_options())
            .await
            .expect("the test database")
    }

    /// How a second node (or another process) opens this store's database, schema or file
    /// (on MySQL through [`TestStore::mysql_url_2`]).
    pub fn connect_options(&self) -> ConnectOptions {
        match (&self.schema, self.path()) {
            (Some(db), _) if self.store.backend() == Backend::MySql => ConnectOptions {
                url: crate::mysql::MySqlStore::url_with_database(&Self::mysql_url_2(), db),
                schema: None,
                max_connections: Some(self.max_connections),
                strict_commit: false,
            },
            (Some(schema), _) => ConnectOptions {
                url: Self::pg_url(),
                schema: Some(schema.clone()),
                max_connections: Some(self.max_connections),
                strict_commit: false,
            },
            (None, Some(path)) => ConnectOptions::new(format!("sqlite://{}", path.display())),
            (None, None) => unreachable!("a test store is PostgreSQL or a SQLite file"),
        }
    }

    /// The SQLite file (`None` on PostgreSQL).
    pub fn path(&self) -> Option<std::path::PathBuf> {
        self._dir.as_ref().map(|d| d.path().join("t.db"))
    }
}

type Case = (&'static str, fn(Bundle) -> BoxFuture<'static, ()>);

macro_rules! cases {
    ($($m:ident :: $f:ident),* $(,)?) => {
        &[ $( (stringify!($f), |b: Bundle| -> BoxFuture<'static, ()> { Box::pin($m::$f(b)) }) ),* ]
    };
}

const CASES: &[Case] = cases![
    tasks::insert_get_and_defaults,
    tasks::unique_keys,
    tasks::cancel_and_retry_by_hand,
    tasks::retry_of_exhausted_task_gets_one_more_attempt,
    tasks::prune_by_retention,
    tasks::bulk_insert_claim_complete,
    tasks::dashboard_reads_and_operator_actions,
    tasks::user_task_lists,
    tasks::task_update_under_lock,
    tasks::finished_tasks_leave_the_hot_table,
    tasks::bulk_count_and_delete,
    tasks::debounce_keeps_one_waiting_task,
    tasks::tags_filter_through_their_index,
    tasks::tag_pages_over_many_tasks,
    claims::claim_order_priority_run_at_id,
    claims::claim_by_kinds,
    claims::claims_follow_worker_labels,
    claims::claim_skips_what_it_must,
    claims::concurrency_key_limit,
    claims::queue_concurrency_limit,
    claims::exactly_once_under_concurrent_claimers,
    leases::leases_heartbeats_and_stale_tokens,
    leases::attempt_deadline,
    claims::claim_leases_follow_the_rule,
    claims::claims_take_one_statement_where_they_can,
    failures::rescue_retries_then_discards,
    failures::rescue_applies_only_what_it_read,
    maintenance::maintenance_leaves_waiting_tasks_to_claims,
    failures::fail_rules,
    failures::fail_rule_is_the_callers,
    failures::linear_backoff,
    failures::dead_letters_follow_discards,
    leases::run_log_of_every_attempt,
    leases::stages_hand_the_task_on,
    maintenance::tasks_survive_the_ring_turning,
    claims::released_claims_count_no_attempt,
    leases::completions_follow_the_lease_check,
    queues::queue_settings_round_trip,
    queues::counts_stay_exact,
    queues::history_of_minutes_depth_and_latency,
    nodes::node_registry,
    nodes::node_drain,
    nodes::worker_reports,
    processes::process_zombies_simple_repair_and_list,
    tokens::api_tokens,
    batches::batches_settle_once,
    batches::workflows_release_and_cancel,
    rate_limits::rate_limits_admit_at_claim,
    fair::fair_claims_take_partitions_in_turn,
    schedules::schedules_put_fire_pause_and_delete,
    notifications::notifications_sinks_and_listen,
    notifications::task_events_record_transitions,
    processes::process_commit_fail_import_and_remove,
    runs::durable_runs,
    runs::run_reports_together,
];

/// Every method of [`Store`] and its noun traits (`TaskStore`, `LeaseStore`, …), read from
/// their source (a file per noun), so a method added later is covered by the check without anyone listing it.
fn trait_methods() -> BTreeSet<&'static str> {
    let files: [&'static str; 14] = [
        include_str!("../lib.rs"),
        include_str!("../batches.rs"),
        include_str!("../rate_limits.rs"),
        include_str!("../tasks.rs"),
        include_str!("../leases.rs"),
        include_str!("../maintenance.rs"),
        include_str!("../queues.rs"),
        include_str!("../nodes.rs"),
        include_str!("../processes.rs"),
        include_str!("../notifications.rs"),
        include_str!("../schedules.rs"),
        include_str!("../audit.rs"),
        include_str!("../tokens.rs"),
        include_str!("../runs.rs"),
    ];
    let mut out = BTreeSet::new();
    for src in files {
        let mut rest = src;
        while let Some(start) = rest.find("\npub trait ") {
            let body = &rest[start..];
            let end = body.find("\n}\n").expect("the trait's end");
            let name = body["\npub trait ".len()..]
                .split([':', ' ', '{'])
                .next()
                .unwrap_or("");
            if name.ends_with("Store") {
                out.extend(body[..end].lines().filter_map(|l| {
                    let l = l.trim_start();
                    let l = l.strip_prefix("async ").unwrap_or(l);
                    let rest = l.strip_prefix("fn ")?;
                    Some(rest.split(['(', '<']).next().unwrap_or(rest))
                }));
            }
            rest = &body[end..];
        }
    }
    out
}

/// Runs every case on a fresh store from `make`, then checks that the cases called every
/// method of [`Store`].
///
/// # Panics
/// When a case fails (its name is printed first), or a method was never called.
pub async fn exercise<F, Fut>(make: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = TestStore>,
{
    let only = std::env::var("DOCKET_CONFORMANCE_CASE").ok();
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    for (name, case) in CASES {
        if only.as_deref().is_some_and(|o| !name.contains(o)) {
            continue;
        }
        let t = make().await;
        let store: Arc<dyn Store> = Arc::new(recording::Recording {
            inner: t.store.clone(),
            seen: seen.clone(),
            archive: t.store.backend() == Backend::MySql,
        });
        eprintln!("conformance: {name} on {:?}", t.store.backend());
        case(Bundle {
            store: store.clone(),
        })
        .await;
        store.close().await;
    }
    if only.is_some() {
        return;
    }
    let seen = seen
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let all = trait_methods();
    assert!(
        all.len() >= 64,
        "the store traits were not found in their files: {all:?}"
    );
    let missed: Vec<_> = all.into_iter().filter(|m| !seen.contains(m)).collect();
    assert!(
        missed.is_empty(),
        "the conformance suite never calls {missed:?}"
    );
}
