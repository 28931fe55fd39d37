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
        info: info(engine),
    };
    engine.store.node_heartbeat(&rec).await?;
    // A drain (or its end) made through another node reaches this one here.
    let me = engine.store.node_list().await?;
    if let Some(p) = engine.waker.peers() {
        p.set_peers(
            &me,
            &engine.config.node,
            engine.clock.now(),
            engine.config.heartbeat_interval,
        );
    }
    let draining = me
        .iter()
        .any(|n| n.name == engine.config.node && n.draining_at.is_some());
    engine.set_draining(draining);
    Ok(1)
}

/// What the registry row says besides the name and times: the pid, and where peers send
/// wake-ups ([`crate::peers`]).
fn info(engine: &Engine) -> serde_json::Value {
    let mut v = serde_json::json!({"pid": std::process::id()});
    if let (Some(p), Some(m)) = (engine.waker.peers(), v.as_object_mut()) {
        if let Some(w) = p.info().as_object() {
            m.extend(w.clone());
        }
    }
    v
}
