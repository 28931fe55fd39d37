//! Bulk actions (issue 27) on every backend: asked on one node and worked by whichever of two
//! claims it, exactly once over 1,200 tasks; tasks enqueued after the ask are not touched; a
//! bulk action whose node died goes on from its saved cursor on another node; the queues'
//! kept counts (`GET /v1/queues`) agree with the tasks after each.

use docket_core::bulk::{BulkAction, BulkFilter, BulkProgress, QUEUE};
use docket_core::{NewTask, SystemClock, TaskState};
use docket_engine::{Claim, Engine, EngineConfig};
use docket_store::testing::TestStore;
use docket_store::TaskListParams;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

fn engine(store: Arc<dyn docket_store::Store>, node: &str) -> Engine {
    let mut cfg = EngineConfig::new(node, store.backend());
    cfg.rescue_interval = Duration::from_millis(200);
    Engine::new(store, Arc::new(SystemClock), cfg)
}

async fn enqueue(e: &Engine, queue: &str, n: usize) -> Vec<i64> {
    let tasks = (0..n)
        .map(|i| NewTask {
            queue: Some(queue.into()),
            ..NewTask::new("k", json!(i))
        })
        .collect();
    e.enqueue_many(tasks)
        .await
        .unwrap()
        .iter()
        .map(|t| t.id)
        .collect()
}

async fn states(e: &Engine, queue: &str) -> std::collections::BTreeMap<TaskState, usize> {
    let mut out = std::collections::BTreeMap::new();
    let mut after = None;
    loop {
        let page = e
            .task_list(TaskListParams {
                queue: Some(queue.into()),
                after,
                limit: 1000,
                ..Default::default()
            })
            .await
            .unwrap();
        for t in &page {
            *out.entry(t.state).or_default() += 1;
        }
        if page.len() < 1000 {
            return out;
        }
        after = page.last().map(|t| t.id);
    }
}

async fn finished(e: &Engine, id: i64) -> docket_core::bulk::BulkJob {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let j = e.bulk_get(id).await.unwrap().expect("a bulk action");
        if j.state.is_finished() {
            return j;
        }
        assert!(Instant::now() < deadline, "not finished: {j:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn in_queue(q: &str) -> BulkFilter {
    BulkFilter {
        queue: Some(q.into()),
        ..Default::default()
    }
}

async fn bulk_on_two_nodes(db: TestStore) {
    let a = engine(db.store.clone(), "n1");
    let b = engine(db.another_node().await, "n2");
    // Asked before any node runs: the tasks enqueued after the ask stay as they are.
    enqueue(&a, "q", 1200).await;
    let first = a
        .bulk_start("test", in_queue("q"), BulkAction::Cancel)
        .await
        .unwrap();
    assert_eq!((first.total, first.more), (1200, false));
    let late = enqueue(&b, "q", 3).await;
    // A second one, which a node claims and then dies after its first batch: held here by
    // hand (short leases), its progress written as after a batch of the first 500 ids, which
    // this "node" left as they were.
    let ids = enqueue(&a, "r", 700).await;
    let second = b
        .bulk_start("test", in_queue("r"), BulkAction::Cancel)
        .await
        .unwrap();
    let never = CancellationToken::new();
    let held = a
        .claim(
            &Claim::new(QUEUE, "dying", 2)
                .lease(Duration::from_millis(800))
                .wait(Duration::from_millis(50)),
            &never,
        )
        .await
        .unwrap();
    assert_eq!(held.len(), 2, "both bulk actions held");
    let h = held.iter().find(|t| t.id == second.id).unwrap();
    let progress = BulkProgress {
        after: ids[499],
        done: 500,
        skipped: 0,
    };
    a.heartbeat(
        h.id,
        h.lease.as_ref().unwrap().token.clone(),
        Some(serde_json::to_value(&progress).unwrap()),
        Some(Duration::from_millis(800)),
    )
    .await
    .unwrap();
    // The nodes start; the leases run out; the rescuer makes both runnable again, and
    // whichever node claims each works it to its end.
    let stop = CancellationToken::new();
    a.start(stop.clone()).await.unwrap();
    b.start(stop.clone()).await.unwrap();
    let j = finished(&a, first.id).await;
    assert_eq!(j.state, TaskState::Completed, "{j:?}");
    assert_eq!((j.done, j.skipped), (1200, 0), "{j:?}");
    let s = states(&a, "q").await;
    assert_eq!(
        (s.get(&TaskState::Cancelled), s.get(&TaskState::Available)),
        (Some(&1200), Some(&3)),
        "{s:?}"
    );
    for id in late {
        assert_eq!(
            a.task_get(id).await.unwrap().unwrap().state,
            TaskState::Available
        );
    }
    // The queue's kept counts say the same (what the dashboard and `GET /v1/queues` show):
    // a task the bulk action finished is counted, however long its batch took.
    counted(
        &a,
        "q",
        &[(TaskState::Cancelled, 1200), (TaskState::Available, 3)],
    )
    .await;
    let t = a.task_get(first.id).await.unwrap().unwrap();
    assert_eq!(
        t.attempt, 2,
        "the dead node's attempt and one node's: {t:?}"
    );
    let j = finished(&a, second.id).await;
    assert_eq!(j.state, TaskState::Completed, "{j:?}");
    assert_eq!(j.done, 700, "500 counted before, 200 after: {j:?}");
    let s = states(&a, "r").await;
    assert_eq!(
        (s.get(&TaskState::Available), s.get(&TaskState::Cancelled)),
        (Some(&500), Some(&200)),
        "the first 500 were behind the cursor: {s:?}"
    );
    counted(
        &a,
        "r",
        &[(TaskState::Cancelled, 200), (TaskState::Available, 500)],
    )
    .await;
    stop.cancel();
}

/// Queue `queue`'s counts (`Engine::queue_get`: kept counts of finished states plus what
/// finished since) are `want`, also once the counts step moved on past every change.
async fn counted(e: &Engine, queue: &str, want: &[(TaskState, i64)]) {
    for pass in ["now", "after the counts step moved on"] {
        let counts = e.queue_get(queue).await.unwrap().counts;
        for (state, n) in want {
            assert_eq!(counts.get(state), Some(n), "{queue} {pass}: {counts:?}");
        }
        // counted_to trails the clock by docket_core::counts::LAG and moves every
        // ADVANCE_EVERY.
        tokio::time::sleep(docket_core::counts::LAG + 2 * docket_core::counts::ADVANCE_EVERY).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_on_two_nodes_postgres() {
    bulk_on_two_nodes(TestStore::postgres().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_on_two_nodes_sqlite() {
    bulk_on_two_nodes(TestStore::sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_on_two_nodes_mysql() {
    bulk_on_two_nodes(TestStore::mysql().await).await;
}
