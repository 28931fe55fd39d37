//! Workflows at run time (issue 26 item 1) on every backend: a task fans out by adding tasks to
//! its own workflow, a sub-workflow waits and is waited on as a whole, a failure cancels what
//! waits on it, and a retry re-runs what failed and what it cancelled, in order, with the
//! callbacks firing again.

use docket_core::batch::Callbacks;
use docket_core::workflow::{Dependency, NewWorkflow, SubWorkflow, WorkflowAddition, WorkflowTask};
use docket_core::{NewTask, SystemClock, TaskState};
use docket_engine::{Claim, Engine, EngineConfig, EngineError};
use docket_store::testing::TestStore;
use docket_store::{TaskComplete, TaskFail, TaskListParams};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

fn task(r: &str, kind: &str, deps: &[&str]) -> WorkflowTask {
    WorkflowTask {
        reference: r.into(),
        depends_on: deps
            .iter()
            .map(|d| Dependency::Ref(d.to_string()))
            .collect(),
        task: NewTask::new(kind, json!({"ref": r})),
    }
}

fn cb(kind: &str) -> Option<NewTask> {
    Some(NewTask {
        queue: Some("callbacks".into()),
        ..NewTask::new(kind, json!(null))
    })
}

/// Completions: (ref, attempt, refs in its `deps`).
type Log = Arc<Mutex<Vec<(String, i32, Vec<String>)>>>;

/// Works `default`: `split` adds five `part` tasks after itself and a `join` after them; the
/// first `flaky` fails for good; everything else completes with its ref as result. Records
/// each completion as (ref, attempt, refs in its `deps`).
async fn work(e: Engine, stop: CancellationToken, log: Log) {
    let mut failed_once = false;
    while !stop.is_cancelled() {
        let got = e
            .claim(
                &Claim::new("default", "w", 5).wait(Duration::from_millis(100)),
                &stop,
            )
            .await
            .unwrap();
        for t in got {
            let me = t.payload["ref"].as_str().unwrap().to_string();
            let token = t.lease.as_ref().unwrap().token.clone();
            if t.kind == "flaky" && !failed_once {
                failed_once = true;
                e.fail_many(
                    &[TaskFail {
                        id: t.id,
                        token,
                        error: "upstream down".into(),
                        retry_in: None,
                        permanent: true,
                    }],
                    None,
                )
                .await
                .unwrap();
                continue;
            }
            if t.kind == "split" {
                let mut tasks: Vec<WorkflowTask> = (0..5)
                    .map(|i| task(&format!("part-{i}"), "ok", &["split"]))
                    .collect();
                let parts: Vec<String> = (0..5).map(|i| format!("part-{i}")).collect();
                let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
                tasks.push(task("join", "ok", &parts));
                let added = e
                    .workflow_add(
                        "test",
                        t.batch_id.unwrap(),
                        WorkflowAddition {
                            tasks,
                            workflows: vec![],
                        },
                    )
                    .await
                    .unwrap();
                assert_eq!(added.tasks.len(), 6);
                // split is still running: all six wait.
                assert!(added
                    .workflow
                    .tasks
                    .iter()
                    .filter(|n| n.reference.starts_with("part-") || n.reference == "join")
                    .all(|n| n.waiting));
            }
            let deps: Vec<String> = t
                .deps
                .as_ref()
                .map(|d| d.keys().cloned().collect())
                .unwrap_or_default();
            log.lock().unwrap().push((me.clone(), t.attempt, deps));
            e.complete_many(&[TaskComplete {
                id: t.id,
                token,
                result: json!({"ref": me}),
                next: None,
            }])
            .await
            .unwrap();
        }
    }
}

async fn settled(e: &Engine, id: i64, what: &str) -> docket_core::batch::Batch {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let b = e.batch_get(id).await.unwrap().unwrap();
        if b.settled_at.is_some() {
            return b;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not settled after 90 s: {:?}",
            e.workflow_get(id).await.unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn fan_out_sub_workflows_and_retry(db: TestStore) {
    let stop = CancellationToken::new();
    let e = Engine::new(
        db.store.clone(),
        Arc::new(SystemClock),
        EngineConfig::new("n1", db.store.backend()),
    );
    e.start(stop.clone()).await.unwrap();
    // split → load {fetch → store} → report.
    let made = e
        .workflow_create(NewWorkflow {
            name: Some("etl".into()),
            tasks: vec![task("split", "split", &[]), task("report", "ok", &["load"])],
            workflows: vec![SubWorkflow {
                reference: "load".into(),
                depends_on: vec![Dependency::Ref("split".into())],
                tasks: vec![task("fetch", "flaky", &[]), task("store", "ok", &["fetch"])],
                workflows: vec![],
            }],
            callbacks: Callbacks {
                completed: cb("wf_done"),
                succeeded: cb("wf_ok"),
                ..Default::default()
            },
        })
        .await
        .unwrap();
    let id = made.workflow.batch.id;
    let refs: Vec<&str> = made
        .workflow
        .tasks
        .iter()
        .map(|n| n.reference.as_str())
        .collect();
    assert_eq!(refs, ["split", "report", "load/fetch", "load/store"]);
    let log = Arc::new(Mutex::new(vec![]));
    let workers = CancellationToken::new();
    let h = tokio::spawn(work(e.clone(), workers.clone(), log.clone()));

    // First run: fetch fails for good, which cancels store and report; the parts and join run.
    let first = settled(&e, id, "first run").await;
    assert_eq!(
        first.fired.keys().cloned().collect::<Vec<_>>(),
        ["completed"]
    );
    let w = e.workflow_get(id).await.unwrap().unwrap();
    let state = |w: &docket_core::workflow::Workflow, r: &str| {
        w.tasks.iter().find(|n| n.reference == r).unwrap().state
    };
    assert_eq!(state(&w, "load/fetch"), TaskState::Discarded);
    assert_eq!(state(&w, "load/store"), TaskState::Cancelled);
    assert_eq!(state(&w, "report"), TaskState::Cancelled);
    assert_eq!(state(&w, "join"), TaskState::Completed);
    assert_eq!(w.tasks.len(), 10);
    {
        let log = log.lock().unwrap();
        let at = |r: &str| log.iter().position(|(x, _, _)| x == r).unwrap();
        for i in 0..5 {
            assert!(at("split") < at(&format!("part-{i}")));
            assert!(at(&format!("part-{i}")) < at("join"));
        }
        let join = &log[at("join")].2;
        assert_eq!(join.len(), 5, "join sees its five parts' results: {join:?}");
    }
    // A settled workflow takes no tasks; a ref it has is refused; an unknown one is not found.
    let add = |r: &str| WorkflowAddition {
        tasks: vec![task(r, "ok", &[])],
        workflows: vec![],
    };
    assert!(matches!(
        e.workflow_add("test", id, add("late")).await,
        Err(EngineError::Conflict(_))
    ));
    assert!(matches!(
        e.workflow_add("test", id, add("join")).await,
        Err(EngineError::Invalid(_))
    ));
    assert!(matches!(
        e.workflow_add("test", id + 1000, add("x")).await,
        Err(EngineError::NotFound(_))
    ));
    assert_eq!(e.workflow_get(id).await.unwrap().unwrap().tasks.len(), 10);

    // Retry: fetch runs again, then store, then report; completed tasks do not run again;
    // the callbacks fire again, succeeded this time.
    let before = log.lock().unwrap().len();
    e.workflow_retry("test", id).await.unwrap();
    let second = settled(&e, id, "after the retry").await;
    assert_eq!(
        second.fired.keys().cloned().collect::<Vec<_>>(),
        ["completed", "succeeded"]
    );
    let w = e.workflow_get(id).await.unwrap().unwrap();
    assert!(w.tasks.iter().all(|n| n.state == TaskState::Completed));
    {
        let log = log.lock().unwrap();
        let again: Vec<(&str, i32)> = log[before..]
            .iter()
            .map(|(r, a, _)| (r.as_str(), *a))
            .collect();
        // (The log names tasks by their payload's ref: the sub-workflow's own names.)
        assert_eq!(again, [("fetch", 2), ("store", 1), ("report", 1)]);
        let report = &log.last().unwrap().2;
        assert_eq!(
            report,
            &["load/fetch", "load/store"],
            "report waits on all of load"
        );
    }
    workers.cancel();
    h.await.unwrap();
    let n = |kind: &str| {
        let store = db.store.clone();
        let kind = kind.to_string();
        async move {
            store
                .task_list(TaskListParams {
                    kind: Some(kind),
                    limit: 10,
                    ..TaskListParams::default()
                })
                .await
                .unwrap()
                .len()
        }
    };
    assert_eq!((n("wf_done").await, n("wf_ok").await), (2, 1));
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_out_sub_workflows_and_retry_postgres() {
    fan_out_sub_workflows_and_retry(TestStore::postgres().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_out_sub_workflows_and_retry_sqlite() {
    fan_out_sub_workflows_and_retry(TestStore::sqlite().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_out_sub_workflows_and_retry_mysql() {
    fan_out_sub_workflows_and_retry(TestStore::mysql().await).await;
}
