//! Nodes that start together on a fresh database migrate it once (issue 38): four stores open
//! the same new database at once and each runs the migrations — on MySQL/MariaDB through two
//! servers when `DOCKET_TEST_MYSQL_URL_2` names another (a Galera node: `GET_LOCK` would be one
//! node's, so both sides applied 0001), on PostgreSQL in one new schema, on SQLite in one new
//! file. Every migration is applied exactly once and every store works afterwards.

use docket_store::testing::TestStore;
use docket_store::{connect, ConnectOptions, Store};
use std::sync::Arc;

const NODES: usize = 4;

async fn together(opts: Vec<ConnectOptions>) -> Vec<Arc<dyn Store>> {
    let opened = futures::future::join_all(opts.iter().map(|o| async move {
        let s = connect(o).await.expect("the database opens");
        s.migrate().await.expect("migrations apply");
        s
    }))
    .await;
    for s in &opened {
        // Each node sees a migrated database: a plain read of a table the last migration has.
        s.queue_list().await.expect("a migrated database");
    }
    opened
}

fn files(backend: &str) -> usize {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(backend);
    std::fs::read_dir(dir).unwrap().count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mysql() {
    let db = format!("t_{}", uuid::Uuid::new_v4().simple());
    let hosts = [TestStore::mysql_url(), TestStore::mysql_url_2()];
    let opts = (0..NODES)
        .map(|i| ConnectOptions {
            url: docket_store::mysql::MySqlStore::url_with_database(&hosts[i % 2], &db),
            schema: None,
            max_connections: Some(2),
            strict_commit: false,
        })
        .collect();
    together(opts).await;
    let url = docket_store::mysql::MySqlStore::url_with_database(&hosts[0], &db);
    let pool = sqlx::MySqlPool::connect(&url).await.unwrap();
    let (rows, distinct): (i64, i64) =
        sqlx::query_as("SELECT count(*), count(DISTINCT version) FROM _sqlx_migrations")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(
        (rows, distinct),
        (files("mysql") as i64, files("mysql") as i64)
    );
    pool.close().await;
    docket_store::mysql::MySqlStore::drop_database(&hosts[0], &db)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres() {
    let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
    let opts = (0..NODES)
        .map(|_| ConnectOptions {
            url: TestStore::pg_url(),
            schema: Some(schema.clone()),
            max_connections: Some(2),
            strict_commit: false,
        })
        .collect();
    together(opts).await;
    let pool = sqlx::PgPool::connect(&TestStore::pg_url()).await.unwrap();
    let (rows, distinct): (i64, i64) = sqlx::query_as(&format!(
        "SELECT count(*), count(DISTINCT version) FROM \"{schema}\"._sqlx_migrations"
    ))
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        (rows, distinct),
        (files("postgres") as i64, files("postgres") as i64)
    );
    sqlx::query(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
        .execute(&pool)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    together(
        (0..NODES)
            .map(|_| ConnectOptions::new(url.clone()))
            .collect(),
    )
    .await;
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    let (rows, distinct): (i64, i64) =
        sqlx::query_as("SELECT count(*), count(DISTINCT version) FROM _sqlx_migrations")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(
        (rows, distinct),
        (files("sqlite") as i64, files("sqlite") as i64)
    );
}
