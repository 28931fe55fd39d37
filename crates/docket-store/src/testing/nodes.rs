//! Conformance cases: nodes.

use super::fixtures::*;

pub(super) async fn node_registry(b: Bundle) {
    let s = &*b.store;
    let rec = |name: &str, at: Timestamp| NodeRecord {
        name: name.into(),
        started_at: t0(),
        heartbeat_at: at,
        stopped_at: None,
        draining_at: None,
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

/// Draining a node (node-daemons' move to another node): its waiting tasks pinned to it move
/// to another node (or to any), running ones stay; the mark survives heartbeats until resumed.
pub(super) async fn node_drain(b: Bundle) {
    let s = &*b.store;
    let rec = |name: &str| NodeRecord {
        name: name.into(),
        started_at: t0(),
        heartbeat_at: t0(),
        stopped_at: None,
        draining_at: None,
        version: "0.1.0".into(),
        info: json!({}),
    };
    s.node_heartbeat(&rec("a")).await.unwrap();
    let pinned = |node: &str| {
        let mut n = nt("p");
        n.node = Some(node.into());
        n
    };
    let t = insert(
        s,
        vec![pinned("a"), pinned("a"), pinned("b"), nt("free")],
        t0(),
    )
    .await;
    let running = s
        .task_claim(TaskClaimParams {
            labels: Default::default(),
            kinds: None,
            stages: None,
            queue: "default".into(),
            worker: "w".into(),
            node: "a".into(),
            limit: 1,
            lease: None,
            now: t0(),
            nonce: None,
        })
        .await
        .unwrap();
    assert_eq!(running[0].id, t[0].id);
    let drain = |name: &'static str, drain: bool, to: Option<&'static str>| NodeDrainParams {
        name,
        drain,
        to,
        now: t0() + secs(1),
    };
    assert_eq!(
        s.node_drain(drain("nobody", true, None)).await.unwrap(),
        None
    );
    assert_eq!(
        s.node_drain(drain("a", true, Some("b"))).await.unwrap(),
        Some(1)
    );
    let node_of = |id| async move { s.task_get(id).await.unwrap().unwrap().node };
    assert_eq!(
        node_of(t[0].id).await.as_deref(),
        Some("a"),
        "running: stays"
    );
    assert_eq!(
        node_of(t[1].id).await.as_deref(),
        Some("b"),
        "waiting: moved"
    );
    assert_eq!(node_of(t[2].id).await.as_deref(), Some("b"));
    assert_eq!(node_of(t[3].id).await, None);
    // A heartbeat keeps the mark; draining again keeps its first time; resume clears it.
    s.node_heartbeat(&rec("a")).await.unwrap();
    let a = |l: Vec<NodeRecord>| l.into_iter().find(|n| n.name == "a").unwrap();
    assert_eq!(
        a(s.node_list().await.unwrap()).draining_at,
        Some(t0() + secs(1))
    );
    let mut again = drain("a", true, None);
    again.now = t0() + secs(9);
    assert_eq!(s.node_drain(again).await.unwrap(), Some(0));
    assert_eq!(
        a(s.node_list().await.unwrap()).draining_at,
        Some(t0() + secs(1))
    );
    assert_eq!(
        s.node_drain(drain("a", false, None)).await.unwrap(),
        Some(0)
    );
    assert_eq!(a(s.node_list().await.unwrap()).draining_at, None);
    // Without `to`, pinned tasks may run anywhere.
    s.node_heartbeat(&rec("b")).await.unwrap();
    assert_eq!(s.node_drain(drain("b", true, None)).await.unwrap(), Some(2));
    assert_eq!(node_of(t[2].id).await, None);
}

/// Workers' reports (node-daemons' worker states): the last report per name wins, the list
/// is by name, and a report older than the nodes' retention is pruned.
pub(super) async fn worker_reports(b: Bundle) {
    let s = &*b.store;
    let report = |state: &str| json!({"state": state, "tasks": [1, 2], "queue": "q"});
    for (name, at, state) in [
        ("mailer", t0(), "work"),
        ("resizer", t0() + secs(1), "idle"),
        ("mailer", t0() + secs(2), "idle"),
    ] {
        s.worker_report(WorkerReportParams {
            name,
            report: &report(state),
            interval_ms: 5000,
            now: at,
        })
        .await
        .unwrap();
    }
    let all = s.worker_list().await.unwrap();
    assert_eq!(
        all.iter()
            .map(|w| (w.name.as_str(), w.report["state"].as_str(), w.reported_at))
            .collect::<Vec<_>>(),
        vec![
            ("mailer", Some("idle"), t0() + secs(2)),
            ("resizer", Some("idle"), t0() + secs(1))
        ]
    );
    assert_eq!(all[0].interval_ms, 5000);
    assert_eq!(all[0].report["tasks"], json!([1, 2]));
    let pruned = s
        .aux_prune(AuxPruneParams {
            now: t0() + secs(11) + secs(1) / 2,
            notifications: Duration::from_secs(86_400),
            audit: Duration::from_secs(86_400),
            nodes: Duration::from_secs(10),
            limit: 100,
        })
        .await
        .unwrap();
    assert_eq!(pruned.workers, 1);
    let left = s.worker_list().await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].name, "mailer");
}
