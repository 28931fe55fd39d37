//! Soak (issue 3's acceptance): N processes, each init + 5 calls + 3 chained timers, on
//! PostgreSQL with two nodes (two engines and runners on one schema), calls sent alternately
//! to both. Every process must end with its events in order and nothing stuck.
//! CI runs N = 100; `DOCKET_SOAK_PROCESSES=1000 cargo test -p docket-engine --test soak --
//! --nocapture` runs the full size and prints the duration.

use docket_core::process::{HistoryRange, NamespaceConfig, ProcessStatus};
use docket_core::{SystemClock, TaskState};
use docket_engine::process::{ProcessService, Request};
use docket_engine::{Engine, EngineConfig};
use docket_store::{connect, ConnectOptions, Store, TaskListParams};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

async fn node(
    schema: &str,
    name: &str,
    stop: &CancellationToken,
) -> (ProcessService, Arc<dyn Store>) {
    let url = std::env::var("DOCKET_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let store = connect(&ConnectOptions {
        url,
        schema: Some(schema.into()),
        max_connections: Some(20),
        strict_commit: false,
    })
    .await
    .expect("PostgreSQL is running");
    store.migrate().await.unwrap();
    let engine = Engine::new(
        store.clone(),
        Arc::new(SystemClock),
        EngineConfig::new(name, store.backend()),
    );
    engine.start(stop.clone()).await.unwrap();
    let svc = ProcessService::new(engine, stop.clone());
    svc.start().await.unwrap();
    (svc, store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn soak_two_nodes() {
    let n: usize = std::env::var("DOCKET_SOAK_PROCESSES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let (mut processor, port) = spawn_processor();
    let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
    let stop = CancellationToken::new();
    let (a, store) = node(&schema, "soak-a", &stop).await;
    let (b, _) = node(&schema, "soak-b", &stop).await;
    let cfg: NamespaceConfig = serde_json::from_value(json!({
        "processor": {"url": format!("http://127.0.0.1:{port}/")}, "worker_pool_size": 8
    }))
    .unwrap();
    a.namespace_put("soak", cfg.clone()).await.unwrap();
    b.namespace_put("soak", cfg).await.unwrap();

    let started = Instant::now();
    let sem = Arc::new(tokio::sync::Semaphore::new(40));
    let mut hs = vec![];
    for i in 0..n {
        let (a, b, sem) = (a.clone(), b.clone(), sem.clone());
        hs.push(tokio::spawn(async move {
            let _permit = sem.acquire_owned().await.unwrap();
            let id = format!("p{i}");
            let timeouts = json!([{"events": ["t1"], "timer": "0s"}, {"events": ["t2"], "timer": "0s"}, {"events": ["t3"]}]);
            let init = json!({"events": ["init"], "timer": "0s", "aux_state": {"timeouts": timeouts}});
            a.init("soak", &id, Request { args: init, ..Default::default() }).await.unwrap();
            for c in 1..=5 {
                let svc = if c % 2 == 0 { &a } else { &b };
                let args = json!({"events": [format!("c{c}")]});
                svc.call("soak", &id, Request { args, ..Default::default() }).await.unwrap();
            }
        }));
    }
    for h in hs {
        h.await.unwrap();
    }
    // Timers may still be running after the last call: wait until every process has 9 events.
    let deadline = Instant::now() + Duration::from_secs(300);
    for i in 0..n {
        let id = format!("p{i}");
        loop {
            let (p, ev) = a.get("soak", &id, HistoryRange::default()).await.unwrap();
            if ev.len() >= 9 {
                assert_eq!(p.status, ProcessStatus::Running, "{id}");
                let ids: Vec<i64> = ev.iter().map(|e| e.event_id).collect();
                assert_eq!(ids, (1..=9).collect::<Vec<_>>(), "{id}");
                let names: Vec<String> = ev
                    .iter()
                    .map(|e| e.payload.as_str().unwrap().to_string())
                    .collect();
                assert_eq!(names[0], "init", "{id}");
                let calls: Vec<&String> = names.iter().filter(|x| x.starts_with('c')).collect();
                let timers: Vec<&String> = names.iter().filter(|x| x.starts_with('t')).collect();
                assert_eq!(calls, ["c1", "c2", "c3", "c4", "c5"], "{id}: {names:?}");
                assert_eq!(timers, ["t1", "t2", "t3"], "{id}: {names:?}");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{id} stuck with {} events",
                ev.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let took = started.elapsed();
    // Nothing stuck: every task of the namespace is finished.
    let left: Vec<_> = store
        .task_list(TaskListParams {
            queue: Some("process:soak".into()),
            limit: 100_000,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_iter()
        .filter(|t| !t.state.is_finished())
        .collect();
    assert!(left.is_empty(), "unfinished: {left:?}");
    let done = store
        .task_list(TaskListParams {
            queue: Some("process:soak".into()),
            states: vec![TaskState::Completed],
            limit: 100_000,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(done.len(), n * 9, "init + 5 calls + 3 timers each");
    let by_node = |w: &str| {
        done.iter()
            .filter(|t| t.worker.as_deref().is_some_and(|x| x.starts_with(w)))
            .count()
    };
    println!(
        "soak: {n} processes × (init + 5 calls + 3 timers) on two nodes in {:.1} s ({:.0} steps/s; node a ran {}, node b ran {})",
        took.as_secs_f64(),
        (n * 9) as f64 / took.as_secs_f64(),
        by_node("soak-a"),
        by_node("soak-b"),
    );
    assert!(
        by_node("soak-a") > 0 && by_node("soak-b") > 0,
        "both nodes worked"
    );
    stop.cancel();
    let _ = processor.kill();
    let _ = processor.wait();
    let _: Value = json!(null);
}

use docket_store::testing::spawn_example_processor as spawn_processor;
