//! MariaDB/MySQL keeps finished tasks in `docket_tasks_done` (migration 0004), moved there by
//! the rotation. A change to a finished task (PATCH, retry, cancel) that meets a move in flight
//! must still find the task: its locked read waits for the move and then looks where the task
//! went. It answered "not found" (404) before (seen in the API tests on a busy machine).

use docket_core::Task;
use docket_store::testing::TestStore;
use docket_store::{StoreError, TaskUpdateParams};
use serde_json::json;
use sqlx::Connection;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_meeting_a_move_in_flight_finds_the_task() {
    let t = TestStore::mysql().await;
    let s = t.store.clone();
    let now = chrono::Utc::now();
    let n = docket_core::NewTask::new("k", json!({}));
    let r = n
        .resolve(None, &docket_core::TaskDefaults::default(), now)
        .unwrap();
    let id = s
        .task_insert_many(docket_store::TaskInsertManyParams {
            tasks: vec![r],
            now,
        })
        .await
        .unwrap()[0]
        .id;
    let db = t.schema.clone().unwrap();
    let url = TestStore::mysql_db_url(&db);
    let mut side = sqlx::MySqlConnection::connect(&url).await.unwrap();
    sqlx::query("UPDATE docket_tasks SET state = 'completed', finished_at = NOW(6) WHERE id = ?")
        .bind(id)
        .execute(&mut side)
        .await
        .unwrap();
    let cols: String = sqlx::query_scalar(
        "SELECT GROUP_CONCAT(column_name ORDER BY ordinal_position) FROM information_schema.columns \
         WHERE table_schema = DATABASE() AND table_name = 'docket_tasks_done'",
    )
    .fetch_one(&mut side)
    .await
    .unwrap();
    // A move as the rotation makes it (the task locked by id first, then copied and deleted),
    // under way when the update starts.
    let mut tx = side.begin().await.unwrap();
    sqlx::query("SELECT id FROM docket_tasks WHERE id = ? FOR UPDATE")
        .bind(id)
        .execute(&mut *tx)
        .await
        .unwrap();
    let update = tokio::spawn({
        let s = s.clone();
        async move {
            s.task_update(TaskUpdateParams {
                id,
                rule: std::sync::Arc::new(|t: &Task, _| {
                    Err(StoreError::Invalid(format!("{} is {}", t.id, t.state)))
                }),
            })
            .await
        }
    });
    // The update is waiting for the move's lock by now (or has not reached it yet: either way
    // it must find the task once the move commits).
    tokio::time::sleep(Duration::from_millis(500)).await;
    sqlx::query(&format!(
        "INSERT INTO docket_tasks_done ({cols}) SELECT {cols} FROM docket_tasks WHERE id = ?"
    ))
    .bind(id)
    .execute(&mut *tx)
    .await
    .unwrap();
    sqlx::query("DELETE FROM docket_tasks WHERE id = ?")
        .bind(id)
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    match update.await.unwrap() {
        Err(StoreError::Invalid(m)) => assert_eq!(m, format!("{id} is completed")),
        other => panic!("the rule must see the finished task: {other:?}"),
    }
    let got = s.task_get(id).await.unwrap().expect("the task is kept");
    assert_eq!(got.state, docket_core::TaskState::Completed);
}
