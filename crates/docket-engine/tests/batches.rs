//! Batches (issue 26 item 2) on every backend: two nodes, several claimers, 1,000 batches —
//! each callback is enqueued exactly once, with the right counts.

use docket_core::batch::{Callbacks, NewBatch};
use docket_core::{NewTask, SystemClock, TaskState};
use docket_engine::{Engine, EngineConfig};
use docket_store::testing::TestStore;
use docket_store::{TaskComplete, TaskFail, TaskListParams};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const BATCHES: usize = 1000;

fn cb(kind: &str) -> Option<NewTask> {
    Some(NewTask {
        queue: Some("callbacks".into()),
        ..NewTask::new(kind, json!({"note": kind}))
    })
}

/// Claims from `default` until `stop`: completes `ok` tasks, fails `bad` ones for good.
async fn work(e: Engine, w: usize, stop: CancellationToken) {
    while !stop.is_cancelled() {
        let got = e
            .claim(
                "default",
                &format!("w{w}"),
                10,
                None,
                Duration::from_millis(200),
                &stop,
            )
            .await
            .unwrap();
        let (ok, bad): (Vec<_>, Vec<_>) = got.iter().partition(|t| t.kind == "ok");
        let token = |t: &docket_core::Task| t.lease.as_ref().unwrap().token.clone();
        if !ok.is_empty() {
            let items: Vec<TaskComplete> = ok
                .iter()
                .map(|t| TaskComplete {
                    id: t.id,
                    token: token(t),
                    result: json!(null),
                    next: None,
                })
                .collect();
            e.complete_many(&items).await.unwrap();
        }
        if !bad.is_empty() {
            let items: Vec<TaskFail> = bad
                .iter()
                .map(|t| TaskFail {
                    id: t.id,
                    token: token(t),
                    error: "bad".into(),
                    retry_in: None,
                    permanent: true,
                })
                .collect();
            e.fail_many(&items, None).await.unwrap();
        }
    }
}

async fn callbacks_once_on_two_nodes(db: TestStore) {
    let node2 = db.another_node().await;
    let stop = CancellationToken::new();
    let engines = [
        Engine::new(
            db.store.clone(),
            Arc::new(SystemClock),
            EngineConfig::new("n1", db.store.backend()),
        ),
        Engine::new(
            node2.clone(),
            Arc::new(SystemClock),
            EngineConfig::new("n2", node2.backend()),
        ),
    ];
    for e in &engines {
        e.start(stop.clone()).await.unwrap();
    }
    let workers = CancellationToken::new();
    let mut handles = vec![];
    for w in 0..6 {
        handles.push(tokio::spawn(work(
            engines[w % 2].clone(),
            w,
            workers.clone(),
        )));
    }
    // Every tenth batch has a member that fails for good.
    let mut ids = vec![];
    for i in 0..BATCHES {
        let bad = i % 10 == 0;
        let (b, members) = engines[i % 2]
            .batch_create(NewBatch {
                name: Some(format!("b{i}")),
                tasks: vec![
                    NewTask::new("ok", json!(i)),
                    NewTask::new(if bad { "bad" } else { "ok" }, json!(i)),
                ],
                callbacks: Callbacks {
                    completed: cb("completed"),
                    succeeded: cb("succeeded"),
                    discarded: cb("discarded"),
                    cancelled: cb("cancelled"),
                },
                open: false,
            })
            .await
            .unwrap();
        assert_eq!(members.len(), 2);
        ids.push((b.id, bad, members[1].id));
    }
    // Every batch settles (generous bound for a busy 2-core machine).
    // Two each: completed, and succeeded or discarded.
    let want = 2 * BATCHES;
    let deadline = Instant::now() + Duration::from_secs(120);
    let list = || TaskListParams {
        queue: Some("callbacks".into()),
        limit: 10 * BATCHES as i64,
        ..TaskListParams::default()
    };
    loop {
        let n = db.store.task_list(list()).await.unwrap().len();
        if n >= want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{n} of {want} callbacks after 120 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Both nodes' settling loops keep running a while: nothing more may appear.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    workers.cancel();
    for h in handles {
        h.await.unwrap();
    }
    let callbacks = db.store.task_list(list()).await.unwrap();
    assert_eq!(callbacks.len(), want, "each callback exactly once");
    let mut by_batch: HashMap<i64, Vec<(String, serde_json::Value)>> = HashMap::new();
    for t in &callbacks {
        let id = t.payload["batch"]["id"].as_i64().unwrap();
        by_batch
            .entry(id)
            .or_default()
            .push((t.kind.clone(), t.payload.clone()));
    }
    for (id, bad, bad_member) in &ids {
        let mut got = by_batch.remove(id).unwrap_or_default();
        got.sort_by(|a, b| a.0.cmp(&b.0));
        let kinds: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
        if *bad {
            assert_eq!(kinds, ["completed", "discarded"], "batch {id}");
            let p = &got[1].1;
            assert_eq!(p["batch"]["failed_ids"], json!([bad_member]));
            assert_eq!(
                (
                    p["batch"]["completed"].as_i64(),
                    p["batch"]["discarded"].as_i64()
                ),
                (Some(1), Some(1))
            );
            assert_eq!(p["note"], "discarded");
        } else {
            assert_eq!(kinds, ["completed", "succeeded"], "batch {id}");
            assert_eq!(got[1].1["batch"]["completed"], 2);
        }
        let b = engines[0].batch_get(*id).await.unwrap().unwrap();
        assert!(b.settled_at.is_some());
        assert_eq!((b.total, b.done), (2, 2));
        assert_eq!(b.fired.len(), 2);
        if *bad {
            assert_eq!(b.counts[&TaskState::Discarded], 1);
        }
    }
    assert!(by_batch.is_empty(), "callbacks of unknown batches");
    stop.cancel();
    node2.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callbacks_once_on_two_nodes_postgres() {
    callbacks_once_on_two_nodes(TestStore::postgres().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callbacks_once_on_two_nodes_sqlite() {
    callbacks_once_on_two_nodes(TestStore::sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callbacks_once_on_two_nodes_mysql() {
    callbacks_once_on_two_nodes(TestStore::mysql().await).await;
}
