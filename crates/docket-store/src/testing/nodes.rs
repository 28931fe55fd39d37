//! Conformance cases: nodes.

use super::*;

pub(super) async fn node_registry(b: Bundle) {
    let s = &*b.store;
    let rec = |name: &str, at: Timestamp| NodeRecord {
        name: name.into(),
        started_at: t0(),
        heartbeat_at: at,
        stopped_at: None,
        version: "0.1.0".into(),
        info: json!({"listen": "127.0.0.1:7070"}),
    };
    s.node_heartbeat(&rec("a", t0())).await.unwrap();
    s.node_heartbeat(&rec("b", t0())).await.unwrap();
    s.node_heartbeat(&rec("a", t0() + secs(5))).await.unwrap();
    s.node_stop(NodeStopParams {
        name: "b",
        now: t0() + secs(6),
    })
    .await
    .unwrap();
    let nodes = s.node_list().await.unwrap();
    assert_eq!(nodes.len(), 2);
    assert_eq!(nodes[0].heartbeat_at, t0() + secs(5));
    assert_eq!(nodes[0].info, json!({"listen": "127.0.0.1:7070"}));
    assert_eq!(nodes[1].stopped_at, Some(t0() + secs(6)));
    // Retention: a node stopped, or silent, for longer than `nodes` leaves the list.
    let prune = |now, secs_kept: u64| AuxPruneParams {
        now,
        notifications: Duration::from_secs(86_400),
        audit: Duration::from_secs(86_400),
        nodes: Duration::from_secs(secs_kept),
        limit: 100,
    };
    assert_eq!(
        s.aux_prune(prune(t0() + secs(14), 10)).await.unwrap().nodes,
        0
    );
    assert_eq!(
        s.aux_prune(prune(t0() + secs(15) + secs(1) / 2, 10))
            .await
            .unwrap()
            .nodes,
        1
    );
    let left = s.node_list().await.unwrap();
    assert_eq!(
        left.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(),
        vec!["b"]
    );
}
