//! PostgreSQL keeps finished tasks out of the hot table (migration 0020): `docket_tasks` is
//! partitioned by state into `docket_tasks_live` and `docket_tasks_done`. Checked here on a real
//! PostgreSQL: where rows land as they move through their states, and that a call waiting for a
//! row that another transaction moves between partitions goes again instead of failing. And
//! the ring of slots of the live partition (migration 0021): a turn frees a slot's space while
//! a snapshot is held open, loses no task, and gives way to a transaction that read the table.

use docket_core::{NewTask, TaskDefaults, TaskState};
use docket_store::testing::TestStore;
use docket_store::{
    LeaseOutcome, Rotation, Store, StoreError, TaskCancelParams, TaskClaimParams, TaskComplete,
    TaskCompleteManyParams, TaskInsertManyParams, TaskRetryParams, TaskRotateParams,
    TaskUpdateParams,
};
use serde_json::json;
use std::time::Duration;

async fn raw(t: &TestStore) -> sqlx::PgPool {
    let schema = t.schema.clone().expect("a PostgreSQL schema");
    sqlx::postgres::PgPoolOptions::new()
        .max_connections(3)
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
        labels: Default::default(),
        queue: "default".into(),
        worker: "w".into(),
        node: "n".into(),
        limit,
        lease: None,
        kinds: None,
        stages: None,
        now: chrono::Utc::now(),
        nonce: None,
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
    // A fresh database hands out ids from 1 (0020's sequence continues the old identity).
    assert_eq!(ids, vec![1, 2, 3]);
    // Available when inserted: the current ring slot (0021), 1 on a fresh database.
    for id in &ids {
        assert_eq!(partition_of(&pool, *id).await, "docket_tasks_live_1");
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
    assert_eq!(partition_of(&pool, ids[2]).await, "docket_tasks_live_1");
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
    assert_eq!(partition_of(&pool, ids[1]).await, "docket_tasks_live_1");
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

async fn turn(s: &dyn Store, lock_timeout_ms: u64) -> Rotation {
    s.task_rotate(TaskRotateParams {
        now: chrono::Utc::now(),
        every: Duration::ZERO,
        min_fill_bytes: 0,
        idle_every: Duration::ZERO,
        lock_timeout: Duration::from_millis(lock_timeout_ms),
        batch: 1000,
        most_moved: i64::MAX,
    })
    .await
    .unwrap()
}

async fn ring_bytes(pool: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar(
        "SELECT sum(pg_relation_size(relid))::int8 FROM pg_partition_tree('docket_tasks_live') \
         WHERE isleaf AND relid::text <> 'docket_tasks_live_0'",
    )
    .fetch_one(pool)
    .await
    .unwrap()
}

/// The point of the ring: while another transaction holds an old snapshot (VACUUM could free
/// nothing), four turns empty the slot the finished tasks left their dead rows in; the tasks
/// still waiting move to slot 0 and keep their state.
#[tokio::test]
async fn turning_the_ring_frees_its_slots_under_a_held_snapshot() {
    let t = TestStore::postgres().await;
    let s = &*t.store;
    let pool = raw(&t).await;
    let mut snapshot = pool.begin().await.unwrap();
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut *snapshot)
        .await
        .unwrap();
    sqlx::query("SELECT 1")
        .execute(&mut *snapshot)
        .await
        .unwrap();

    let ids = insert(s, 300).await;
    let got = claim(s, 200).await;
    let items: Vec<TaskComplete> = got
        .iter()
        .map(|c| TaskComplete {
            id: c.id,
            token: c.lease.as_ref().unwrap().token.clone(),
            result: json!("ok"),
            next: None,
        })
        .collect();
    s.task_complete_many(TaskCompleteManyParams {
        items: &items,
        now: chrono::Utc::now(),
        fail_rule: docket_core::task::standard_fail_rule,
    })
    .await
    .unwrap();
    let before = ring_bytes(&pool).await;
    assert!(before > 0);
    let mut moved = 0;
    for want in [2, 3, 4, 1] {
        match turn(s, 5000).await {
            Rotation::Turned { slot, moved: m, .. } => {
                assert_eq!(slot, want);
                moved += m;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(moved, 100, "the 100 tasks never claimed");
    assert_eq!(ring_bytes(&pool).await, 0, "was {before} bytes");
    for id in &ids[200..] {
        assert_eq!(partition_of(&pool, *id).await, "docket_tasks_live_0");
    }
    let done: i64 =
        sqlx::query_scalar("SELECT count(*) FROM docket_tasks WHERE state = 'completed'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(done, 200);
    assert_eq!(claim(s, 1000).await.len(), 100);
    snapshot.rollback().await.unwrap();
}

/// TRUNCATE needs the slot to itself. A transaction that read `docket_tasks` (and holds its
/// lock until it ends) makes the turn give up after `lock_timeout`: the slot is not truncated and
/// the ring does not turn; once the reader ends, the turn goes through.
#[tokio::test]
async fn a_turn_gives_way_to_an_open_reader() {
    let t = TestStore::postgres().await;
    let s = &*t.store;
    let pool = raw(&t).await;
    let id = insert(s, 1).await[0];
    for want in [2, 3, 4] {
        assert!(
            matches!(turn(s, 5000).await, Rotation::Turned { slot, truncated: false, .. } if slot == want)
        );
    }
    let mut reader = pool.begin().await.unwrap();
    sqlx::query("SELECT count(*) FROM docket_tasks")
        .execute(&mut *reader)
        .await
        .unwrap();
    let t0 = std::time::Instant::now();
    assert_eq!(turn(s, 200).await, Rotation::Blocked);
    assert!(t0.elapsed() >= Duration::from_millis(200));
    // The task left in the slot moved before the lock was asked for (row locks only).
    assert_eq!(partition_of(&pool, id).await, "docket_tasks_live_0");
    let current: i16 = sqlx::query_scalar("SELECT current FROM docket_task_slots")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(current, 4);
    reader.commit().await.unwrap();
    assert_eq!(
        turn(s, 5000).await,
        Rotation::Turned {
            slot: 1,
            moved: 0,
            truncated: true
        }
    );
    assert_eq!(claim(s, 10).await[0].id, id);
}

/// A deleted ring row (by hand) loses nothing: inserts fall back to slot 0, the next turn puts
/// the row back, and the ring goes on.
#[tokio::test]
async fn a_deleted_ring_row_is_put_back() {
    let t = TestStore::postgres().await;
    let s = &*t.store;
    let pool = raw(&t).await;
    sqlx::query("DELETE FROM docket_task_slots")
        .execute(&pool)
        .await
        .unwrap();
    let id = insert(s, 1).await[0];
    assert_eq!(partition_of(&pool, id).await, "docket_tasks_live_0");
    assert_eq!(turn(s, 5000).await, Rotation::NotDue);
    assert!(matches!(
        turn(s, 5000).await,
        Rotation::Turned { slot: 2, .. }
    ));
    let next = insert(s, 1).await[0];
    assert_eq!(partition_of(&pool, next).await, "docket_tasks_live_2");
    assert_eq!(claim(s, 10).await.len(), 2);
}

/// The plan of claim statement `name` (`claim_candidates`, or `claim_fast`: the one-statement
/// claim, whose connections hold the same settings for their session) in a transaction that
/// ran `settings` first.
async fn claim_plan(pool: &sqlx::PgPool, settings: &str, name: &str) -> String {
    let mut tx = pool.begin().await.unwrap();
    sqlx::raw_sql(settings).execute(&mut *tx).await.unwrap();
    let sql = format!(
        "EXPLAIN (FORMAT JSON) {}",
        docket_store::postgres::statement("leases", name)
    );
    let mut q = sqlx::query_scalar(&sql)
        .bind("default")
        .bind("n")
        .bind(chrono::Utc::now())
        .bind(1000_i64)
        .bind(None::<Vec<String>>)
        .bind(None::<Vec<String>>);
    if name == "claim_fast" {
        q = q
            .bind(None::<i64>)
            .bind("w")
            .bind(uuid::Uuid::new_v4())
            .bind(i64::MAX);
    } else {
        // Any kind, any stage.
        q = q.bind(true).bind(true);
    }
    // A claim without worker labels (issue 43).
    q = q.bind(serde_json::json!({}));
    let plan: serde_json::Value = q.fetch_one(&mut *tx).await.unwrap();
    tx.rollback().await.unwrap();
    plan.to_string()
}

/// The ring's slots have autovacuum (and so auto-analyze) off; after a manual ANALYZE saw them
/// empty, the planner took a slot's backlog for a few rows and sorted all of it for every claim
/// (30–35k tasks/s instead of ~52k at `docket bench --preload-finished 1000000 --settle`).
/// Claims run with `HOT_PATH_SETTINGS` and read the claim index in order instead.
#[tokio::test]
async fn a_claim_reads_the_claim_index_in_order_after_an_analyze() {
    let t = TestStore::postgres().await;
    let s = &*t.store;
    let pool = raw(&t).await;
    // Statistics of empty slots, then a backlog in the current one.
    sqlx::raw_sql("ANALYZE docket_tasks")
        .execute(&pool)
        .await
        .unwrap();
    let ids = insert(s, 5000).await;
    for name in ["claim_candidates", "claim_fast"] {
        let sorted = claim_plan(&pool, "SET LOCAL enable_sort = on", name).await;
        assert!(
            sorted.contains("\"Node Type\":\"Sort\""),
            "{name}: the hazard this guards against is not reproduced: {sorted}"
        );
        let plan = claim_plan(&pool, docket_store::postgres::HOT_PATH_SETTINGS, name).await;
        assert!(!plan.contains("\"Node Type\":\"Sort\""), "{name}: {plan}");
        assert!(
            plan.contains("\"Node Type\":\"Merge Append\""),
            "{name}: {plan}"
        );
    }
    // And the store's claim takes the oldest tasks first.
    let got = claim(s, 10).await;
    assert_eq!(got.iter().map(|t| t.id).collect::<Vec<_>>(), ids[..10]);
}

/// Advisory locks are the database's: the ring's lock is keyed by schema, so a turn running in
/// one docket schema does not make another schema's turn skip (before, it answered `NotDue`
/// whenever another docket on the database turned its ring at the same moment).
#[tokio::test]
async fn a_turn_in_another_schema_does_not_hold_this_one() {
    let (a, b) = (TestStore::postgres().await, TestStore::postgres().await);
    insert(&*b.store, 3).await;
    let pool = raw(&a).await;
    let mut other = pool.begin().await.unwrap();
    let held: bool = sqlx::query_scalar(
        "SELECT pg_try_advisory_xact_lock(hashtextextended(current_schema() || ':docket-rotate', 0))",
    )
    .fetch_one(&mut *other)
    .await
    .unwrap();
    assert!(held, "schema a's ring lock");
    assert!(
        matches!(turn(&*b.store, 5000).await, Rotation::Turned { .. }),
        "schema b turns while schema a holds its own ring lock"
    );
    // The same schema's turn still gives way.
    assert_eq!(turn(&*a.store, 5000).await, Rotation::NotDue);
    other.commit().await.unwrap();
}
