//! Fair queues (issue 26 item 4) under concurrent claimers on two nodes, on every backend:
//! every task is claimed exactly once, and no claim comes back empty while the queue holds far
//! more work than the claimers could have in hand. (The order a single claim takes partitions
//! in is the store's conformance case `fair_claims_take_partitions_in_turn`.)

use docket_core::{NewTask, QueueSettings, SystemClock, TaskState};
use docket_engine::{Claim, Engine, EngineConfig};
use docket_store::testing::TestStore;
use docket_store::{TaskComplete, TaskListParams};
use serde_json::json;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Claimers, four on each node.
const CLAIMERS: usize = 8;
/// Tasks each claim asks for.
const LIMIT: i64 = 5;
/// Claims each claimer makes while the queue is sure to hold work.
const ROUNDS: usize = 15;

/// Claims `limit` of queue `fq` on `e` without waiting and completes them at once; the ids.
async fn claim_and_complete(e: &Engine, w: usize, stop: &CancellationToken) -> Vec<i64> {
    let got = e
        .claim(&Claim::new("fq", format!("w{w}"), LIMIT), stop)
        .await
        .unwrap();
    let items: Vec<TaskComplete> = got
        .iter()
        .map(|t| TaskComplete {
            id: t.id,
            token: t.lease.as_ref().unwrap().token.clone(),
            result: json!(null),
            next: None,
        })
        .collect();
    e.complete_many(&items).await.unwrap();
    got.iter().map(|t| t.id).collect()
}

/// 2,000 tasks in six partitions (one weighted 2) and none, eight claimers on two nodes. Each
/// makes 15 claims of 5 while at least 2,000 − 8 × 15 × 5 = 1,400 tasks wait, and every one
/// takes some; once all have, they drain the queue together, and each task ran once.
async fn concurrent_fair_claims_on_two_nodes(db: TestStore) {
    let node2 = db.another_node().await;
    let engines = [("n1", db.store.clone()), ("n2", node2.clone())].map(|(name, store)| {
        let cfg = EngineConfig::new(name, store.backend());
        Engine::new(store, Arc::new(SystemClock), cfg)
    });
    let settings = QueueSettings {
        fair: true,
        partition_weights: Some([("p0".to_string(), 2)].into()),
        ..QueueSettings::default()
    };
    engines[0].queue_put("test", "fq", &settings).await.unwrap();
    // Partition by partition, so claim order alone would take p0's tasks first.
    let mut specs = vec![];
    for p in 0..6 {
        specs.extend((0..300).map(|i| NewTask {
            queue: Some("fq".into()),
            partition_key: Some(format!("p{p}")),
            ..NewTask::new("t", json!(i))
        }));
    }
    specs.extend((0..200).map(|i| NewTask {
        queue: Some("fq".into()),
        ..NewTask::new("t", json!(i))
    }));
    let n = specs.len();
    for chunk in specs.chunks(500) {
        engines[0].enqueue_many(chunk.to_vec()).await.unwrap();
    }
    let stop = CancellationToken::new();
    // No claimer drains the queue before all have made their ROUNDS claims: on SQLite one
    // claimer can fall far behind the others (its writer lock is one at a time), and a queue
    // drained by the rest answers its late claims empty, as it should.
    let rounds_done = Arc::new(tokio::sync::Barrier::new(CLAIMERS));
    let mut handles = vec![];
    for w in 0..CLAIMERS {
        let (e, stop) = (engines[w % 2].clone(), stop.clone());
        let rounds_done = rounds_done.clone();
        handles.push(tokio::spawn(async move {
            let mut mine = vec![];
            // Work for certain: at most CLAIMERS × ROUNDS × LIMIT tasks are taken meanwhile.
            for round in 0..ROUNDS {
                let got = claim_and_complete(&e, w, &stop).await;
                assert!(
                    !got.is_empty(),
                    "claimer {w}, claim {round}: empty while the fair queue had work"
                );
                mine.extend(got);
            }
            rounds_done.wait().await;
            // Then the rest, together, until the queue is empty.
            loop {
                let got = claim_and_complete(&e, w, &stop).await;
                if got.is_empty() {
                    return mine;
                }
                mine.extend(got);
            }
        }));
    }
    let mut all = vec![];
    for h in handles {
        all.extend(h.await.unwrap());
    }
    let claimed = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(
        (claimed, all.len()),
        (n, n),
        "a task was claimed twice or never"
    );
    let done = db
        .store
        .task_list(TaskListParams {
            queue: Some("fq".into()),
            states: vec![TaskState::Completed],
            limit: 10_000,
            ..TaskListParams::default()
        })
        .await
        .unwrap();
    assert_eq!(done.len(), n);
    assert!(done.iter().all(|t| t.attempt == 1));
    node2.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_fair_claims_on_two_nodes_postgres() {
    concurrent_fair_claims_on_two_nodes(TestStore::postgres().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_fair_claims_on_two_nodes_sqlite() {
    concurrent_fair_claims_on_two_nodes(TestStore::sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_fair_claims_on_two_nodes_mysql() {
    concurrent_fair_claims_on_two_nodes(TestStore::mysql().await).await;
}
