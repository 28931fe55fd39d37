//! Batches and workflows (issue 26 items 1, 2) on every backend, two nodes and several claimers:
//! over 1,000 batches each callback is enqueued exactly once, with the right counts; a DAG of
//! 1,000 tasks runs with nothing started before its dependencies completed.

use docket_core::batch::{Callbacks, NewBatch};
use docket_core::{NewTask, SystemClock, TaskState};
use docket_engine::{Claim, Engine, EngineConfig};
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
                &Claim::new("default", format!("w{w}"), 10).wait(Duration::from_millis(200)),
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

/// Issue 26 item 1: a DAG of 1,000 tasks (10 levels of 100, each task waiting for two or three
/// of the levels above) on two nodes with six claimers completes with nothing run early: every
/// claimed task's `deps` holds the results of all its dependencies (a dependency that had not
/// completed would have none), and the workflow's callback runs once at the end.
async fn dag_runs_in_dependency_order(db: TestStore) {
    use docket_core::workflow::{Dependency, NewWorkflow, WorkflowTask};
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
    const LEVELS: usize = 10;
    const WIDTH: usize = 100;
    let name = |l: usize, i: usize| format!("n{l}-{i}");
    let mut want: HashMap<String, Vec<String>> = HashMap::new();
    let mut tasks = vec![];
    for l in 0..LEVELS {
        for i in 0..WIDTH {
            let mut deps = vec![];
            if l > 0 {
                deps.push(name(l - 1, (i * 7) % WIDTH));
                deps.push(name(l - 1, (i * 13 + 1) % WIDTH));
                if l > 1 && i % 3 == 0 {
                    deps.push(name(l - 2, i));
                }
                deps.dedup();
            }
            want.insert(name(l, i), deps.clone());
            tasks.push(WorkflowTask {
                reference: name(l, i),
                depends_on: deps.into_iter().map(Dependency::Ref).collect(),
                task: NewTask::new("node", json!({"ref": name(l, i)})),
            });
        }
    }
    let made = engines[0]
        .workflow_create(NewWorkflow {
            name: Some("dag".into()),
            tasks,
            workflows: vec![],
            callbacks: Callbacks {
                succeeded: cb("dag_done"),
                ..Default::default()
            },
        })
        .await
        .unwrap();
    let id = made.workflow.batch.id;
    assert_eq!(
        made.workflow.tasks.iter().filter(|n| n.waiting).count(),
        (LEVELS - 1) * WIDTH
    );
    let early = Arc::new(std::sync::Mutex::new(vec![]));
    let workers = CancellationToken::new();
    let mut handles = vec![];
    for w in 0..6 {
        let e = engines[w % 2].clone();
        let stop = workers.clone();
        let want = want.clone();
        let early = early.clone();
        handles.push(tokio::spawn(async move {
            while !stop.is_cancelled() {
                let got = e
                    .claim(
                        &Claim::new("default", format!("w{w}"), 10)
                            .wait(Duration::from_millis(200)),
                        &stop,
                    )
                    .await
                    .unwrap();
                for t in &got {
                    let me = t.payload["ref"].as_str().unwrap().to_string();
                    let deps = t.deps.clone().unwrap_or_default();
                    for d in &want[&me] {
                        if deps.get(d).and_then(|r| r["ref"].as_str()) != Some(d.as_str()) {
                            early.lock().unwrap().push(format!("{me} ran before {d}"));
                        }
                    }
                }
                let items: Vec<TaskComplete> = got
                    .iter()
                    .map(|t| TaskComplete {
                        id: t.id,
                        token: t.lease.as_ref().unwrap().token.clone(),
                        result: json!({"ref": t.payload["ref"]}),
                        next: None,
                    })
                    .collect();
                if !items.is_empty() {
                    e.complete_many(&items).await.unwrap();
                }
            }
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let b = engines[1].batch_get(id).await.unwrap().unwrap();
        if b.settled_at.is_some() {
            assert_eq!(
                b.counts.get(&TaskState::Completed),
                Some(&((LEVELS * WIDTH) as i64))
            );
            assert_eq!(b.fired.len(), 1);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not done after 180 s: {:?}",
            b.counts
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    workers.cancel();
    for h in handles {
        h.await.unwrap();
    }
    let early = early.lock().unwrap().clone();
    assert!(
        early.is_empty(),
        "{} tasks ran early: {:?}",
        early.len(),
        &early[..early.len().min(5)]
    );
    let w = engines[0].workflow_get(id).await.unwrap().unwrap();
    assert!(w
        .tasks
        .iter()
        .all(|n| n.state == TaskState::Completed && !n.waiting));
    stop.cancel();
    node2.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dag_runs_in_dependency_order_postgres() {
    dag_runs_in_dependency_order(TestStore::postgres().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dag_runs_in_dependency_order_sqlite() {
    dag_runs_in_dependency_order(TestStore::sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dag_runs_in_dependency_order_mysql() {
    dag_runs_in_dependency_order(TestStore::mysql().await).await;
}
