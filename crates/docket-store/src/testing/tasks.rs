//! Conformance cases: tasks.

use super::fixtures::*;

pub(super) async fn insert_get_and_defaults(b: Bundle) {
    let s = &*b.store;
    s.queue_put(QueuePutParams {
        name: "mail",
        settings: &QueueSettings {
            max_attempts: Some(4),
            timeout: Some(Duration::from_secs(7)),
            ..Default::default()
        },
        now: t0(),
    })
    .await
    .unwrap();
    let mut n = nt("send");
    n.queue = Some("mail".into());
    n.progress = Some(json!("queued \u{e9}"));
    let mut later = nt("later");
    later.run_at = Some(t0() + secs(60));
    later.priority = Some(5);
    let got = insert(s, vec![n, later], t0()).await;
    assert_eq!(got.len(), 2);
    assert!(got[0].id < got[1].id);
    assert_eq!(got[0].inserted, Some(true));
    assert_eq!(
        (got[0].max_attempts, got[0].timeout),
        (4, Duration::from_secs(7))
    );
    assert_eq!(got[0].state, TaskState::Available);
    assert_eq!(got[1].state, TaskState::Scheduled);
    assert_eq!(got[1].max_attempts, docket_core::DEFAULT_MAX_ATTEMPTS);
    let back = s.task_get(got[0].id).await.unwrap().unwrap();
    assert_eq!(back.payload, json!({"k": "send"}));
    assert_eq!(back.queue, "mail");
    assert_eq!(back.created_at, t0());
    assert_eq!(back.progress, Some(json!("queued \u{e9}")));
    assert_eq!(got[1].progress, None);
    assert!(s.task_get(999_999).await.unwrap().is_none());
    let list = s
        .task_list(TaskListParams {
            states: vec![TaskState::Scheduled],
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        list.iter().map(|t| t.id).collect::<Vec<_>>(),
        vec![got[1].id]
    );
    let page = s
        .task_list(TaskListParams {
            after: Some(got[0].id),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.len(), 1);
    // The insert's answer is exactly what a later read returns (times in microseconds).
    let odd = t0() + chrono::Duration::nanoseconds(123_456_789);
    let mut n = nt("exact");
    n.run_in = Some(Duration::from_nanos(1_001));
    n.expires_at = Some(odd + secs(100));
    n.unique_key = Some("exact".into());
    n.progress = Some(json!({"step": 1, "of": [2]}));
    let ins = insert(s, vec![n], odd).await.remove(0);
    let mut read = s.task_get(ins.id).await.unwrap().unwrap();
    read.inserted = Some(true);
    assert_eq!(read, ins);
    let s_ = s.task_list(TaskListParams {
        kind: Some("exact".into()),
        limit: 5,
        ..Default::default()
    });
    assert_eq!(s_.await.unwrap().len(), 1);
}

pub(super) async fn unique_keys(b: Bundle) {
    let s = &*b.store;
    let mut a = nt("a");
    a.unique_key = Some("order-1".into());
    let mut a2 = nt("a2");
    a2.unique_key = Some("order-1".into());
    let got = insert(s, vec![a.clone(), nt("plain"), a2.clone()], t0()).await;
    assert_eq!(got[0].inserted, Some(true));
    assert_eq!(got[1].inserted, Some(true));
    assert_eq!(got[2].inserted, Some(false));
    assert_eq!(got[2].id, got[0].id);
    assert_eq!(got[1].kind, "plain");
    let again = insert(s, vec![a2.clone()], t0()).await;
    assert_eq!((again[0].id, again[0].inserted), (got[0].id, Some(false)));
    // Once the first finishes, the key is free again.
    let t = claim(s, "default", 1, t0()).await.remove(0);
    assert_eq!(t.id, got[0].id);
    s.task_complete_many(TaskCompleteManyParams {
        fail_rule: docket_core::task::standard_fail_rule,
        items: &[done(&t, json!(1))],
        now: t0(),
    })
    .await
    .unwrap();
    let third = insert(s, vec![a2], t0()).await;
    assert_eq!(third[0].inserted, Some(true));
    assert_ne!(third[0].id, got[0].id);
}

pub(super) async fn cancel_and_retry_by_hand(b: Bundle) {
    let s = &*b.store;
    let got = insert(s, vec![nt("waiting"), nt("running"), nt("running2")], t0()).await;
    let c = s
        .task_cancel(TaskCancelParams {
            id: got[0].id,
            now: t0(),
        })
        .await
        .unwrap();
    assert_eq!(c.state, TaskState::Cancelled);
    assert_eq!(c.finished_at, Some(t0()));
    // Cancelling again is harmless.
    assert_eq!(
        s.task_cancel(TaskCancelParams {
            id: got[0].id,
            now: t0()
        })
        .await
        .unwrap()
        .state,
        TaskState::Cancelled
    );
    let running = claim(s, "default", 2, t0()).await;
    assert_eq!(running.len(), 2);
    let r = s
        .task_cancel(TaskCancelParams {
            id: running[0].id,
            now: t0(),
        })
        .await
        .unwrap();
    assert_eq!(r.state, TaskState::Running);
    assert_eq!(r.cancel_requested_at, Some(t0()));
    let e = s
        .task_heartbeat(TaskHeartbeatParams {
            fail_rule: docket_core::task::standard_fail_rule,
            id: running[0].id,
            token: running[0].lease.clone().unwrap().token,
            progress: None,
            lease: None,
            now: t0() + secs(1),
        })
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::Cancelled));
    assert_eq!(
        s.task_get(running[0].id).await.unwrap().unwrap().state,
        TaskState::Cancelled
    );
    // Its late complete is answered `cancelled` and changes nothing.
    let outs = s
        .task_complete_many(TaskCompleteManyParams {
            fail_rule: docket_core::task::standard_fail_rule,
            items: &[done(&running[0], json!(1))],
            now: t0(),
        })
        .await
        .unwrap();
    assert_eq!(outs, vec![LeaseOutcome::Cancelled]);
    // A cancel that lands while the work finishes: complete answers cancelled, result kept.
    s.task_cancel(TaskCancelParams {
        id: running[1].id,
        now: t0(),
    })
    .await
    .unwrap();
    let outs = s
        .task_complete_many(TaskCompleteManyParams {
            fail_rule: docket_core::task::standard_fail_rule,
            items: &[done(&running[1], json!("r"))],
            now: t0(),
        })
        .await
        .unwrap();
    assert_eq!(outs, vec![LeaseOutcome::Cancelled]);
    let t = s.task_get(running[1].id).await.unwrap().unwrap();
    assert_eq!(
        (t.state, t.result),
        (TaskState::Cancelled, Some(json!("r")))
    );
    // Never started again...
    assert!(claim(s, "default", 10, t0()).await.is_empty());
    // ...unless retried by hand.
    let r = s
        .task_retry(TaskRetryParams {
            id: got[0].id,
            now: t0() + secs(5),
        })
        .await
        .unwrap();
    assert_eq!(r.state, TaskState::Available);
    assert_eq!(r.finished_at, None);
    let again = claim(s, "default", 10, t0() + secs(5)).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].id, got[0].id);
    s.task_complete_many(TaskCompleteManyParams {
        fail_rule: docket_core::task::standard_fail_rule,
        items: &[done(&again[0], json!(null))],
        now: t0(),
    })
    .await
    .unwrap();
    let e = s
        .task_retry(TaskRetryParams {
            id: got[0].id,
            now: t0(),
        })
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::InvalidState(_)), "{e:?}");
    let e = s
        .task_cancel(TaskCancelParams {
            id: got[0].id,
            now: t0(),
        })
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::InvalidState(_)), "{e:?}");
    assert!(matches!(
        s.task_retry(TaskRetryParams {
            id: 99_999,
            now: t0()
        })
        .await
        .unwrap_err(),
        StoreError::NotFound(_)
    ));
    assert!(matches!(
        s.task_cancel(TaskCancelParams {
            id: 99_999,
            now: t0()
        })
        .await
        .unwrap_err(),
        StoreError::NotFound(_)
    ));
}

pub(super) async fn retry_of_exhausted_task_gets_one_more_attempt(b: Bundle) {
    let s = &*b.store;
    let mut n = nt("x");
    n.max_attempts = Some(1);
    let id = insert(s, vec![n], t0()).await[0].id;
    let t = claim(s, "default", 1, t0()).await.remove(0);
    s.task_fail_many(TaskFailManyParams {
        fail_rule: docket_core::task::standard_fail_rule,
        items: &[fail(&t, "nope")],
        worker: None,
        now: t0(),
    })
    .await
    .unwrap();
    assert_eq!(
        s.task_get(id).await.unwrap().unwrap().state,
        TaskState::Discarded
    );
    let r = s
        .task_retry(TaskRetryParams { id, now: t0() })
        .await
        .unwrap();
    assert_eq!(r.max_attempts, 2);
    let t = claim(s, "default", 1, t0()).await.remove(0);
    assert_eq!(t.attempt, 2);
}

pub(super) async fn prune_by_retention(b: Bundle) {
    let s = &*b.store;
    s.queue_put(QueuePutParams {
        name: "short",
        settings: &QueueSettings {
            retention_completed: Some(Duration::from_secs(10)),
            ..Default::default()
        },
        now: t0(),
    })
    .await
    .unwrap();
    let mut v: Vec<NewTask> = (0..5).map(|i| nt(&format!("d{i}"))).collect();
    let mut sh = nt("short");
    sh.queue = Some("short".into());
    v.push(sh);
    v.push(nt("failed"));
    insert(s, v, t0()).await;
    let c = claim(s, "default", 10, t0()).await;
    let (ok, bad) = c.split_at(5);
    let items: Vec<TaskComplete> = ok.iter().map(|t| done(t, json!(1))).collect();
    s.task_complete_many(TaskCompleteManyParams {
        fail_rule: docket_core::task::standard_fail_rule,
        items: &items,
        now: t0(),
    })
    .await
    .unwrap();
    discard(s, &bad[0], "x", t0()).await;
    let short = claim(s, "short", 1, t0()).await;
    s.task_complete_many(TaskCompleteManyParams {
        fail_rule: docket_core::task::standard_fail_rule,
        items: &[done(&short[0], json!(1))],
        now: t0(),
    })
    .await
    .unwrap();
    let p = |now| TaskPruneParams {
        now,
        retention_completed: Duration::from_secs(3600),
        retention_failed: Duration::from_secs(7200),
        limit: 2,
    };
    assert_eq!(
        s.task_prune(p(t0() + secs(11))).await.unwrap(),
        1,
        "the short queue's"
    );
    assert_eq!(
        s.task_prune(p(t0() + secs(3601))).await.unwrap(),
        2,
        "small batches"
    );
    assert_eq!(s.task_prune(p(t0() + secs(3601))).await.unwrap(), 2);
    assert_eq!(s.task_prune(p(t0() + secs(3601))).await.unwrap(), 1);
    assert_eq!(
        s.task_prune(p(t0() + secs(3601))).await.unwrap(),
        0,
        "discarded kept longer"
    );
    assert_eq!(s.task_prune(p(t0() + secs(7201))).await.unwrap(), 1);
    assert!(s
        .task_list(TaskListParams {
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap()
        .is_empty());
}

pub(super) async fn bulk_insert_claim_complete(b: Bundle) {
    let s = &*b.store;
    let v: Vec<ResolvedTask> = (0..2000)
        .map(|i| resolve(nt(&format!("b{i}")), t0()))
        .collect();
    let got = s
        .task_insert_many(TaskInsertManyParams {
            tasks: v,
            now: t0(),
        })
        .await
        .unwrap();
    assert_eq!(got.len(), 2000);
    assert!(got.windows(2).all(|w| w[0].id < w[1].id));
    assert_eq!(got[1999].kind, "b1999");
    let c = claim(s, "default", 500, t0()).await;
    assert_eq!(c.len(), 500);
    assert_eq!(c[0].kind, "b0");
    let items: Vec<TaskComplete> = c.iter().map(|t| done(t, json!({"n": t.id}))).collect();
    let outs = s
        .task_complete_many(TaskCompleteManyParams {
            fail_rule: docket_core::task::standard_fail_rule,
            items: &items,
            now: t0(),
        })
        .await
        .unwrap();
    assert_eq!(outs.len(), 500);
    assert!(outs.iter().all(|o| matches!(
        o,
        LeaseOutcome::Ok {
            state: TaskState::Completed,
            ..
        }
    )));
    let q = s.queue_get("default").await.unwrap();
    assert_eq!(q.counts[&TaskState::Completed], 500);
    assert_eq!(q.counts[&TaskState::Available], 1500);

    // Each id returned by a batch names the row it was given for, across the backends' own
    // statement splits, with unique keys (new and held) in the middle of the batch.
    let mut v: Vec<ResolvedTask> = (0..2500)
        .map(|i| resolve(nt(&format!("m{i}")), t0()))
        .collect();
    for i in [0usize, 999, 1000, 1700, 2499] {
        v[i].unique_key = Some(format!("u{i}"));
    }
    v[1701].unique_key = Some("u1700".into());
    let got = s
        .task_insert_many(TaskInsertManyParams {
            tasks: v,
            now: t0(),
        })
        .await
        .unwrap();
    assert_eq!(got.len(), 2500);
    assert_eq!(got[1701].inserted, Some(false));
    assert_eq!(
        got[1701].id, got[1700].id,
        "the held key answers with its holder"
    );
    for (i, t) in got.iter().enumerate() {
        let stored = s.task_get(t.id).await.unwrap().unwrap();
        let want = if i == 1701 { 1700 } else { i };
        assert_eq!(stored.kind, format!("m{want}"), "row {i}");
        assert_eq!(stored.payload, t.payload, "row {i}");
        assert_eq!(stored.created_at, t.created_at, "row {i}");
        assert_eq!(stored.run_at, t.run_at, "row {i}");
    }
}

pub(super) async fn dashboard_reads_and_operator_actions(b: Bundle) {
    let s = &*b.store;
    let tasks = insert(
        s,
        vec![
            NewTask::new("mail", json!({"to": "Needle@example.com"})),
            NewTask::new("mail", json!({"to": "hay@example.com"})),
            NewTask {
                run_in: Some(std::time::Duration::from_secs(3600)),
                ..nt("later")
            },
        ],
        t0(),
    )
    .await;
    // Text in the payload (case-insensitive), then in the errors.
    let found = s
        .task_list(TaskListParams {
            text: Some("needle".into()),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        found.iter().map(|t| t.id).collect::<Vec<_>>(),
        vec![tasks[0].id]
    );
    // By trace id, unique key and worker; an id window bounds any of them.
    let ids = |p: TaskListParams| async move {
        s.task_list(TaskListParams { limit: 10, ..p })
            .await
            .unwrap()
            .iter()
            .map(|t| t.id)
            .collect::<Vec<_>>()
    };
    let keyed = insert(
        s,
        vec![NewTask {
            unique_key: Some("order-7".into()),
            trace_id: Some("0af7651916cd43dd8448eb211c80319c".into()),
            queue: Some("search".into()),
            ..nt("keyed")
        }],
        t0(),
    )
    .await
    .remove(0);
    assert_eq!(
        ids(TaskListParams {
            trace_id: Some("0af7651916cd43dd8448eb211c80319c".into()),
            ..Default::default()
        })
        .await,
        vec![keyed.id]
    );
    assert_eq!(
        ids(TaskListParams {
            unique_key: Some("order-7".into()),
            ..Default::default()
        })
        .await,
        vec![keyed.id]
    );
    claim(s, "search", 10, t0()).await;
    assert_eq!(
        ids(TaskListParams {
            worker: Some("w1".into()),
            ..Default::default()
        })
        .await,
        vec![keyed.id]
    );
    assert!(ids(TaskListParams {
        worker: Some("w2".into()),
        ..Default::default()
    })
    .await
    .is_empty());
    assert_eq!(
        ids(TaskListParams {
            min_id: Some(tasks[1].id),
            max_id: Some(tasks[2].id),
            ..Default::default()
        })
        .await,
        vec![tasks[1].id, tasks[2].id]
    );
    assert!(ids(TaskListParams {
        text: Some("needle".into()),
        min_id: Some(tasks[0].id + 1),
        ..Default::default()
    })
    .await
    .is_empty());
    // Oldest available per queue.
    let oldest = s.queue_oldest_available().await.unwrap();
    assert_eq!(
        oldest,
        vec![QueueOldest {
            queue: "default".into(),
            run_at: t0()
        }]
    );
    // Run now: scheduled → available; an available task is refused.
    let now = t0() + secs(5);
    let t = s
        .task_run_now(TaskRunNowParams {
            id: tasks[2].id,
            now,
        })
        .await
        .unwrap();
    assert_eq!((t.state, t.run_at), (TaskState::Available, now));
    assert!(matches!(
        s.task_run_now(TaskRunNowParams {
            id: tasks[0].id,
            now
        })
        .await,
        Err(StoreError::InvalidState(_))
    ));
    assert!(matches!(
        s.task_run_now(TaskRunNowParams { id: 999_999, now }).await,
        Err(StoreError::NotFound(_))
    ));
    // Throughput: completed and discarded per minute.
    let c = claim(s, "default", 3, t0() + secs(10)).await;
    assert_eq!(c.len(), 3);
    s.task_complete_many(TaskCompleteManyParams {
        fail_rule: docket_core::task::standard_fail_rule,
        items: &[done(&c[0], json!(1)), done(&c[1], json!(2))],
        now: t0() + secs(61),
    })
    .await
    .unwrap();
    discard(s, &c[2], "boom in the errors", t0() + secs(130)).await;
    let by_error = s
        .task_list(TaskListParams {
            text: Some("BOOM".into()),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(by_error.len(), 1);
    let tp = s.task_throughput(t0()).await.unwrap();
    let minute = |m: i64| t0() + secs(60 * m);
    assert_eq!(
        tp.iter()
            .map(|t| (t.minute, t.completed, t.failed))
            .collect::<Vec<_>>(),
        vec![(minute(1), 2, 0), (minute(2), 0, 1)]
    );
    assert!(s
        .task_throughput(t0() + secs(3600))
        .await
        .unwrap()
        .is_empty());
    // The audit log, newest first.
    s.audit_add(AuditAddParams {
        actor: "cli:ann",
        action: "task.cancel",
        target: "task:1",
        detail: Some(json!({"q": "default"})),
        now: t0(),
    })
    .await
    .unwrap();
    s.audit_add(AuditAddParams {
        actor: "dashboard",
        action: "queue.pause",
        target: "queue:default",
        detail: None,
        now: t0() + secs(1),
    })
    .await
    .unwrap();
    let log = s.audit_list(10).await.unwrap();
    assert_eq!(log.len(), 2);
    assert_eq!(
        (log[0].actor.as_str(), log[0].action.as_str()),
        ("dashboard", "queue.pause")
    );
    assert_eq!(log[1].detail, Some(json!({"q": "default"})));
    assert_eq!(log[1].at, t0());
    assert_eq!(s.audit_list(1).await.unwrap().len(), 1);
    // Audit retention: entries older than `audit` go, newer stay.
    let pruned = s
        .aux_prune(AuxPruneParams {
            now: t0() + secs(10),
            notifications: Duration::from_secs(86_400),
            audit: Duration::from_millis(9_500),
            nodes: Duration::from_secs(86_400),
            limit: 100,
        })
        .await
        .unwrap();
    assert_eq!(pruned.audit, 1);
    assert_eq!(s.audit_list(10).await.unwrap()[0].action, "queue.pause");
    let pool = s.pool_connections();
    assert!(pool.in_use + pool.idle >= 1);
}

/// asyncflow's user task list: tasks carry a `user_id`; a list filters by it, with several
/// states at once.
pub(super) async fn user_task_lists(b: Bundle) {
    let s = &*b.store;
    let mk = |u: Option<&str>| {
        let mut n = nt("u");
        n.user_id = u.map(str::to_string);
        n
    };
    let t = insert(
        s,
        vec![mk(Some("u1")), mk(Some("u1")), mk(Some("u2")), mk(None)],
        t0(),
    )
    .await;
    assert_eq!(t[0].user_id.as_deref(), Some("u1"));
    assert_eq!(
        s.task_get(t[2].id)
            .await
            .unwrap()
            .unwrap()
            .user_id
            .as_deref(),
        Some("u2")
    );
    let c = claim(s, "default", 1, t0()).await;
    assert_eq!(c[0].id, t[0].id);
    let list = |user: &str, states: Vec<TaskState>| TaskListParams {
        user_id: Some(user.into()),
        states,
        limit: 100,
        ..Default::default()
    };
    let ids = |v: Vec<docket_core::Task>| v.iter().map(|t| t.id).collect::<Vec<_>>();
    assert_eq!(
        ids(s.task_list(list("u1", vec![])).await.unwrap()),
        vec![t[0].id, t[1].id]
    );
    assert_eq!(
        ids(s
            .task_list(list("u1", vec![TaskState::Running, TaskState::Retryable]))
            .await
            .unwrap()),
        vec![t[0].id]
    );
    assert_eq!(
        ids(s
            .task_list(list("u2", vec![TaskState::Available]))
            .await
            .unwrap()),
        vec![t[2].id]
    );
    assert!(s
        .task_list(list("nobody", vec![]))
        .await
        .unwrap()
        .is_empty());
}

/// A task changes by a rule applied to its locked row: every written field round-trips, the
/// rule sees the lease token of a running task, its refusal changes nothing, and an available
/// task in a new queue is claimable there.
pub(super) async fn task_update_under_lock(b: Bundle) {
    let s = &*b.store;
    let id = insert(s, vec![nt("u")], t0()).await[0].id;
    let t = s
        .task_update(TaskUpdateParams {
            id,
            rule: std::sync::Arc::new(|t, token| {
                assert_eq!(token, None, "a waiting task has no lease");
                let mut n = t.clone();
                n.queue = "other".into();
                n.priority = 9;
                n.run_at = t0() + secs(1);
                n.state = TaskState::Available;
                n.payload = json!({"new": true});
                n.node = Some("n1".into());
                n.max_attempts = 4;
                n.stage = Some("two".into());
                n.progress = Some(json!(10));
                n.attempt = 2;
                n.updated_at = t0() + secs(5);
                n.backoff = docket_core::Backoff {
                    kind: docket_core::BackoffKind::Linear,
                    initial: Duration::from_secs(3),
                    coefficient: 1.5,
                    max: Duration::from_secs(88),
                    jitter: 0.0,
                };
                Ok(n)
            }),
        })
        .await
        .unwrap();
    assert_eq!(
        (
            t.queue.as_str(),
            t.priority,
            t.run_at,
            t.state,
            t.node.as_deref(),
            t.max_attempts,
            t.stage.as_deref(),
        ),
        (
            "other",
            9,
            t0() + secs(1),
            TaskState::Available,
            Some("n1"),
            4,
            Some("two")
        )
    );
    assert_eq!(
        (t.payload, t.progress),
        (json!({"new": true}), Some(json!(10)))
    );
    let stored = s.task_get(id).await.unwrap().unwrap();
    assert_eq!(stored.queue, "other");
    assert_eq!(
        (stored.attempt, stored.backoff),
        (
            2,
            docket_core::Backoff {
                kind: docket_core::BackoffKind::Linear,
                initial: Duration::from_secs(3),
                coefficient: 1.5,
                max: Duration::from_secs(88),
                jitter: 0.0,
            }
        ),
        "attempt and the whole retry policy are stored"
    );
    assert_eq!(stored.updated_at, t0() + secs(5), "the edit's time is kept");
    assert_eq!(s.task_lease_token(id).await.unwrap(), None, "not running");
    let held = claim(s, "other", 1, t0() + secs(2)).await.remove(0);
    let token = held.lease.clone().unwrap().token;
    assert_eq!(
        held.updated_at,
        t0() + secs(5),
        "an earlier claim does not move it back"
    );
    // A heartbeat without progress changes nothing a user sees; with progress it is an edit.
    let beat = |progress: Option<serde_json::Value>, at: i64| TaskHeartbeatParams {
        id,
        token: token.clone(),
        progress,
        lease: None,
        now: t0() + secs(at),
        fail_rule: docket_core::task::standard_fail_rule,
    };
    assert_eq!(
        s.task_heartbeat(beat(None, 6)).await.unwrap().updated_at,
        t0() + secs(5)
    );
    assert_eq!(
        s.task_heartbeat(beat(Some(json!(42)), 7))
            .await
            .unwrap()
            .updated_at,
        t0() + secs(7)
    );
    assert_eq!(
        s.task_lease_token(id).await.unwrap().as_deref(),
        Some(token.as_str())
    );
    let seen = std::sync::Arc::new(std::sync::Mutex::new(None));
    let seen2 = seen.clone();
    let e = s
        .task_update(TaskUpdateParams {
            id,
            rule: std::sync::Arc::new(move |_, token| {
                *seen2.lock().unwrap() = token.map(str::to_string);
                Err(StoreError::InvalidState("no".into()))
            }),
        })
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::InvalidState(_)), "{e:?}");
    assert_eq!(seen.lock().unwrap().as_deref(), Some(token.as_str()));
    let r = s.task_get(id).await.unwrap().unwrap();
    assert_eq!(
        (r.state, r.priority),
        (TaskState::Running, 9),
        "a refusal changes nothing"
    );
    let e = s
        .task_update(TaskUpdateParams {
            id: id + 1000,
            rule: std::sync::Arc::new(|t, _| Ok(t.clone())),
        })
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::NotFound(_)), "{e:?}");
}

/// Finished tasks leave the hot table (MySQL: `rotate` moves them to `docket_tasks_done`,
/// migration 0004; PostgreSQL: the UPDATE that finishes a task moves it to the done partition,
/// 0020). Wherever they are, every read finds them and every change to one still works.
pub(super) async fn finished_tasks_leave_the_hot_table(b: Bundle) {
    let s = &*b.store;
    let mut keyed = nt("keyed");
    keyed.unique_key = Some("archive-1".into());
    let ids: Vec<i64> = insert(s, vec![keyed.clone(), nt("b"), nt("c"), nt("d")], t0())
        .await
        .iter()
        .map(|t| t.id)
        .collect();
    let got = claim(s, "default", 4, t0()).await;
    assert_eq!(got.len(), 4);
    let by_id = |id: i64| got.iter().find(|t| t.id == id).unwrap();
    let items: Vec<TaskComplete> = ids[..3]
        .iter()
        .map(|id| done(by_id(*id), json!({"n": id})))
        .collect();
    let out = s
        .task_complete_many(TaskCompleteManyParams {
            items: &items,
            now: t0() + secs(1),
            fail_rule: docket_core::task::standard_fail_rule,
        })
        .await
        .unwrap();
    assert!(out
        .iter()
        .all(|o| state_run_at(o).0 == TaskState::Completed));
    s.task_fail_many(TaskFailManyParams {
        items: &[TaskFail {
            permanent: true,
            ..fail(by_id(ids[3]), "gave up")
        }],
        worker: None,
        now: t0() + secs(1),
        fail_rule: docket_core::task::standard_fail_rule,
    })
    .await
    .unwrap();
    let rotate = || {
        s.task_rotate(TaskRotateParams {
            now: t0() + secs(2),
            every: Duration::ZERO,
            min_fill_bytes: 0,
            idle_every: Duration::ZERO,
            lock_timeout: Duration::from_secs(5),
            batch: 2,
            most_moved: i64::MAX,
        })
    };
    let r = rotate().await.unwrap();
    match s.backend() {
        // In batches of 2 until none is left; the next call finds nothing. (The conformance
        // suite's store archives before every other call, so what is moved here is what the
        // last call finished: the discarded task.)
        Backend::MySql => {
            assert_eq!(r, Rotation::Archived { moved: 1 });
            assert_eq!(rotate().await.unwrap(), Rotation::Archived { moved: 0 });
        }
        Backend::Sqlite => assert_eq!(r, Rotation::Unsupported),
        Backend::Postgres => {}
    }
    for (i, id) in ids.iter().enumerate() {
        let t = s
            .task_get(*id)
            .await
            .unwrap()
            .expect("a finished task is found");
        let want = if i < 3 {
            TaskState::Completed
        } else {
            TaskState::Discarded
        };
        assert_eq!(t.state, want);
        if i < 3 {
            assert_eq!(t.result, Some(json!({"n": id})));
        }
    }
    // Lists page through them in id order, either way, filtered by state.
    let list = |states: Vec<TaskState>, after: Option<i64>, descending: bool| {
        s.task_list(TaskListParams {
            states,
            after,
            descending,
            limit: 2,
            ..Default::default()
        })
    };
    let page = list(vec![TaskState::Completed], None, false).await.unwrap();
    assert_eq!(page.iter().map(|t| t.id).collect::<Vec<_>>(), ids[..2]);
    let page = list(vec![TaskState::Completed], Some(ids[1]), false)
        .await
        .unwrap();
    assert_eq!(page.iter().map(|t| t.id).collect::<Vec<_>>(), ids[2..3]);
    let page = list(vec![], None, true).await.unwrap();
    assert_eq!(
        page.iter().map(|t| t.id).collect::<Vec<_>>(),
        [ids[3], ids[2]]
    );
    // The idempotency key answers with the finished task, and is free for a new one.
    let k = s
        .task_find_by_unique_key("archive-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(k.id, ids[0]);
    let again = insert(s, vec![keyed], t0() + secs(3)).await;
    assert_eq!(again[0].inserted, Some(true));
    assert_ne!(again[0].id, ids[0]);
    // A second completion of a finished task is refused as before, not "not found".
    let out = s
        .task_complete_many(TaskCompleteManyParams {
            items: &items[..1],
            now: t0() + secs(3),
            fail_rule: docket_core::task::standard_fail_rule,
        })
        .await
        .unwrap();
    assert_eq!(out[0], LeaseOutcome::LeaseLost);
    // The per-minute throughput counts them.
    let tp = s.task_throughput(t0() - secs(60)).await.unwrap();
    let (c, f) = tp
        .iter()
        .fold((0, 0), |(c, f), m| (c + m.completed, f + m.failed));
    assert_eq!((c, f), (3, 1));
    // A discarded task retried by hand comes back to work.
    let r = s
        .task_retry(TaskRetryParams {
            id: ids[3],
            now: t0() + secs(4),
        })
        .await
        .unwrap();
    assert_eq!(r.state, TaskState::Available);
    let back = claim(s, "default", 10, t0() + secs(4)).await;
    assert!(back.iter().any(|t| t.id == ids[3]), "{back:?}");
    // Retention prunes them wherever they are.
    let pruned = s
        .task_prune(TaskPruneParams {
            now: t0() + secs(3600 * 48),
            retention_completed: Duration::from_secs(3600),
            retention_failed: Duration::from_secs(3600),
            limit: 100,
        })
        .await
        .unwrap();
    assert_eq!(pruned, 3);
    for id in &ids[..3] {
        assert!(s.task_get(*id).await.unwrap().is_none(), "task {id} pruned");
    }
}

/// `task_count` (a bulk action's confirmation) and `task_delete` (bulk delete): only finished
/// tasks go, the kept counts follow, and a second delete finds nothing.
pub(super) async fn bulk_count_and_delete(b: Bundle) {
    let s = &*b.store;
    let in_d = || NewTask {
        queue: Some("d".into()),
        ..nt("k")
    };
    let all = insert(s, (0..5).map(|_| in_d()).collect(), t0()).await;
    let other = insert(s, vec![nt("k")], t0()).await;
    let got = claim(s, "d", 3, t0()).await;
    s.task_complete_many(TaskCompleteManyParams {
        fail_rule: docket_core::task::standard_fail_rule,
        items: &[done(&got[0], json!(1)), done(&got[1], json!(1))],
        now: t0(),
    })
    .await
    .unwrap();
    discard(s, &got[2], "x", t0()).await;
    // Counted into the kept counts, so the delete must subtract from them.
    s.counts_step(CountsStepParams {
        now: t0() + secs(10),
        recount_every: Duration::from_secs(3600),
    })
    .await
    .unwrap();
    let count = |states: Vec<TaskState>, limit: i64| async move {
        s.task_count(TaskListParams {
            queue: Some("d".into()),
            states,
            limit,
            ..Default::default()
        })
        .await
        .unwrap()
    };
    assert_eq!(count(vec![], 100).await, 5);
    assert_eq!(count(vec![TaskState::Completed], 100).await, 2);
    assert_eq!(
        count(vec![TaskState::Completed, TaskState::Discarded], 100).await,
        3
    );
    assert_eq!(count(vec![], 2).await, 2, "counted up to the limit");
    let mut ids: Vec<i64> = all.iter().map(|t| t.id).collect();
    ids.push(other[0].id);
    ids.push(i64::MAX);
    assert_eq!(s.task_delete(&ids).await.unwrap(), 3);
    for t in &got {
        assert_eq!(s.task_get(t.id).await.unwrap(), None, "finished: deleted");
    }
    assert_eq!(count(vec![], 100).await, 2, "the unfinished stay");
    assert!(s.task_get(other[0].id).await.unwrap().is_some());
    let c = s.queue_get("d").await.unwrap().counts;
    assert_eq!(
        (
            c[&TaskState::Available],
            c[&TaskState::Completed],
            c[&TaskState::Discarded]
        ),
        (2, 0, 0),
        "the kept counts lost what was deleted"
    );
    assert_eq!(s.task_delete(&ids).await.unwrap(), 0);
    assert_eq!(s.task_delete(&[]).await.unwrap(), 0);
    // A retry (one by one, or a bulk retry's) takes a counted failure out of the counts at once.
    let r = insert(
        s,
        vec![NewTask {
            queue: Some("r".into()),
            ..nt("k")
        }],
        t0() + secs(20),
    )
    .await;
    let got = claim(s, "r", 1, t0() + secs(20)).await;
    discard(s, &got[0], "x", t0() + secs(20)).await;
    s.counts_step(CountsStepParams {
        now: t0() + secs(30),
        recount_every: Duration::from_secs(3600),
    })
    .await
    .unwrap();
    let discarded = || async { s.queue_get("r").await.unwrap().counts[&TaskState::Discarded] };
    assert_eq!(discarded().await, 1);
    s.task_retry(TaskRetryParams {
        id: r[0].id,
        now: t0() + secs(31),
    })
    .await
    .unwrap();
    assert_eq!(
        discarded().await,
        0,
        "a retried task leaves the kept counts"
    );
    assert_eq!(
        s.queue_get("r").await.unwrap().counts[&TaskState::Available],
        1
    );
}

/// A debounced enqueue of kind `kind` with key `key` at `now`: period 10 s, max_wait 25 s.
async fn debounce(
    s: &dyn Store,
    key: &str,
    payload: serde_json::Value,
    now: Timestamp,
) -> docket_core::Task {
    let mut n = NewTask::new("digest", payload);
    n.debounce = Some(docket_core::debounce::Debounce {
        key: key.into(),
        period: Duration::from_secs(10),
        max_wait: Some(Duration::from_secs(25)),
    });
    n.priority = Some(3);
    s.task_debounce(TaskDebounceParams {
        task: resolve(n, now),
        now,
    })
    .await
    .unwrap()
}

/// Debounce (issue 43): one waiting task per key takes each enqueue's fields and a run_at
/// moved on by the period, never past the first enqueue + max_wait; a claimed task is left
/// alone and the next enqueue makes a new one; concurrent enqueues make one task.
pub(super) async fn debounce_keeps_one_waiting_task(b: Bundle) {
    let s = &*b.store;
    let first = debounce(s, "user:1", json!({"n": 1}), t0()).await;
    assert_eq!((first.inserted, first.replaced), (Some(true), Some(false)));
    assert_eq!(first.state, TaskState::Scheduled);
    assert_eq!(first.run_at, t0() + secs(10));
    assert_eq!(first.debounce_key.as_deref(), Some("user:1"));
    // Another key is another task.
    let other = debounce(s, "user:2", json!({"n": 1}), t0()).await;
    assert_ne!(other.id, first.id);
    // Replaced: payload and fields, run_at = now + period.
    let second = debounce(s, "user:1", json!({"n": 2}), t0() + secs(4)).await;
    assert_eq!(
        (second.inserted, second.replaced),
        (Some(false), Some(true))
    );
    assert_eq!(second.id, first.id);
    assert_eq!(second.payload, json!({"n": 2}));
    assert_eq!(second.run_at, t0() + secs(14));
    assert_eq!(second.created_at, first.created_at);
    // Never past the first enqueue + max_wait (25 s).
    let third = debounce(s, "user:1", json!({"n": 3}), t0() + secs(20)).await;
    assert_eq!(third.id, first.id);
    assert_eq!(third.run_at, t0() + secs(25));
    let back = s.task_get(first.id).await.unwrap().unwrap();
    assert_eq!(
        (back.payload.clone(), back.run_at, back.state),
        (json!({"n": 3}), t0() + secs(25), TaskState::Scheduled)
    );
    assert_eq!(back.debounce_key.as_deref(), Some("user:1"));
    // Due and available, still waiting: replaced, and the deadline holds (run_at = deadline
    // = now: available).
    let at = t0() + secs(25);
    s.task_promote(TaskPromoteParams {
        now: at,
        limit: 100,
    })
    .await
    .unwrap();
    let fourth = debounce(s, "user:1", json!({"n": 4}), at).await;
    assert_eq!((fourth.id, fourth.state), (first.id, TaskState::Available));
    // Claimed: it runs with the last payload, and the next enqueue makes a new task.
    let got = claim(s, "default", 10, at).await;
    let ran: Vec<_> = got.iter().filter(|t| t.id == first.id).collect();
    assert_eq!(ran.len(), 1);
    assert_eq!(ran[0].payload, json!({"n": 4}));
    let fifth = debounce(s, "user:1", json!({"n": 5}), at + secs(1)).await;
    assert_eq!((fifth.inserted, fifth.replaced), (Some(true), Some(false)));
    assert_ne!(fifth.id, first.id);
    assert_eq!(fifth.run_at, at + secs(11));
    // The running task is untouched.
    let running = s.task_get(first.id).await.unwrap().unwrap();
    assert_eq!(
        (running.state, running.payload),
        (TaskState::Running, json!({"n": 4}))
    );
    // A task without debounce is refused here.
    let plain = resolve(nt("plain"), t0());
    assert!(matches!(
        s.task_debounce(TaskDebounceParams {
            task: plain,
            now: t0()
        })
        .await,
        Err(StoreError::Invalid(_))
    ));
    // Concurrent enqueues of a fresh key (the pool's connections race): one task, the others
    // replaced it.
    let now = t0() + secs(100);
    let mut joins = Vec::new();
    for i in 0..12 {
        let store = b.store.clone();
        joins.push(tokio::spawn(async move {
            debounce(&*store, "burst", json!({"n": i}), now).await
        }));
    }
    let mut made = Vec::new();
    for j in joins {
        made.push(j.await.unwrap());
    }
    let created: Vec<_> = made.iter().filter(|t| t.inserted == Some(true)).collect();
    assert_eq!(created.len(), 1, "{made:?}");
    assert!(made.iter().all(|t| t.id == created[0].id));
    let waiting = s
        .task_list(TaskListParams {
            kind: Some("digest".into()),
            states: vec![TaskState::Scheduled, TaskState::Available],
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    let keys: Vec<_> = waiting
        .iter()
        .filter_map(|t| t.debounce_key.clone())
        .collect();
    assert_eq!(keys.iter().filter(|k| *k == "burst").count(), 1, "{keys:?}");
    assert_eq!(
        keys.iter().filter(|k| *k == "user:1").count(),
        1,
        "{keys:?}"
    );
}

/// Tags (issue 43): a tag filter finds exactly the tasks with the tag — alone, with other
/// filters, newest first, paged, counted, after the task finished (MySQL: moved to
/// docket_tasks_done and back) — and not after a debounced replacement took the tag away or the
/// task was deleted.
pub(super) async fn tags_filter_through_their_index(b: Bundle) {
    let s = &*b.store;
    let tagged = |kind: &str, queue: &str, tags: &[&str]| NewTask {
        queue: Some(queue.into()),
        tags: tags.iter().map(|t| t.to_string()).collect(),
        ..nt(kind)
    };
    let got = insert(
        s,
        vec![
            tagged("a", "q1", &["customer:42", "plan:pro"]),
            tagged("b", "q1", &["customer:42"]),
            tagged("c", "q2", &["customer:42", "plan:free"]),
            tagged("d", "q1", &[]),
            tagged("e", "q2", &["customer:7"]),
        ],
        t0(),
    )
    .await;
    assert_eq!(got[0].tags, vec!["customer:42", "plan:pro"]);
    assert!(got[3].tags.is_empty());
    let ids = |v: Vec<docket_core::Task>| v.into_iter().map(|t| t.id).collect::<Vec<_>>();
    let list = |p: TaskListParams| async move { ids(s.task_list(p).await.unwrap()) };
    let by = |tag: &str| TaskListParams {
        tag: Some(tag.into()),
        limit: 100,
        ..Default::default()
    };
    assert_eq!(
        list(by("customer:42")).await,
        vec![got[0].id, got[1].id, got[2].id]
    );
    assert_eq!(list(by("plan:pro")).await, vec![got[0].id]);
    assert_eq!(list(by("nobody")).await, Vec::<i64>::new());
    assert_eq!(
        list(TaskListParams {
            queue: Some("q2".into()),
            ..by("customer:42")
        })
        .await,
        vec![got[2].id]
    );
    assert_eq!(
        list(TaskListParams {
            descending: true,
            limit: 2,
            ..by("customer:42")
        })
        .await,
        vec![got[2].id, got[1].id]
    );
    assert_eq!(
        list(TaskListParams {
            after: Some(got[0].id),
            ..by("customer:42")
        })
        .await,
        vec![got[1].id, got[2].id]
    );
    assert_eq!(s.task_count(by("customer:42")).await.unwrap(), 3);
    // Finished (MySQL: the conformance store archives before each call), still found.
    let c = claim(s, "q1", 10, t0()).await;
    let a = c.iter().find(|t| t.id == got[0].id).unwrap();
    s.task_complete_many(TaskCompleteManyParams {
        items: &[done(a, json!(1))],
        now: t0() + secs(1),
        fail_rule: docket_core::task::standard_fail_rule,
    })
    .await
    .unwrap();
    assert_eq!(list(by("plan:pro")).await, vec![got[0].id]);
    assert_eq!(
        s.task_get(got[0].id).await.unwrap().unwrap().tags,
        vec!["customer:42", "plan:pro"]
    );
    // Deleted: gone from the filter.
    assert_eq!(s.task_delete(&[got[0].id]).await.unwrap(), 1);
    assert_eq!(list(by("plan:pro")).await, Vec::<i64>::new());
    assert_eq!(list(by("customer:42")).await, vec![got[1].id, got[2].id]);
    // A debounced replacement's tags replace the waiting task's.
    let deb = |tags: &[&str]| {
        let mut n = tagged("deb", "q3", tags);
        n.debounce = Some(docket_core::debounce::Debounce {
            key: "tagged".into(),
            period: Duration::from_secs(60),
            max_wait: None,
        });
        TaskDebounceParams {
            task: resolve(n, t0()),
            now: t0(),
        }
    };
    let first = s.task_debounce(deb(&["old"])).await.unwrap();
    assert_eq!(list(by("old")).await, vec![first.id]);
    let second = s.task_debounce(deb(&["new", "newer"])).await.unwrap();
    assert_eq!(second.id, first.id);
    assert_eq!(second.tags, vec!["new", "newer"]);
    assert_eq!(list(by("old")).await, Vec::<i64>::new());
    assert_eq!(list(by("newer")).await, vec![first.id]);
}

/// Tags over more tasks than PostgreSQL's page reads in id order (issue 43: its tag pages read
/// 20,000 ids in order first, then more or the rest through the GIN index; `TagScan`): 24,000
/// tasks, tags near the newest, near the oldest and every 1,000th; every page — newest and
/// oldest first, each limit across the window's edge, with a cursor, inside an id window — and
/// its count equal what the tasks say.
pub(super) async fn tag_pages_over_many_tasks(b: Bundle) {
    let s = &*b.store;
    const N: usize = 24_000;
    let tags_of = |i: usize| -> Vec<String> {
        let mut t = vec![];
        if [5, 10, 23_990, 23_995, 23_999].contains(&i) {
            t.push("edge".to_string());
        }
        if i.is_multiple_of(1000) {
            t.push("every1000".to_string());
        }
        t
    };
    let mut ids = Vec::with_capacity(N);
    for chunk in (0..N).collect::<Vec<_>>().chunks(1000) {
        let tasks = chunk
            .iter()
            .map(|&i| NewTask {
                tags: tags_of(i),
                ..nt("k")
            })
            .collect();
        ids.extend(insert(s, tasks, t0()).await.into_iter().map(|t| t.id));
    }
    // (index of `after`, index of the id window's ends, limit, newest first)
    type Case = (Option<usize>, Option<usize>, Option<usize>, i64, bool);
    let cases: &[Case] = &[
        (None, None, None, 3, true),
        (None, None, None, 50, true),
        (None, None, None, 10, true),
        (None, None, None, 30, true),
        (None, None, None, 50, false),
        (None, None, None, 21, false),
        (Some(22_000), None, None, 50, true),
        (Some(500), None, None, 50, false),
        (None, Some(700), None, 50, true),
        (None, None, Some(23_992), 50, false),
        (None, Some(1), Some(23_998), 50, true),
    ];
    for tag in ["edge", "every1000", "nobody"] {
        for &(after, min, max, limit, descending) in cases {
            let p = TaskListParams {
                tag: Some(tag.into()),
                after: after.map(|i| ids[i]),
                min_id: min.map(|i| ids[i]),
                max_id: max.map(|i| ids[i]),
                limit,
                descending,
                ..Default::default()
            };
            let mut want: Vec<i64> = (0..N)
                .filter(|&i| tags_of(i).iter().any(|t| t == tag))
                .map(|i| ids[i])
                .filter(|&id| match p.after {
                    Some(a) if descending => id < a,
                    Some(a) => id > a,
                    None => true,
                })
                .filter(|&id| p.min_id.is_none_or(|m| id >= m))
                .filter(|&id| p.max_id.is_none_or(|m| id <= m))
                .collect();
            if descending {
                want.reverse();
            }
            want.truncate(usize::try_from(limit).unwrap());
            let got: Vec<i64> = s
                .task_list(p.clone())
                .await
                .unwrap()
                .into_iter()
                .map(|t| t.id)
                .collect();
            assert_eq!(
                got, want,
                "{tag} {after:?} {min:?} {max:?} {limit} {descending}"
            );
            let n = s.task_count(p).await.unwrap();
            assert_eq!(
                n,
                i64::try_from(want.len()).unwrap(),
                "count: {tag} {after:?} {min:?} {max:?} {limit} {descending}"
            );
        }
    }
}
