//! PostgreSQL keeps finished tasks out of the hot table (migration 0020): `docket_tasks` is
//! partitioned by state into `docket_tasks_live` and `docket_tasks_done`. Checked here on a real
//! PostgreSQL: where rows land as they move through their states, and that a call waiting for a
//! row that another transaction moves between partitions goes again instead of failing.

use docket_core::{NewTask, TaskDefaults, TaskState};
use docket_store::testing::TestStore;
use docket_store::{
    LeaseOutcome, Store, StoreError, TaskCancelParams, TaskClaimParams, TaskComplete,
    TaskCompleteManyParams, TaskInsertManyParams, TaskRetryParams, TaskUpdateParams,
};
use serde_json::json;
use std::time::Duration;

async fn raw(t: &TestStore) -> sqlx::PgPool {
    let schema = t.schema.clone().expect("a PostgreSQL schema");
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .after_connect(move |c, _| {
            let schema = schema.clone();
            Box::pin(async move {
                sqlx::query(&format!("SET search_path TO \"{schema}\""))
                    .execute(c)
                    .await
                    .map(|_| ())
            })
        })
        .connect(&TestStore::pg_url())
        .await
        .expect("PostgreSQL is running")
}

async fn insert(s: &dyn Store, n: usize) -> Vec<i64> {
    let now = chrono::Utc::now();
    let tasks = (0..n)
        .map(|i| {
            NewTask::new("k", json!({ "i": i }))
                .resolve(None, &TaskDefaults::default(), now)
                .unwrap()
        })
        .collect();
    s.task_insert_many(TaskInsertManyParams { tasks, now })
        .await
        .unwrap()
        .iter()
        .map(|t| t.id)
        .collect()
}

async fn claim(s: &dyn Store, limit: i64) -> Vec<docket_core::Task> {
    s.task_claim(TaskClaimParams {
        queue: "default".into(),
        worker: "w".into(),
        node: "n".into(),
        limit,
        lease: None,
        kinds: None,
        stages: None,
        now: chrono::Utc::now(),
    })
    .await
    .unwrap()
}

async fn partition_of(pool: &sqlx::PgPool, id: i64) -> String {
    sqlx::query_scalar("SELECT tableoid::regclass::text FROM docket_tasks WHERE id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn finished_tasks_move_to_their_own_partition_and_back() {
    let t = TestStore::postgres().await;
    let s = &*t.store;
    let pool = raw(&t).await;
    let ids = insert(s, 3).await;
    for id in &ids {
        assert_eq!(partition_of(&pool, *id).await, "docket_tasks_live");
    }
    let c = claim(s, 1).await;
    assert_eq!(c[0].id, ids[0]);
    let out = s
        .task_complete_many(TaskCompleteManyParams {
            items: &[TaskComplete {
                id: c[0].id,
                token: c[0].lease.as_ref().unwrap().token.clone(),
                result: json!("ok"),
                next: None,
            }],
            now: chrono::Utc::now(),
            fail_rule: docket_core::task::standard_fail_rule,
        })
        .await
        .unwrap();
    assert!(matches!(out[0], LeaseOutcome::Ok { .. }), "{out:?}");
    assert_eq!(partition_of(&pool, ids[0]).await, "docket_tasks_done");
    s.task_cancel(TaskCancelParams {
        id: ids[1],
        now: chrono::Utc::now(),
    })
    .await
    .unwrap();
    assert_eq!(partition_of(&pool, ids[1]).await, "docket_tasks_done");
    assert_eq!(partition_of(&pool, ids[2]).await, "docket_tasks_live");
    // Read back through the one table name, whichever partition holds the row.
    let done = s.task_get(ids[0]).await.unwrap().unwrap();
    assert_eq!(
        (done.state, done.result),
        (TaskState::Completed, Some(json!("ok")))
    );
    // A retried task comes back to the live partition and can be claimed again.
    let back = s
        .task_retry(TaskRetryParams {
            id: ids[1],
            now: chrono::Utc::now(),
        })
        .await
        .unwrap();
    assert_eq!(back.state, TaskState::Available);
    assert_eq!(partition_of(&pool, ids[1]).await, "docket_tasks_live");
    let mut got: Vec<i64> = claim(s, 10).await.iter().map(|t| t.id).collect();
    got.sort_unstable();
    assert_eq!(got, vec![ids[1], ids[2]]);
    // New ids keep counting past every id ever handed out.
    let next = insert(s, 1).await[0];
    assert!(next > ids[2], "{next} after {}", ids[2]);
}

/// The race the retry exists for: a call is blocked on a task's row while another transaction
/// finishes the task (moving the row to `docket_tasks_done`). On one table the call re-read
/// the row; across partitions PostgreSQL fails it with 40001. The store goes again and the
/// call answers from the row as it is now — never with a database error.
#[tokio::test]
async fn a_call_waiting_for_a_row_moved_meanwhile_goes_again() {
    let t = TestStore::postgres().await;
    let s = t.store.clone();
    let pool = raw(&t).await;
    let ids = insert(&*s, 2).await;

    // 1. An update of a waiting task that another session cancels meanwhile.
    let mut other = pool.begin().await.unwrap();
    sqlx::query("UPDATE docket_tasks SET state = 'cancelled', finished_at = now() WHERE id = $1")
        .bind(ids[0])
        .execute(&mut *other)
        .await
        .unwrap();
    let s2 = s.clone();
    let id = ids[0];
    let update = tokio::spawn(async move {
        s2.task_update(TaskUpdateParams {
            id,
            rule: std::sync::Arc::new(|t, _| {
                if t.state.is_finished() {
                    return Err(StoreError::InvalidState(format!("task is {}", t.state)));
                }
                let mut n = t.clone();
                n.priority = 7;
                Ok(n)
            }),
        })
        .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!update.is_finished(), "the update waits for the row lock");
    other.commit().await.unwrap();
    let e = update.await.unwrap().unwrap_err();
    assert!(
        matches!(&e, StoreError::InvalidState(m) if m.contains("cancelled")),
        "{e:?}"
    );

    // 2. A completion of a running task that another session discards meanwhile.
    let c = claim(&*s, 1).await;
    assert_eq!(c[0].id, ids[1]);
    let mut other = pool.begin().await.unwrap();
    sqlx::query("UPDATE docket_tasks SET state = 'discarded', finished_at = now() WHERE id = $1")
        .bind(ids[1])
        .execute(&mut *other)
        .await
        .unwrap();
    let s2 = s.clone();
    let item = TaskComplete {
        id: ids[1],
        token: c[0].lease.as_ref().unwrap().token.clone(),
        result: json!(1),
        next: None,
    };
    let complete = tokio::spawn(async move {
        s2.task_complete_many(TaskCompleteManyParams {
            items: &[item],
            now: chrono::Utc::now(),
            fail_rule: docket_core::task::standard_fail_rule,
        })
        .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !complete.is_finished(),
        "the completion waits for the row lock"
    );
    other.commit().await.unwrap();
    let out = complete.await.unwrap().unwrap();
    assert!(
        !matches!(out[0], LeaseOutcome::Ok { .. }),
        "a discarded task is not completed: {out:?}"
    );
    let t1 = s.task_get(ids[1]).await.unwrap().unwrap();
    assert_eq!(t1.state, TaskState::Discarded);
}
