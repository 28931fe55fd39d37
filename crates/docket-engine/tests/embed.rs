//! The Rust library example of the docs (`docs/src/library.md` includes the part between the
//! ANCHOR lines): embed the engine on a SQLite file, enqueue a task, work it in-process.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use docket_core::clock::SystemClock;
use docket_core::state::TaskState;
use docket_core::task::{NewTask, Task};
use docket_engine::worker::{Handler, Outcome, WorkerConfig, WorkerPool};
use docket_engine::{Database, DatabaseOptions, Engine, EngineConfig};
use serde_json::json;
use tokio_util::sync::CancellationToken;

struct SendEmail;

#[async_trait]
impl Handler for SendEmail {
    async fn run(&self, task: &Task) -> Outcome {
        match task.payload["to"].as_str() {
            Some(to) => Outcome::Complete(json!({ "sent_to": to })),
            None => Outcome::Discard("no recipient".into()),
        }
    }
}

#[tokio::test]
async fn embed_the_engine() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite://{}", dir.path().join("app.db").display());
    // ANCHOR: example
    let db = Database::open(&DatabaseOptions::new(url)).await?;
    db.migrate().await?;
    let config = EngineConfig::new("node-1", db.backend());
    let engine = Engine::new(db, Arc::new(SystemClock), config);
    let cancel = CancellationToken::new();
    engine.start(cancel.clone()).await?; // maintenance, wake-ups, node heartbeat

    let task = NewTask::new("email", json!({"to": "a@b.c"}));
    let id = engine.enqueue_many(vec![task]).await?[0].id;

    let pool = WorkerPool::new(engine.clone(), WorkerConfig::new("default"))
        .register("email", Arc::new(SendEmail)); // impl Handler for SendEmail
    let worker = tokio::spawn(pool.run(cancel.clone()));
    // ANCHOR_END: example

    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let done = loop {
        let t = engine.task_get(id).await?.expect("the task");
        if t.state == TaskState::Completed || tokio::time::Instant::now() > deadline {
            break t;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(done.state, TaskState::Completed);
    assert_eq!(done.result, Some(json!({"sent_to": "a@b.c"})));
    cancel.cancel();
    worker.await?;
    Ok(())
}
