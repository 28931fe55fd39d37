//! Side tables (issue 43) on SQLite and MariaDB/MySQL. Tags: a list by tag reads
//! `docket_task_tags` (tag, task_id) kept by triggers: it holds a row per tag of every kept
//! task — across MariaDB's moves to `docket_tasks_done` and back — and none of a deleted task,
//! so it never outgrows the tasks. Debounce keys on MariaDB: `docket_debounce_waiting`
//! (migration 0018) names each key's waiting task, is taken over once that task stops waiting,
//! and loses a task's row when the task leaves `docket_tasks`.

use docket_core::{NewTask, TaskDefaults, TaskState};
use docket_store::testing::TestStore;
use docket_store::{
    Store, TaskDebounceParams, TaskInsertManyParams, TaskListParams, TaskRotateParams,
};
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
    assert_eq!(
        rotate(&s).await,
        docket_store::Rotation::Archived { moved: 30 }
    );
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
    // Pruned (from docket_tasks_done): their tags go.
    assert_eq!(prune(&s).await, 20);
    assert_eq!(mysql_rows(&mut db).await, 0);
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

async fn debounced(s: &Arc<dyn Store>, key: &str, n: i64) -> docket_core::Task {
    let now = chrono::Utc::now();
    let task = NewTask {
        debounce: Some(docket_core::debounce::Debounce {
            key: key.into(),
            period: Duration::from_secs(3600),
            max_wait: None,
        }),
        ..NewTask::new("d", json!(n))
    }
    .resolve(None, &TaskDefaults::default(), now)
    .unwrap();
    s.task_debounce(TaskDebounceParams { task, now })
        .await
        .unwrap()
}

async fn debounce_rows(db: &mut sqlx::MySqlConnection) -> Vec<(String, i64)> {
    sqlx::query_as(
        "SELECT CONVERT(waiting_key USING utf8mb4), task_id FROM docket_debounce_waiting \
         ORDER BY waiting_key",
    )
    .fetch_all(db)
    .await
    .unwrap()
}

async fn rotate(s: &Arc<dyn Store>) -> docket_store::Rotation {
    s.task_rotate(TaskRotateParams {
        now: chrono::Utc::now(),
        every: Duration::ZERO,
        min_fill_bytes: 0,
        idle_every: Duration::ZERO,
        lock_timeout: Duration::from_secs(5),
        batch: 1000,
        most_moved: i64::MAX,
    })
    .await
    .unwrap()
}

async fn prune(s: &Arc<dyn Store>) -> u64 {
    s.task_prune(docket_store::TaskPruneParams {
        now: docket_core::time::add(chrono::Utc::now(), Duration::from_secs(1)),
        retention_completed: Duration::ZERO,
        retention_failed: Duration::ZERO,
        limit: 1000,
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_debounce_rows_follow_their_tasks() {
    let t = TestStore::mysql().await;
    let s = t.store.clone();
    let url = TestStore::mysql_db_url(&t.schema.clone().unwrap());
    let mut db = sqlx::MySqlConnection::connect(&url).await.unwrap();
    // Plain tasks write nothing there.
    tagged(&s, 5).await;
    assert_eq!(debounce_rows(&mut db).await, vec![]);
    let a = debounced(&s, "a", 1).await;
    assert_eq!(debounced(&s, "a", 2).await.id, a.id);
    assert_eq!(debounce_rows(&mut db).await, vec![("a".into(), a.id)]);
    // A cancelled task no longer waits: the next enqueue makes a task and takes the row over.
    finish_all(&s, &[a.id]).await;
    let b = debounced(&s, "a", 3).await;
    assert_ne!(b.id, a.id);
    assert_eq!(b.inserted, Some(true));
    assert_eq!(debounce_rows(&mut db).await, vec![("a".into(), b.id)]);
    // Concurrent enqueues make one task, which the rest replaced: of a fresh key (the adds
    // race) and of a key whose row is stale (the take-overs race), a few times over.
    async fn burst(s: &Arc<dyn Store>, key: &str) -> i64 {
        let mut joins = vec![];
        for i in 1..=16 {
            let (s, key) = (s.clone(), key.to_string());
            joins.push(tokio::spawn(async move { debounced(&s, &key, i).await }));
        }
        let mut made = vec![];
        for j in joins {
            made.push(j.await.unwrap());
        }
        let answers: Vec<_> = made.iter().map(|t| (t.id, t.inserted)).collect();
        let created: Vec<_> = made.iter().filter(|t| t.inserted == Some(true)).collect();
        assert_eq!(created.len(), 1, "{key}: (id, inserted) {answers:?}");
        let id = created[0].id;
        assert!(made.iter().all(|t| t.id == id), "{key}: {answers:?}");
        id
    }
    let (mut d, mut cancelled) = (0, vec![a.id]);
    let mut stale_rows = vec![("a".to_string(), b.id)];
    for round in 0..4 {
        let key = format!("c{round}");
        let fresh = burst(&s, &key).await;
        finish_all(&s, &[fresh]).await;
        d = burst(&s, &key).await;
        assert_ne!(d, fresh);
        cancelled.push(fresh);
        stale_rows.push((key, d));
        if round < 3 {
            finish_all(&s, &[d]).await;
            cancelled.push(d);
        }
    }
    let waiting = s
        .task_list(TaskListParams {
            kind: Some("d".into()),
            states: vec![TaskState::Scheduled, TaskState::Available],
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut ids: Vec<_> = waiting.iter().map(|t| t.id).collect();
    ids.sort();
    assert_eq!(ids, vec![b.id, d], "one waiting task per key");
    // The rotation moves the cancelled tasks to docket_tasks_done: the rows stay (c0..c2's
    // name cancelled tasks, taken over by the next enqueue of their keys).
    assert_eq!(
        rotate(&s).await,
        docket_store::Rotation::Archived { moved: 8 }
    );
    assert_eq!(debounce_rows(&mut db).await, stale_rows);
    // Deleted tasks lose their rows; b's and d's stay.
    assert_eq!(
        s.task_delete(&cancelled).await.unwrap(),
        cancelled.len() as u64
    );
    assert_eq!(
        debounce_rows(&mut db).await,
        vec![("a".into(), b.id), ("c3".into(), d)]
    );
    // b cancelled, moved and pruned: its row goes with it.
    finish_all(&s, &[b.id]).await;
    assert_eq!(
        rotate(&s).await,
        docket_store::Rotation::Archived { moved: 1 }
    );
    assert_eq!(prune(&s).await, 1);
    assert_eq!(debounce_rows(&mut db).await, vec![("c3".into(), d)]);
}
