//! The quickstart of docs/src/durable/rust.md (the book includes the part between the ANCHOR
//! lines): a durable function embedded in a Rust program on a SQLite file.

use docket_core::clock::SystemClock;
use docket_core::durable::{EventRequest, RunState, StartRequest};
use docket_engine::durable_fn::{WorkflowContext, WorkflowError};
use docket_engine::worker::{WorkerConfig, WorkerPool};
use docket_engine::{Database, DatabaseOptions, Engine, EngineConfig};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

// ANCHOR: workflow
/// Deterministic code: what talks to the world is in steps.
async fn checkout(ctx: WorkflowContext, order: Value) -> Result<Value, WorkflowError> {
    let id = order["id"].as_str().unwrap_or_default().to_string();
    let charge: String = ctx
        .step("charge", || async {
            // The payment API's call; an Err is retried (3 attempts), then fails the step.
            Ok::<_, String>(format!("ch_{id}"))
        })
        .await?;
    ctx.sleep(Duration::from_secs(1)).await?; // durable: the worker holds nothing meanwhile
    match ctx
        .wait_for_event("approved", Some(Duration::from_secs(60)))
        .await?
    {
        Some(by) => Ok(json!({"charge": charge, "status": "approved", "by": by["by"]})),
        None => Ok(json!({"charge": charge, "status": "not approved in time"})),
    }
}
// ANCHOR_END: workflow

#[tokio::test]
async fn durable_function_quickstart() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite://{}", dir.path().join("app.db").display());
    // ANCHOR: example
    let db = Database::open(&DatabaseOptions::new(url)).await?;
    db.migrate().await?;
    let config = EngineConfig::new("node-1", db.backend());
    let engine = Engine::new(db, Arc::new(SystemClock), config);
    let stop = CancellationToken::new();
    engine.start(stop.clone()).await?; // maintenance, wake-ups, node heartbeat

    let worker = WorkerPool::new(engine.clone(), WorkerConfig::new("workflows"))
        .workflow("checkout", checkout);
    let worker = tokio::spawn(worker.run(stop.clone()));

    let started = engine
        .run_start(StartRequest {
            workflow: "checkout".into(),
            input: json!({"id": "42"}),
            id: Some("order-42".into()), // starting this id again returns the same run
            ..StartRequest::default()
        })
        .await?;
    let approval = EventRequest {
        name: "approved".into(),
        payload: json!({"by": "Ada"}),
    };
    engine.run_send(&started.run.id, approval).await?; // waits in the run's mailbox
    let run = engine
        .run_result("order-42", Duration::from_secs(30))
        .await?
        .expect("the run");
    println!("{:?} {}", run.state, run.result.clone().unwrap_or_default());
    // Completed {"by":"Ada","charge":"ch_42","status":"approved"}
    stop.cancel();
    worker.await?;
    // ANCHOR_END: example
    assert_eq!(run.state, RunState::Completed);
    assert_eq!(
        run.result,
        Some(json!({"charge": "ch_42", "status": "approved", "by": "Ada"}))
    );
    Ok(())
}
