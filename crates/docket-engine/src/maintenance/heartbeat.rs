//! Heartbeat: this node's row in the node registry (a node silent for three periods is lost).

use crate::{Engine, EngineError};
use docket_core::Timestamp;
use docket_store::NodeRecord;

/// Writes this node's heartbeat; `started` is when the node started.
///
/// # Errors
/// Store errors.
pub async fn heartbeat(engine: &Engine, started: Timestamp) -> Result<u64, EngineError> {
    let rec = NodeRecord {
        name: engine.config.node.clone(),
        started_at: started,
        heartbeat_at: engine.clock.now(),
        stopped_at: None,
        draining_at: None,
        version: env!("CARGO_PKG_VERSION").to_string(),
        info: serde_json::json!({"pid": std::process::id()}),
    };
    engine.store.node_heartbeat(&rec).await?;
    // A drain (or its end) made through another node reaches this one here.
    let me = engine.store.node_list().await?;
    let draining = me
        .iter()
        .any(|n| n.name == engine.config.node && n.draining_at.is_some());
    engine.set_draining(draining);
    Ok(1)
}
