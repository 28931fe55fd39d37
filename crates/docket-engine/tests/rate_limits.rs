//! Rate limits (issue 26 item 3) on every backend, two nodes and six claimers: a window limit
//! of 50 per second, partitioned by customer, holds within 10% over 10 s cluster-wide for each
//! partition; held tasks wait `available` without spending attempts; the queue's other tasks
//! are not held behind them.

use docket_core::rate_limit::{Kind, RateLimitSpec};
use docket_core::{NewTask, SystemClock, TaskState};
use docket_engine::{Engine, EngineConfig, EngineError};
use docket_store::testing::TestStore;
use docket_store::{TaskComplete, TaskListParams};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

type Seen = Arc<Mutex<Vec<(String, docket_core::Timestamp)>>>;

/// Claims until `stop`, completing at once; notes each claimed task's key and claim time.
async fn work(e: Engine, w: usize, seen: Seen, stop: CancellationToken) {
    while !stop.is_cancelled() {
        let got = e
            .claim(
                "api",
                &format!("w{w}"),
                10,
                None,
                Duration::from_millis(200),
                &stop,
            )
            .await
            .unwrap();
        if got.is_empty() {
            continue;
        }
        {
            let mut s = seen.lock().unwrap();
            for t in &got {
                assert_eq!(t.attempt, 1, "a held task spent an attempt");
                let key = t.rate_limit.clone().unwrap_or_else(|| "none".into());
                s.push((key, t.attempted_at.unwrap()));
            }
        }
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
    }
}

async fn fifty_per_second_on_two_nodes(db: TestStore) {
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
    let spec = RateLimitSpec {
        kind: Kind::Window,
        limit: 50,
        period: Some(Duration::from_secs(1)),
    };
    // A task naming no limit is refused, with nothing written.
    let typo = NewTask {
        queue: Some("api".into()),
        rate_limit: Some("stirpe:a".into()),
        ..NewTask::new("call", json!(0))
    };
    let e = engines[0].enqueue_many(vec![typo]).await.unwrap_err();
    assert!(
        matches!(&e, EngineError::InvalidTask { message, .. } if message.contains("stirpe")),
        "{e:?}"
    );
    engines[0]
        .rate_limit_put("test", "stripe", &spec)
        .await
        .unwrap();
    // 1,500 per partition: more than 10 s of budget, so the limit (not the supply) decides.
    let mut tasks = vec![];
    for i in 0..1500 {
        for p in ["a", "b"] {
            tasks.push(NewTask {
                queue: Some("api".into()),
                rate_limit: Some(format!("stripe:{p}")),
                ..NewTask::new("call", json!(i))
            });
        }
    }
    for chunk in tasks.chunks(500) {
        engines[0].enqueue_many(chunk.to_vec()).await.unwrap();
    }
    let seen: Seen = Arc::default();
    let workers = CancellationToken::new();
    let mut handles = vec![];
    for w in 0..6 {
        handles.push(tokio::spawn(work(
            engines[w % 2].clone(),
            w,
            seen.clone(),
            workers.clone(),
        )));
    }
    // Plain tasks of the same queue, enqueued behind the held ones, run at once.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let plain: Vec<NewTask> = (0..100)
        .map(|i| NewTask {
            queue: Some("api".into()),
            ..NewTask::new("plain", json!(i))
        })
        .collect();
    engines[1].enqueue_many(plain).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let n = seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, _)| k == "none")
            .count();
        if n == 100 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{n} of 100 plain tasks ran in 30 s behind the rate-limited ones"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(11)).await;
    workers.cancel();
    for h in handles {
        h.await.unwrap();
    }
    let seen = seen.lock().unwrap().clone();
    let first = seen.iter().map(|(_, t)| *t).min().unwrap();
    // Ten seconds from the first admission: 500 per partition, within 10%.
    let from = docket_core::time::add_ms(first, 1000);
    let to = docket_core::time::add_ms(from, 10_000);
    for p in ["stripe:a", "stripe:b"] {
        let n = seen
            .iter()
            .filter(|(k, t)| k == p && *t >= from && *t < to)
            .count();
        eprintln!("{p}: {n} admitted in 10 s under a limit of 50/s");
        assert!(
            (450..=550).contains(&n),
            "{p}: {n} admitted in 10 s under a limit of 50/s"
        );
        // And no window of the limit ever admitted more than 50.
        let mut per: std::collections::BTreeMap<i64, usize> = Default::default();
        for (_, t) in seen.iter().filter(|(k, _)| k == p) {
            *per.entry(t.timestamp()).or_default() += 1;
        }
        assert!(per.values().all(|n| *n <= 50), "{p}: {per:?}");
    }
    // What was not admitted waits, available, no attempt spent.
    let left = db
        .store
        .task_list(TaskListParams {
            queue: Some("api".into()),
            states: vec![TaskState::Available],
            limit: 10_000,
            ..TaskListParams::default()
        })
        .await
        .unwrap();
    assert!(left.len() >= 1500, "{} left", left.len());
    assert!(left.iter().all(|t| t.attempt == 0));
    let l = engines[1].rate_limit_get("stripe").await.unwrap();
    assert_eq!(l.keys, 2);
    let admitted = seen.iter().filter(|(k, _)| k != "none").count() as i64;
    assert_eq!(l.admitted, admitted);
    assert!(l.delayed > 0);
    stop.cancel();
    node2.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_per_second_on_two_nodes_postgres() {
    fifty_per_second_on_two_nodes(TestStore::postgres().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_per_second_on_two_nodes_sqlite() {
    fifty_per_second_on_two_nodes(TestStore::sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_per_second_on_two_nodes_mysql() {
    fifty_per_second_on_two_nodes(TestStore::mysql().await).await;
}
