//! The conformance suite (`docket_store::testing`) on every backend: each case on its own
//! PostgreSQL schema, MySQL/MariaDB database or SQLite file, and every method of `Store` called.

use docket_store::testing::{exercise, TestStore};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres() {
    exercise(TestStore::postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite() {
    exercise(TestStore::sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql() {
    exercise(TestStore::mysql).await;
}
