//! Tags' side table (issue 43) on SQLite and MariaDB/MySQL, where a list by tag reads
//! `docket_task_tags` (tag, task_id) kept by triggers: it holds a row per tag of every kept
//! task — across MariaDB's moves to `docket_tasks_done` and back — and none of a deleted task,
//! so it never outgrows the tasks.

use docket_core::{NewTask, TaskDefaults, TaskState};
use docket_store::testing::TestStore;
use docket_store::{Store, TaskInsertManyParams, TaskListParams, TaskRotateParams};
use serde_json::json;
use sqlx::Connection;
use std::sync::Arc;
use std::time::Duration;

async fn tagged(s: &Arc<dyn Store>, n: usize) -> Vec<i64> {
    let now = chrono::Utc::now();
    let tasks = (0..n)
        .map(|i| {
            NewTask {
                tags: vec![format!("t{i}"), "all".into()],
                ..NewTask::new("k", json!(i))
            }
            .resolve(None, &TaskDefaults::default(), now)
            .unwrap()
        })
        .collect();
    s.task_insert_many(TaskInsertManyParams { tasks, now })
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.id)
        .collect()
}

async fn finish_all(s: &Arc<dyn Store>, ids: &[i64]) {
    for id in ids {
        s.task_cancel(docket_store::TaskCancelParams {
            id: *id,
            now: chrono::Utc::now(),
        })
        .await
        .unwrap();
    }
}

async fn mysql_rows(db: &mut sqlx::MySqlConnection) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM docket_task_tags")
        .fetch_one(db)
        .await
        .unwrap()
}

async fn sqlite_rows(db: &mut sqlx::SqliteConnection) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM docket_task_tags")
        .fetch_one(db)
        .await
        .unwrap()
}

async fn listed(s: &Arc<dyn Store>, tag: &str) -> usize {
    s.task_list(TaskListParams {
        tag: Some(tag.into()),
        limit: 1000,
        ..Default::default()
    })
    .await
    .unwrap()
    .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_side_table_follows_moves_and_deletes() {
    let t = TestStore::mysql().await;
    let s = t.store.clone();
    let ids = tagged(&s, 30).await;
    let url = TestStore::mysql_db_url(&t.schema.clone().unwrap());
    let mut db = sqlx::MySqlConnection::connect(&url).await.unwrap();
    assert_eq!(mysql_rows(&mut db).await, 60);
    finish_all(&s, &ids).await;
    // The rotation moves the cancelled tasks to docket_tasks_done (insert there, then delete
    // here): their tags stay.
    let moved = s
        .task_rotate(TaskRotateParams {
            now: chrono::Utc::now(),
            every: Duration::ZERO,
            min_fill_bytes: 0,
            idle_every: Duration::ZERO,
            lock_timeout: Duration::from_secs(5),
            batch: 1000,
            most_moved: i64::MAX,
        })
        .await
        .unwrap();
    assert_eq!(moved, docket_store::Rotation::Archived { moved: 30 });
    let done: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM docket_tasks_done")
        .fetch_one(&mut db)
        .await
        .unwrap();
    assert_eq!(done, 30);
    assert_eq!(mysql_rows(&mut db).await, 60);
    assert_eq!(listed(&s, "all").await, 30);
    // A retry brings one back to docket_tasks (and deletes it there): its tags stay.
    let back = s
        .task_retry(docket_store::TaskRetryParams {
            id: ids[0],
            now: chrono::Utc::now(),
        })
        .await
        .unwrap();
    assert_eq!(back.state, TaskState::Available);
    assert_eq!(mysql_rows(&mut db).await, 60);
    assert_eq!(listed(&s, "t0").await, 1);
    // Deleted: their tags go.
    finish_all(&s, &ids[..1]).await;
    assert_eq!(s.task_delete(&ids[..10]).await.unwrap(), 10);
    assert_eq!(mysql_rows(&mut db).await, 40);
    assert_eq!(listed(&s, "all").await, 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_side_table_follows_deletes() {
    let t = TestStore::sqlite().await;
    let s = t.store.clone();
    let ids = tagged(&s, 30).await;
    let url = format!("sqlite://{}", t.path().unwrap().display());
    let mut db = sqlx::SqliteConnection::connect(&url).await.unwrap();
    assert_eq!(sqlite_rows(&mut db).await, 60);
    finish_all(&s, &ids).await;
    assert_eq!(s.task_delete(&ids[..10]).await.unwrap(), 10);
    assert_eq!(sqlite_rows(&mut db).await, 40);
    assert_eq!(listed(&s, "all").await, 20);
}
