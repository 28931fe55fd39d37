//! Database failures are classified by kind ([`StoreError::db_kind`]) from real errors of a real
//! PostgreSQL and a real SQLite file, so the API answers a value the database refuses with 400
//! and a constraint with 409 instead of 503 for everything.

use docket_store::{DbErrorKind, StoreError};

fn kind(e: sqlx::Error) -> Option<DbErrorKind> {
    StoreError::Database(e).db_kind()
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
}
