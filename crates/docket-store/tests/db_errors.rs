//! Database failures go through one mapping (`From<sqlx::Error> for StoreError`), checked
//! here with real errors of a real PostgreSQL, MariaDB and SQLite file: a unique violation is
//! `Conflict`, a missing row `NotFound`, a value the database refuses `InvalidData` (400 at the
//! API), a busy database `Retryable`, the rest `Unavailable` (503).

use docket_store::{DbErrorKind, StoreError};

fn kind(e: sqlx::Error) -> Option<DbErrorKind> {
    match StoreError::from(e) {
        // A unique violation becomes the store's own Conflict, the same as every other
        // constraint's kind.
        StoreError::Conflict(_) => Some(DbErrorKind::Conflict),
        other => other.db_kind(),
    }
}

#[tokio::test]
async fn postgres_errors_by_kind() {
    let url = std::env::var("DOCKET_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let pool = sqlx::PgPool::connect(&url)
        .await
        .expect("PostgreSQL is running");
    let e = sqlx::query("SELECT 1/0").execute(&pool).await.unwrap_err();
    assert_eq!(kind(e), Some(DbErrorKind::InvalidData));
    let e = sqlx::query("SELECT interval '1 millisecond' * 1e300")
        .execute(&pool)
        .await
        .unwrap_err();
    assert_eq!(
        kind(e),
        Some(DbErrorKind::InvalidData),
        "interval out of range"
    );
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("CREATE TEMP TABLE u (k int PRIMARY KEY)")
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::query("INSERT INTO u VALUES (1)")
        .execute(&mut *tx)
        .await
        .unwrap();
    let e = sqlx::query("INSERT INTO u VALUES (1)")
        .execute(&mut *tx)
        .await
        .unwrap_err();
    assert_eq!(kind(e), Some(DbErrorKind::Conflict));
    drop(tx);
    let e = sqlx::query("SELECT * FROM no_such_table_here")
        .execute(&pool)
        .await
        .unwrap_err();
    assert_eq!(kind(e), Some(DbErrorKind::Unavailable));
    assert_eq!(
        kind(sqlx::Error::PoolTimedOut),
        Some(DbErrorKind::Unavailable)
    );
    assert_eq!(StoreError::LeaseLost.db_kind(), None);
    let e = sqlx::query("SELECT 1 WHERE false")
        .fetch_one(&pool)
        .await
        .unwrap_err();
    assert!(matches!(StoreError::from(e), StoreError::NotFound(_)));
    let e = sqlx::query_scalar::<_, i64>("SELECT 'x'::text")
        .fetch_one(&pool)
        .await
        .unwrap_err();
    assert!(
        matches!(StoreError::from(e), StoreError::Corrupt(_)),
        "a column of the wrong type is corrupt data, not an outage"
    );
}

#[tokio::test]
async fn sqlite_errors_by_kind() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("e.db").display());
    let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
    sqlx::query("CREATE TABLE u (k int PRIMARY KEY)")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("INSERT INTO u VALUES (1)")
        .execute(&pool)
        .await
        .unwrap();
    let e = sqlx::query("INSERT INTO u VALUES (1)")
        .execute(&pool)
        .await
        .unwrap_err();
    assert_eq!(kind(e), Some(DbErrorKind::Conflict));
    // Another connection holds the write lock: busy, worth retrying.
    let mut a = pool.acquire().await.unwrap();
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut *a)
        .await
        .unwrap();
    let opts: sqlx::sqlite::SqliteConnectOptions = url.parse().unwrap();
    let other = sqlx::SqlitePool::connect_with(opts.busy_timeout(std::time::Duration::ZERO))
        .await
        .unwrap();
    let e = sqlx::query("BEGIN IMMEDIATE; INSERT INTO u VALUES (2)")
        .execute(&other)
        .await
        .unwrap_err();
    assert_eq!(kind(e), Some(DbErrorKind::Retryable));
    sqlx::query("ROLLBACK").execute(&mut *a).await.unwrap();
}

/// A stored value that does not decode is an error naming the row, not a default: an `errors`
/// column that is not a list, a time out of range.
async fn corrupt_rows_are_named(t: docket_store::testing::TestStore, raw: &str) {
    use docket_core::{NewTask, TaskDefaults};
    let now = chrono::Utc::now();
    let task = NewTask::new("k", serde_json::json!({}))
        .resolve(None, &TaskDefaults::default(), now)
        .unwrap();
    let inserted = t
        .store
        .task_insert_many(docket_store::TaskInsertManyParams {
            tasks: vec![task],
            now,
        })
        .await
        .unwrap();
    let id = inserted[0].id;
    let table = match &t.schema {
        Some(s) => format!("\"{s}\".docket_tasks"),
        None => "docket_tasks".into(),
    };
    let run = |sql: String| async move {
        if let Some(path) = raw.strip_prefix("sqlite://") {
            let pool = sqlx::SqlitePool::connect(&format!("sqlite://{path}"))
                .await
                .unwrap();
            sqlx::query(&sql).execute(&pool).await.unwrap();
        } else {
            let pool = sqlx::PgPool::connect(raw).await.unwrap();
            sqlx::query(&sql).execute(&pool).await.unwrap();
        }
    };
    let not_a_list = if t.schema.is_some() {
        "'{\"x\": 1}'::jsonb"
    } else {
        "'{\"x\": 1}'"
    };
    run(format!(
        "UPDATE {table} SET errors = {not_a_list} WHERE id = {id}"
    ))
    .await;
    let e = t.store.task_get(id).await.unwrap_err();
    assert!(
        matches!(&e, StoreError::Corrupt(m) if m.contains(&format!("task {id}")) && m.contains("errors")),
        "{e}"
    );
    if t.schema.is_none() {
        // SQLite keeps times as integers: one past chrono's range is not 1970.
        run(format!(
            "UPDATE {table} SET errors = '[]', run_at = 9223372036854775807 WHERE id = {id}"
        ))
        .await;
        let e = t.store.task_get(id).await.unwrap_err();
        assert!(
            matches!(&e, StoreError::Corrupt(m) if m.contains(&format!("task {id}")) && m.contains("run_at")),
            "{e}"
        );
    }
}

#[tokio::test]
async fn corrupt_rows_on_postgres() {
    let t = docket_store::testing::TestStore::postgres().await;
    corrupt_rows_are_named(t, &docket_store::testing::TestStore::pg_url()).await;
}

#[tokio::test]
async fn corrupt_rows_on_sqlite() {
    let t = docket_store::testing::TestStore::sqlite().await;
    let path = t.path().expect("a file").display().to_string();
    corrupt_rows_are_named(t, &format!("sqlite://{path}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_errors_by_kind() {
    use sqlx::Connection;
    let t = docket_store::testing::TestStore::mysql().await;
    let url = docket_store::testing::TestStore::mysql_db_url(t.schema.as_deref().unwrap());
    let pool = sqlx::MySqlPool::connect(&url).await.unwrap();
    sqlx::query("CREATE TABLE u (k INT PRIMARY KEY, small TINYINT)")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("INSERT INTO u VALUES (1, 0), (2, 0)")
        .execute(&pool)
        .await
        .unwrap();
    let e = sqlx::query("INSERT INTO u VALUES (1, 0)")
        .execute(&pool)
        .await
        .unwrap_err();
    assert_eq!(kind(e), Some(DbErrorKind::Conflict));
    let e = sqlx::query("UPDATE u SET small = 1000 WHERE k = 1")
        .execute(&pool)
        .await
        .unwrap_err();
    assert_eq!(kind(e), Some(DbErrorKind::InvalidData), "out of range");
    let e = sqlx::query("SELECT * FROM no_such_table_here")
        .execute(&pool)
        .await
        .unwrap_err();
    assert_eq!(kind(e), Some(DbErrorKind::Unavailable));
    let e = sqlx::query("SELECT 1 FROM u WHERE false")
        .fetch_one(&pool)
        .await
        .unwrap_err();
    assert!(matches!(StoreError::from(e), StoreError::NotFound(_)));
    // Two transactions locking rows in opposite orders: InnoDB kills one (1213, SQLSTATE
    // 40001), which is worth retrying.
    let mut a = sqlx::MySqlConnection::connect(&url).await.unwrap();
    let mut b = sqlx::MySqlConnection::connect(&url).await.unwrap();
    let mut ta = a.begin().await.unwrap();
    let mut tb = b.begin().await.unwrap();
    sqlx::query("UPDATE u SET small = 1 WHERE k = 1")
        .execute(&mut *ta)
        .await
        .unwrap();
    sqlx::query("UPDATE u SET small = 1 WHERE k = 2")
        .execute(&mut *tb)
        .await
        .unwrap();
    let (ra, rb) = tokio::join!(
        sqlx::query("UPDATE u SET small = 2 WHERE k = 2").execute(&mut *ta),
        async {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            sqlx::query("UPDATE u SET small = 2 WHERE k = 1")
                .execute(&mut *tb)
                .await
        }
    );
    let e = ra
        .err()
        .or(rb.err())
        .expect("one of them is the deadlock victim");
    assert_eq!(kind(e), Some(DbErrorKind::Retryable));
}

#[tokio::test]
async fn corrupt_rows_on_mysql() {
    let t = docket_store::testing::TestStore::mysql().await;
    let db = t.schema.clone().unwrap();
    let now = chrono::Utc::now();
    let task = docket_core::NewTask::new("k", serde_json::json!({}))
        .resolve(None, &docket_core::TaskDefaults::default(), now)
        .unwrap();
    let id = t
        .store
        .task_insert_many(docket_store::TaskInsertManyParams {
            tasks: vec![task],
            now,
        })
        .await
        .unwrap()[0]
        .id;
    let pool = sqlx::MySqlPool::connect(&docket_store::testing::TestStore::mysql_db_url(&db))
        .await
        .unwrap();
    sqlx::query(&format!(
        "UPDATE docket_tasks SET errors = '{{\"x\": 1}}' WHERE id = {id}"
    ))
    .execute(&pool)
    .await
    .unwrap();
    let e = t.store.task_get(id).await.unwrap_err();
    assert!(
        matches!(&e, StoreError::Corrupt(m) if m.contains(&format!("task {id}")) && m.contains("errors")),
        "{e}"
    );
}
