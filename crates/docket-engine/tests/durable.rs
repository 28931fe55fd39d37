//! Durable functions (issue 41) through the engine, on every backend: a run whose worker dies is
//! carried on by another node from its journal; a cancel refuses the running worker and a retry
//! replays; finished runs are pruned after the retention of completed tasks. (The clients'
//! suites run real functions against `docket serve`: clients/*/tests.)

use docket_core::durable::{
    EntryKind, FinishRequest, NewEntry, RunState, StartRequest, StepsRequest,
};
use docket_core::{SystemClock, TaskState};
use docket_engine::{Claim, Engine, EngineConfig, EngineError};
use docket_store::testing::TestStore;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

fn engine(store: Arc<dyn docket_store::Store>, node: &str) -> Engine {
    Engine::new(
        store.clone(),
        Arc::new(SystemClock),
        EngineConfig::new(node, store.backend()),
    )
}

fn step(seq: i64, name: &str) -> NewEntry {
    NewEntry {
        seq,
        kind: EntryKind::Step,
        name: name.into(),
        output: Some(json!(seq * 10)),
        error: None,
        attempts: None,
        started_at: None,
        child: None,
    }
}

async fn claim_run(e: &Engine, lease: Option<Duration>) -> docket_core::Task {
    let stop = CancellationToken::new();
    let got = e
        .claim(
            &Claim::new("workflows", "w", 1)
                .lease(lease)
                .wait(Duration::from_secs(10)),
            &stop,
        )
        .await
        .unwrap();
    assert_eq!(got.len(), 1, "a run's task to claim");
    got.into_iter().next().unwrap()
}

fn token(t: &docket_core::Task) -> String {
    t.lease.as_ref().unwrap().token.clone()
}

fn start(id: &str) -> StartRequest {
    StartRequest {
        workflow: "checkout".into(),
        input: json!({"order": id}),
        id: Some(id.into()),
        ..StartRequest::default()
    }
}

async fn dead_worker_is_replayed_on_another_node(db: TestStore) {
    let node2 = db.another_node().await;
    let (a, b) = (engine(db.store.clone(), "n1"), engine(node2, "n2"));
    a.run_start(start("r1")).await.unwrap();
    // Node 1's worker records two steps, then dies (no more heartbeats) with a 1 s lease.
    let t = claim_run(&a, Some(Duration::from_secs(1))).await;
    assert_eq!(t.payload["workflow_run"], "r1");
    a.run_record(
        "r1",
        StepsRequest {
            lease: token(&t),
            steps: vec![step(0, "reserve"), step(1, "charge")],
        },
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    docket_engine::maintenance::rescue(&b, b.clock.now())
        .await
        .unwrap();
    // Retried after its backoff: the scheduler's promote makes it available then.
    let retry = b.task_get(t.id).await.unwrap().unwrap();
    assert_eq!(retry.state, TaskState::Retryable);
    docket_engine::maintenance::promote(&b, retry.run_at)
        .await
        .unwrap();
    // Node 2 claims it again (attempt 2) and replays the journal.
    let t2 = claim_run(&b, None).await;
    assert_eq!((t2.id, t2.attempt), (t.id, 2));
    let resumed = b.run_resume("r1", token(&t2)).await.unwrap();
    let names: Vec<&str> = resumed.steps.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["reserve", "charge"]);
    assert_eq!(resumed.steps[1].output, Some(json!(10)));
    // The dead worker's lease is void.
    assert!(matches!(
        a.run_record(
            "r1",
            StepsRequest {
                lease: token(&t),
                steps: vec![step(2, "ship")],
            },
        )
        .await,
        Err(EngineError::LeaseLost)
    ));
    let run = b
        .run_finish(
            "r1",
            FinishRequest {
                lease: token(&t2),
                steps: vec![step(2, "ship")],
                result: Some(json!("done")),
                error: None,
            },
        )
        .await
        .unwrap();
    assert_eq!((run.state, run.steps), (RunState::Completed, 3));
    let got = a.run_result("r1", Duration::ZERO).await.unwrap().unwrap();
    assert_eq!(got.result, Some(json!("done")));
}

async fn cancel_refuses_the_worker_and_retry_replays(db: TestStore) {
    let e = engine(db.store.clone(), "n1");
    e.run_start(start("r1")).await.unwrap();
    let t = claim_run(&e, None).await;
    e.run_record(
        "r1",
        StepsRequest {
            lease: token(&t),
            steps: vec![step(0, "reserve")],
        },
    )
    .await
    .unwrap();
    let run = e.run_cancel("r1").await.unwrap();
    assert_eq!(run.state, RunState::Cancelled);
    // The running worker's next call is refused, and the task ends cancelled.
    let refused = e
        .run_record(
            "r1",
            StepsRequest {
                lease: token(&t),
                steps: vec![step(1, "charge")],
            },
        )
        .await;
    assert!(
        matches!(refused, Err(EngineError::Cancelled)),
        "{refused:?}"
    );
    let task = e.task_get(t.id).await.unwrap().unwrap();
    assert_eq!(task.state, TaskState::Cancelled);
    // Retried: running again, its task available, the journal replayed.
    let run = e.run_retry("r1").await.unwrap();
    assert_eq!(run.state, RunState::Running);
    let t2 = claim_run(&e, None).await;
    assert_eq!(t2.id, t.id);
    let resumed = e.run_resume("r1", token(&t2)).await.unwrap();
    assert_eq!(resumed.steps.len(), 1);
    assert!(matches!(
        e.run_retry("r1").await,
        Err(EngineError::InvalidState(_))
    ));
    let done = e
        .run_finish(
            "r1",
            FinishRequest {
                lease: token(&t2),
                steps: vec![step(1, "charge")],
                result: Some(json!(1)),
                error: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(done.state, RunState::Completed);
    // Finished runs go with the retention of completed tasks.
    let later = e.clock.now() + chrono::TimeDelta::try_days(30).unwrap();
    let n = docket_engine::maintenance::prune_runs(&e, later)
        .await
        .unwrap();
    assert_eq!(n, 1);
    assert!(e.run_get("r1").await.unwrap().is_none());
}

macro_rules! on_every_backend {
    ($($f:ident),*) => {
        mod postgres {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $f() { super::$f(super::TestStore::postgres().await).await; })*
        }
        mod sqlite {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $f() { super::$f(super::TestStore::sqlite().await).await; })*
        }
        mod mysql {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $f() { super::$f(super::TestStore::mysql().await).await; })*
        }
    };
}

on_every_backend!(
    dead_worker_is_replayed_on_another_node,
    cancel_refuses_the_worker_and_retry_replays
);
