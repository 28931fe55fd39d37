//! Conformance cases: processes.

use super::fixtures::*;

pub(super) async fn process_zombies_simple_repair_and_list(b: Bundle) {
    use docket_core::process::{HistoryRange, ProcessStatus};
    let s = &*b.store;
    let task = |kind: &str, run_in: Option<u64>| {
        let t = resolve(
            NewTask {
                queue: Some("process:z".into()),
                concurrency_key: Some("z:p1".into()),
                concurrency_limit: Some(1),
                run_in: run_in.map(Duration::from_secs),
                ..NewTask::new(kind, json!({"process_id": "p1"}))
            },
            t0(),
        );
        ResolvedTask {
            process: Some(docket_core::ProcessRef {
                namespace: "z".into(),
                id: "p1".into(),
            }),
            ..t
        }
    };
    let init = s
        .process_create(ProcessCreateParams {
            namespace: "z",
            id: "p1",
            init: task("init", None),
            now: t0(),
        })
        .await
        .unwrap();
    // The process a task belongs to is stored with it (not read from its queue or payload).
    let me = Some(docket_core::ProcessRef {
        namespace: "z".into(),
        id: "p1".into(),
    });
    assert_eq!(init.process, me);
    assert_eq!(s.task_get(init.id).await.unwrap().unwrap().process, me);
    assert!(matches!(
        s.process_create(ProcessCreateParams {
            namespace: "z",
            id: "p1",
            init: task("init", None),
            now: t0()
        })
        .await,
        Err(StoreError::Conflict(_))
    ));
    let timer = s
        .process_enqueue(ProcessEnqueueParams {
            namespace: "z",
            id: "p1",
            task: task("timeout", Some(3600)),
            require: ProcessStatus::Init,
            now: t0(),
        })
        .await
        .unwrap();
    let refused = s
        .process_enqueue(ProcessEnqueueParams {
            namespace: "z",
            id: "p1",
            task: task("call", None),
            require: ProcessStatus::Running,
            now: t0(),
        })
        .await;
    assert!(
        matches!(refused, Err(StoreError::InvalidState(ref m)) if m == "process is init"),
        "{refused:?}"
    );
    let c = s
        .task_claim(TaskClaimParams {
            labels: Default::default(),
            kinds: None,
            stages: None,
            queue: "process:z".into(),
            worker: "w".into(),
            node: "n1".into(),
            limit: 5,
            lease: Some(Duration::from_secs(10)),
            now: t0(),
            nonce: None,
        })
        .await
        .unwrap();
    assert_eq!(c.iter().map(|t| t.id).collect::<Vec<_>>(), vec![init.id]);
    // Its node dies: past the lease, the generic rescuer leaves it to zombie collection.
    assert_eq!(
        rescue(
            s,
            docket_core::task::standard_fail_rule,
            t0() + secs(11),
            100
        )
        .await
        .unwrap()
        .len(),
        0
    );
    assert_eq!(
        s.process_collect_zombies(ProcessCollectZombiesParams {
            now: t0() + secs(5),
            limit: 100,
            fail_rule: |_, _, _, _| docket_core::task::FailDecision::Discard,
            on_give_up: ProcessBreak::Break { corrupted: true },
            detail: "zombie detected".into(),
        })
        .await
        .unwrap(),
        0,
        "lease still good"
    );
    assert_eq!(
        s.process_collect_zombies(ProcessCollectZombiesParams {
            now: t0() + secs(11),
            limit: 100,
            fail_rule: |_, _, _, _| docket_core::task::FailDecision::Discard,
            on_give_up: ProcessBreak::Break { corrupted: true },
            detail: "zombie detected".into(),
        })
        .await
        .unwrap(),
        1
    );
    let ProcessWithHistory {
        process: p,
        history: _,
    } = s
        .process_get(ProcessGetParams {
            namespace: "z",
            id: "p1",
            range: HistoryRange::default(),
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (p.status, p.detail.as_deref(), p.corrupted_by),
        (ProcessStatus::Error, Some("zombie detected"), Some(init.id))
    );
    assert_eq!(p.previous_status, Some(ProcessStatus::Init));
    let t = s.task_get(init.id).await.unwrap().unwrap();
    assert_eq!(t.state, TaskState::Discarded);
    assert_eq!(t.errors[0].message, "zombie detected");
    assert_eq!(
        s.task_get(timer.id).await.unwrap().unwrap().state,
        TaskState::Cancelled
    );
    let traced = s
        .task_list(TaskListParams {
            concurrency_key: Some("z:p1".into()),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(traced.len(), 2);
    assert_eq!(
        s.process_list(ProcessListParams {
            namespace: "z",
            status: Some(ProcessStatus::Error),
            after: None,
            limit: 10
        })
        .await
        .unwrap()
        .len(),
        1
    );
    s.process_simple_repair(ProcessSimpleRepairParams {
        namespace: "z",
        id: "p1",
        now: t0() + secs(20),
    })
    .await
    .unwrap();
    let ProcessWithHistory {
        process: p,
        history: _,
    } = s
        .process_get(ProcessGetParams {
            namespace: "z",
            id: "p1",
            range: HistoryRange::default(),
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (p.status, p.previous_status, p.detail),
        (ProcessStatus::Running, Some(ProcessStatus::Error), None)
    );
    assert!(matches!(
        s.process_simple_repair(ProcessSimpleRepairParams {
            namespace: "z",
            id: "p1",
            now: t0()
        })
        .await,
        Err(StoreError::InvalidState(_))
    ));
    assert!(matches!(
        s.process_simple_repair(ProcessSimpleRepairParams {
            namespace: "z",
            id: "nope",
            now: t0()
        })
        .await,
        Err(StoreError::NotFound(_))
    ));
    let all = s
        .process_list(ProcessListParams {
            namespace: "z",
            status: None,
            after: None,
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(
        all.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
        vec!["p1"]
    );
    assert!(s
        .process_list(ProcessListParams {
            namespace: "z",
            status: None,
            after: Some("p1"),
            limit: 10
        })
        .await
        .unwrap()
        .is_empty());
    // A live process keeps its finished tasks (idempotency keys, trace) past task retention.
    let far = t0() + secs(400 * 86_400);
    s.task_prune(TaskPruneParams {
        now: far,
        retention_completed: Duration::from_secs(1),
        retention_failed: Duration::from_secs(1),
        limit: 1000,
    })
    .await
    .unwrap();
    let kept = s
        .task_list(TaskListParams {
            concurrency_key: Some("z:p1".into()),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(kept.len() >= 2, "process tasks were pruned: {kept:?}");
    // Notifications are pruned only once their namespace's webhook delivered them.
    let notes = s
        .notification_list(NotificationListParams {
            namespace: Some("z"),
            after: 0,
            limit: 100,
        })
        .await
        .unwrap();
    assert!(!notes.is_empty());
    let last = notes.last().unwrap().seq;
    assert_eq!(s.notification_last_seq().await.unwrap(), last);
    s.sink_lease(SinkLeaseParams {
        name: "webhook:z",
        owner: "me",
        until: far,
        now: t0(),
    })
    .await
    .unwrap();
    let aux = |now| AuxPruneParams {
        now,
        notifications: Duration::from_secs(1),
        audit: Duration::from_secs(1),
        nodes: Duration::from_secs(1),
        limit: 1000,
    };
    assert_eq!(
        s.aux_prune(aux(far)).await.unwrap().notifications,
        0,
        "undelivered"
    );
    assert!(s
        .sink_advance(SinkAdvanceParams {
            name: "webhook:z",
            owner: "me",
            seq: last
        })
        .await
        .unwrap());
    // A broker sink of the namespace (sink:NAME:NS) holds them back too, until it delivered
    // them; one whose lease ran out before the retention cut (removed from the configuration)
    // holds back nothing. Its backlog: how many after its cursor, and the oldest one's time.
    for (name, until) in [("sink:nats:z", far), ("sink:gone:z", t0())] {
        assert_eq!(
            s.sink_lease(SinkLeaseParams {
                name,
                owner: "me",
                until,
                now: t0(),
            })
            .await
            .unwrap(),
            Some(0)
        );
    }
    let backlog = |after, limit| {
        s.notification_backlog(NotificationBacklogParams {
            namespace: "z",
            after,
            limit,
        })
    };
    assert_eq!(
        backlog(0, 1000).await.unwrap(),
        (notes.len() as i64, Some(notes[0].created_at))
    );
    assert_eq!(backlog(0, 1).await.unwrap().0, 1, "counted up to the limit");
    assert_eq!(backlog(last, 1000).await.unwrap(), (0, None));
    assert_eq!(
        s.aux_prune(aux(far)).await.unwrap().notifications,
        0,
        "undelivered to sink:nats:z"
    );
    assert!(s
        .sink_advance(SinkAdvanceParams {
            name: "sink:nats:z",
            owner: "me",
            seq: last
        })
        .await
        .unwrap());
    assert_eq!(
        s.aux_prune(aux(far)).await.unwrap().notifications,
        notes.len() as u64
    );
    assert!(s
        .notification_list(NotificationListParams {
            namespace: Some("z"),
            after: 0,
            limit: 100
        })
        .await
        .unwrap()
        .is_empty());
    assert_eq!(s.notification_last_seq().await.unwrap(), 0);
}

/// Namespaces, and a process through its whole life at the store: a processor's result
/// committed (events, aux state, metadata, a timer) only under the lease; a failed call that
/// breaks the process and cancels its timer; import (conflict on a taken id); remove.
pub(super) async fn process_commit_fail_import_and_remove(b: Bundle) {
    use docket_core::process::{Event, HistoryRange, NewEvent, Process, ProcessStatus};
    let s = &*b.store;
    s.namespace_put(NamespacePutParams {
        name: "ns",
        config: &json!({"processor": {"url": "inproc:x"}}),
        now: t0(),
    })
    .await
    .unwrap();
    s.namespace_put(NamespacePutParams {
        name: "ns",
        config: &json!({"processor": {"url": "inproc:y"}}),
        now: t0(),
    })
    .await
    .unwrap();
    s.namespace_put(NamespacePutParams {
        name: "other",
        config: &json!({"processor": {"url": "inproc:z"}}),
        now: t0(),
    })
    .await
    .unwrap();
    assert_eq!(
        s.namespace_list()
            .await
            .unwrap()
            .into_iter()
            .map(|n| (n.name, n.config))
            .collect::<Vec<_>>(),
        vec![
            ("ns".to_string(), json!({"processor": {"url": "inproc:y"}})),
            (
                "other".to_string(),
                json!({"processor": {"url": "inproc:z"}})
            ),
        ],
        "replaced in place, listed by name"
    );
    let task = |kind: &str, id: &str, run_in: Option<u64>| {
        let t = resolve(
            NewTask {
                queue: Some("process:ns".into()),
                concurrency_key: Some(format!("ns:{id}")),
                concurrency_limit: Some(1),
                run_in: run_in.map(Duration::from_secs),
                ..NewTask::new(kind, json!({"process_id": id}))
            },
            t0(),
        );
        ResolvedTask {
            process: Some(docket_core::ProcessRef {
                namespace: "ns".into(),
                id: id.into(),
            }),
            ..t
        }
    };
    let init = s
        .process_create(ProcessCreateParams {
            namespace: "ns",
            id: "p1",
            init: task("init", "p1", None),
            now: t0(),
        })
        .await
        .unwrap();
    let claimed = claim(s, "process:ns", 1, t0()).await;
    assert_eq!(claimed[0].id, init.id);
    let lease = claimed[0].lease.as_ref().unwrap().token.clone();
    let commit = |token: &str| ProcessCommit {
        task_id: init.id,
        token: token.into(),
        namespace: "ns".into(),
        id: "p1".into(),
        events: vec![
            NewEvent {
                payload: json!({"n": 1}),
                metadata: json!({"m": 1}),
            },
            NewEvent {
                payload: json!({"n": 2}),
                metadata: json!({}),
            },
        ],
        aux_state: Some(json!({"aux": true})),
        metadata: Some(json!({"meta": 1})),
        response: json!("initialised"),
        cancel_kinds: docket_core::process::TIMER_KINDS.map(String::from).to_vec(),
        timer: Some(Box::new(task("timeout", "p1", Some(3600)))),
        also: vec![],
        now: t0() + secs(1),
    };
    assert!(matches!(
        s.process_commit(commit("stale")).await,
        Err(StoreError::LeaseLost)
    ));
    let ProcessWithHistory {
        process: p,
        history: ev,
    } = s
        .process_get(ProcessGetParams {
            namespace: "ns",
            id: "p1",
            range: HistoryRange::default(),
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (p.status, ev.len()),
        (ProcessStatus::Init, 0),
        "a stale commit changes nothing"
    );
    s.process_commit(commit(&lease)).await.unwrap();
    let ProcessWithHistory {
        process: p,
        history: ev,
    } = s
        .process_get(ProcessGetParams {
            namespace: "ns",
            id: "p1",
            range: HistoryRange::default(),
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(p.status, ProcessStatus::Running);
    assert_eq!(
        (p.aux_state, p.metadata),
        (json!({"aux": true}), json!({"meta": 1}))
    );
    assert_eq!(
        ev.iter()
            .map(|e| (e.event_id, e.payload.clone(), e.task_id))
            .collect::<Vec<_>>(),
        vec![
            (1, json!({"n": 1}), Some(init.id)),
            (2, json!({"n": 2}), Some(init.id))
        ]
    );
    assert_eq!(p.last_event_id, 2);
    let t = s.task_get(init.id).await.unwrap().unwrap();
    assert_eq!(
        (t.state, t.result),
        (TaskState::Completed, Some(json!("initialised")))
    );
    let waiting = |st: TaskState| async move {
        s.task_list(TaskListParams {
            concurrency_key: Some("ns:p1".into()),
            states: vec![st],
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap()
    };
    let timers = waiting(TaskState::Scheduled).await;
    assert_eq!(timers.len(), 1);
    assert_eq!(timers[0].kind, "timeout");

    // A call that fails for good breaks the process and cancels its waiting timer.
    let call = s
        .process_enqueue(ProcessEnqueueParams {
            namespace: "ns",
            id: "p1",
            task: task("call", "p1", None),
            require: ProcessStatus::Running,
            now: t0(),
        })
        .await
        .unwrap();
    let claimed = claim(s, "process:ns", 1, t0() + secs(2)).await;
    assert_eq!(claimed[0].id, call.id);
    let f = |token: String| ProcessFail {
        fail_rule: docket_core::task::standard_fail_rule,
        fail: TaskFail {
            id: call.id,
            token,
            error: "processor said no".into(),
            retry_in: None,
            permanent: true,
        },
        namespace: "ns".into(),
        id: "p1".into(),
        on_give_up: ProcessBreak::Break { corrupted: false },
        error_value: json!({"why": "no"}),
        now: t0() + secs(3),
    };
    assert_eq!(
        s.process_fail(f("stale".into())).await.unwrap(),
        LeaseOutcome::LeaseLost
    );
    let out = s
        .process_fail(f(claimed[0].lease.as_ref().unwrap().token.clone()))
        .await
        .unwrap();
    assert_eq!(state_run_at(&out).0, TaskState::Discarded);
    let ProcessWithHistory {
        process: p,
        history: _,
    } = s
        .process_get(ProcessGetParams {
            namespace: "ns",
            id: "p1",
            range: HistoryRange::default(),
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (p.status, p.previous_status),
        (ProcessStatus::Error, Some(ProcessStatus::Running))
    );
    assert!(p.detail.is_some(), "{p:?}");
    assert_eq!(
        s.task_get(timers[0].id).await.unwrap().unwrap().state,
        TaskState::Cancelled
    );

    // Import: a whole process with history and a timer; a taken id is a conflict.
    let imported = Process {
        namespace: "ns".into(),
        id: "p2".into(),
        status: ProcessStatus::Running,
        previous_status: None,
        status_changed_at: t0(),
        detail: None,
        aux_state: json!({"imported": true}),
        metadata: json!({}),
        corrupted_by: None,
        created_at: t0(),
        last_event_id: 3,
    };
    let history: Vec<Event> = (1..=3)
        .map(|i| Event {
            event_id: i,
            task_id: None,
            timestamp: t0() + secs(i),
            metadata: json!({}),
            payload: json!({"old": i}),
        })
        .collect();
    let import = ProcessImport {
        process: imported.clone(),
        history: history.clone(),
        timer: Some(task("timeout", "p2", Some(60))),
        now: t0(),
    };
    s.process_import(import.clone()).await.unwrap();
    assert!(matches!(
        s.process_import(import).await,
        Err(StoreError::Conflict(_))
    ));
    let ProcessWithHistory {
        process: p2,
        history: ev2,
    } = s
        .process_get(ProcessGetParams {
            namespace: "ns",
            id: "p2",
            range: HistoryRange::default(),
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (p2.aux_state, p2.last_event_id),
        (json!({"imported": true}), 3)
    );
    assert_eq!(
        ev2.iter().map(|e| e.payload.clone()).collect::<Vec<_>>(),
        history
            .iter()
            .map(|e| e.payload.clone())
            .collect::<Vec<_>>()
    );

    // A call that finished just before the remove, with an idempotency key: its caller may not
    // have read the answer yet when the remove commits.
    let answered = s
        .process_enqueue(ProcessEnqueueParams {
            namespace: "ns",
            id: "p2",
            task: ResolvedTask {
                unique_key: Some("ns:p2:idem".into()),
                ..task("call", "p2", None)
            },
            require: ProcessStatus::Running,
            now: t0(),
        })
        .await
        .unwrap();
    let claimed = claim(s, "process:ns", 1, t0() + secs(4)).await;
    assert_eq!(claimed[0].id, answered.id);
    s.task_complete_many(TaskCompleteManyParams {
        items: &[done(&claimed[0], json!({"answer": 42}))],
        now: t0() + secs(4),
        fail_rule: docket_core::task::standard_fail_rule,
    })
    .await
    .unwrap();

    // Remove: the process, its events and its unfinished tasks go; only under the lease.
    let remove = s
        .process_enqueue(ProcessEnqueueParams {
            namespace: "ns",
            id: "p2",
            task: task("remove", "p2", None),
            require: ProcessStatus::Running,
            now: t0(),
        })
        .await
        .unwrap();
    let claimed = claim(s, "process:ns", 1, t0() + secs(5)).await;
    assert_eq!(claimed[0].id, remove.id);
    assert!(matches!(
        s.process_remove(ProcessRemoveParams {
            task_id: remove.id,
            token: "stale",
            namespace: "ns",
            id: "p2",
            now: t0() + secs(6)
        })
        .await,
        Err(StoreError::LeaseLost)
    ));
    s.process_remove(ProcessRemoveParams {
        task_id: remove.id,
        token: &claimed[0].lease.as_ref().unwrap().token,
        namespace: "ns",
        id: "p2",
        now: t0() + secs(6),
    })
    .await
    .unwrap();
    assert!(s
        .process_get(ProcessGetParams {
            namespace: "ns",
            id: "p2",
            range: HistoryRange::default()
        })
        .await
        .unwrap()
        .is_none());
    let left = s
        .task_list(TaskListParams {
            concurrency_key: Some("ns:p2".into()),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(left.is_empty(), "nothing left under the process: {left:?}");
    // The finished call stays readable with its answer, detached from the process (so a new
    // process of the same id starts clean); the unfinished timer is gone.
    let kept = s.task_get(answered.id).await.unwrap().expect("answer kept");
    assert_eq!(
        (
            kept.state,
            kept.result,
            kept.concurrency_key,
            kept.unique_key
        ),
        (
            TaskState::Completed,
            Some(json!({"answer": 42})),
            None,
            None
        )
    );
    assert!(s
        .task_find_by_unique_key("ns:p2:idem")
        .await
        .unwrap()
        .is_none());
    assert!(s.task_get(remove.id).await.unwrap().is_none());
    assert!(s
        .process_get(ProcessGetParams {
            namespace: "ns",
            id: "p1",
            range: HistoryRange::default()
        })
        .await
        .unwrap()
        .is_some());
}
