//! Conformance cases: claims.

use super::fixtures::*;

pub(super) async fn claim_order_priority_run_at_id(b: Bundle) {
    let s = &*b.store;
    let mk = |k: &str, p: i32, back: i64| {
        let mut n = nt(k);
        n.priority = Some(p);
        n.run_at = Some(t0() - secs(back));
        n
    };
    // Inserted out of order on purpose.
    insert(
        s,
        vec![
            mk("c", 0, 10),
            mk("a", 5, 1),
            mk("d", 0, 10),
            mk("b", 0, 20),
            mk("e", -1, 100),
        ],
        t0(),
    )
    .await;
    let got = claim(s, "default", 3, t0()).await;
    let kinds: Vec<&str> = got.iter().map(|t| t.kind.as_str()).collect();
    assert_eq!(kinds, vec!["a", "b", "c"]);
    let rest = claim(s, "default", 10, t0()).await;
    assert_eq!(
        rest.iter().map(|t| t.kind.as_str()).collect::<Vec<_>>(),
        vec!["d", "e"]
    );
    for t in got.iter().chain(&rest) {
        assert_eq!(t.state, TaskState::Running);
        assert_eq!(t.attempt, 1);
        assert_eq!(t.worker.as_deref(), Some("w1"));
        let lease = t.lease.as_ref().unwrap();
        assert_eq!(lease.expires_at, t0() + secs(60));
        assert!(!lease.token.is_empty());
    }
    assert!(claim(s, "default", 10, t0()).await.is_empty());

    // After priority, fewer attempts first (node-daemons' `attempts ASC`): a retry due long ago
    // waits behind a first attempt enqueued now, so a storm of retries cannot starve new work.
    let retried = insert(s, vec![mk("retry", 0, 300)], t0()).await.remove(0);
    let c = claim(s, "default", 1, t0()).await;
    assert_eq!(c[0].id, retried.id);
    s.task_fail_many(TaskFailManyParams {
        items: &[TaskFail {
            retry_in: Some(Duration::ZERO),
            ..fail(&c[0], "again")
        }],
        worker: None,
        now: t0(),
        fail_rule: docket_core::task::standard_fail_rule,
    })
    .await
    .unwrap();
    s.task_promote(TaskPromoteParams {
        now: t0() + secs(1),
        limit: 10,
    })
    .await
    .unwrap();
    insert(s, vec![mk("first", 0, 0)], t0() + secs(1)).await;
    let got = claim(s, "default", 2, t0() + secs(1)).await;
    let order: Vec<(&str, i32)> = got.iter().map(|t| (t.kind.as_str(), t.attempt)).collect();
    assert_eq!(order, vec![("first", 1), ("retry", 2)]);
}

/// A claim that names kinds takes only tasks of those kinds (asyncflow's hold by task type).
pub(super) async fn claim_by_kinds(b: Bundle) {
    let s = &*b.store;
    insert(s, vec![nt("a"), nt("b"), nt("c"), nt("a")], t0()).await;
    let by = |kinds: Option<Vec<&str>>| TaskClaimParams {
        queue: "default".into(),
        worker: "w1".into(),
        node: "n1".into(),
        limit: 10,
        lease: None,
        kinds: kinds.map(|k| k.into_iter().map(String::from).collect()),
        stages: None,
        now: t0(),
        nonce: None,
    };
    let got = s.task_claim(by(Some(vec!["a", "c"]))).await.unwrap();
    let mut kinds: Vec<&str> = got.iter().map(|t| t.kind.as_str()).collect();
    kinds.sort();
    assert_eq!(kinds, vec!["a", "a", "c"]);
    assert!(s
        .task_claim(by(Some(vec!["zzz"])))
        .await
        .unwrap()
        .is_empty());
    let rest = s.task_claim(by(None)).await.unwrap();
    assert_eq!(
        rest.iter().map(|t| t.kind.as_str()).collect::<Vec<_>>(),
        vec!["b"]
    );
}

pub(super) async fn claim_skips_what_it_must(b: Bundle) {
    let s = &*b.store;
    let mut future = nt("future");
    future.run_at = Some(t0() + secs(5));
    // Became available before its expiry, which has passed by the claim (the API refuses
    // expires_at <= run_at, so it is made in the past).
    let mut expired = nt("expired");
    expired.run_at = Some(t0() - secs(2));
    expired.expires_at = Some(t0() - secs(1));
    let mut other_node = nt("other_node");
    other_node.node = Some("n2".into());
    let mut mine = nt("mine");
    mine.node = Some("n1".into());
    let cancelled = nt("cancelled");
    let mut paused = nt("paused");
    paused.queue = Some("p".into());
    let got = insert(
        s,
        vec![future, expired, other_node, mine, cancelled, paused],
        t0(),
    )
    .await;
    s.task_cancel(TaskCancelParams {
        id: got[4].id,
        now: t0(),
    })
    .await
    .unwrap();
    s.queue_set_paused(QueueSetPausedParams {
        name: "p",
        paused: true,
        now: t0(),
    })
    .await
    .unwrap();
    let claimed = claim(s, "default", 10, t0()).await;
    assert_eq!(
        claimed.iter().map(|t| t.kind.as_str()).collect::<Vec<_>>(),
        vec!["mine"]
    );
    assert!(claim(s, "p", 10, t0()).await.is_empty());
    // Scheduled tasks come due only through the scheduler's promotion.
    assert!(claim(s, "default", 10, t0() + secs(10)).await.is_empty());
    let p = s
        .task_promote(TaskPromoteParams {
            now: t0() + secs(10),
            limit: 100,
        })
        .await
        .unwrap();
    assert_eq!(p.count, 1);
    assert_eq!(p.queues, vec!["default".to_string()]);
    let c = claim(s, "default", 10, t0() + secs(10)).await;
    assert_eq!(
        c.iter().map(|t| t.kind.as_str()).collect::<Vec<_>>(),
        vec!["future"]
    );
    // Resuming the queue makes its task claimable.
    s.queue_set_paused(QueueSetPausedParams {
        name: "p",
        paused: false,
        now: t0(),
    })
    .await
    .unwrap();
    assert_eq!(claim(s, "p", 10, t0()).await.len(), 1);
    // The expired task is discarded by the expirer.
    assert_eq!(
        s.task_expire(TaskExpireParams {
            now: t0(),
            limit: 100
        })
        .await
        .unwrap(),
        1
    );
    let e = s.task_get(got[1].id).await.unwrap().unwrap();
    assert_eq!(e.state, TaskState::Discarded);
    assert!(e.errors[0].message.contains("expired"));
}

pub(super) async fn concurrency_key_limit(b: Bundle) {
    let s = &*b.store;
    let mut v = vec![];
    for i in 0..5 {
        let mut n = nt(&format!("k{i}"));
        n.concurrency_key = Some("acct-1".into());
        n.concurrency_limit = Some(2);
        v.push(n);
    }
    let mut free = nt("free");
    free.priority = Some(-1);
    v.push(free);
    insert(s, v, t0()).await;
    let got = claim(s, "default", 10, t0()).await;
    let kinds: Vec<&str> = got.iter().map(|t| t.kind.as_str()).collect();
    assert_eq!(kinds, vec!["k0", "k1", "free"]);
    assert!(claim(s, "default", 10, t0()).await.is_empty());
    s.task_complete_many(TaskCompleteManyParams {
        fail_rule: docket_core::task::standard_fail_rule,
        items: &[done(&got[0], json!(1))],
        now: t0(),
    })
    .await
    .unwrap();
    let next = claim(s, "default", 10, t0()).await;
    assert_eq!(
        next.iter().map(|t| t.kind.as_str()).collect::<Vec<_>>(),
        vec!["k2"]
    );
}

pub(super) async fn queue_concurrency_limit(b: Bundle) {
    let s = &*b.store;
    s.queue_put(QueuePutParams {
        name: "q",
        settings: &QueueSettings {
            concurrency_limit: Some(3),
            ..Default::default()
        },
        now: t0(),
    })
    .await
    .unwrap();
    let v = (0..10)
        .map(|i| {
            let mut n = nt(&format!("t{i}"));
            n.queue = Some("q".into());
            n
        })
        .collect();
    insert(s, v, t0()).await;
    let a = claim(s, "q", 2, t0()).await;
    let b2 = claim(s, "q", 10, t0()).await;
    assert_eq!((a.len(), b2.len()), (2, 1));
    assert!(claim(s, "q", 10, t0()).await.is_empty());
    s.task_fail_many(TaskFailManyParams {
        fail_rule: docket_core::task::standard_fail_rule,
        items: &[fail(&a[0], "boom")],
        worker: None,
        now: t0(),
    })
    .await
    .unwrap();
    assert_eq!(claim(s, "q", 10, t0()).await.len(), 1);
    let q = s.queue_get("q").await.unwrap();
    assert_eq!(q.counts[&TaskState::Running], 3);
    assert_eq!(q.counts[&TaskState::Retryable], 1);
    assert_eq!(q.counts[&TaskState::Available], 6);
    assert_eq!(q.settings.concurrency_limit, Some(3));
}

pub(super) async fn exactly_once_under_concurrent_claimers(b: Bundle) {
    let s = b.store.clone();
    const N: usize = 600;
    let v: Vec<NewTask> = (0..N).map(|i| nt(&format!("t{i}"))).collect();
    for chunk in v.chunks(200) {
        insert(&*s, chunk.to_vec(), t0()).await;
    }
    let mut handles = vec![];
    for w in 0..8 {
        let s = s.clone();
        handles.push(tokio::spawn(async move {
            let mut mine = vec![];
            loop {
                let got = s
                    .task_claim(TaskClaimParams {
                        kinds: None,
                        stages: None,
                        queue: "default".into(),
                        worker: format!("w{w}"),
                        node: format!("n{}", w % 2),
                        limit: 7,
                        lease: None,
                        now: t0(),
                        nonce: None,
                    })
                    .await
                    .unwrap();
                if got.is_empty() {
                    break;
                }
                let items: Vec<TaskComplete> = got.iter().map(|t| done(t, json!(w))).collect();
                let outs = s
                    .task_complete_many(TaskCompleteManyParams {
                        fail_rule: docket_core::task::standard_fail_rule,
                        items: &items,
                        now: t0(),
                    })
                    .await
                    .unwrap();
                assert!(
                    outs.iter().all(|o| matches!(o, LeaseOutcome::Ok { .. })),
                    "{outs:?}"
                );
                mine.extend(got.iter().map(|t| t.id));
            }
            mine
        }));
    }
    let mut all = vec![];
    for h in handles {
        all.extend(h.await.unwrap());
    }
    let n = all.len();
    all.sort();
    all.dedup();
    assert_eq!(n, N, "every task claimed once");
    assert_eq!(all.len(), N, "no task claimed twice");
    let q = s.queue_get("default").await.unwrap();
    assert_eq!(q.counts[&TaskState::Completed], N as i64);
}

pub(super) async fn leases_heartbeats_and_stale_tokens(b: Bundle) {
    let s = &*b.store;
    let mut long = nt("a");
    long.timeout = Some(Duration::from_secs(3600));
    insert(s, vec![long], t0()).await;
    let t = claim(s, "default", 1, t0()).await.remove(0);
    let token = t.lease.clone().unwrap().token;
    let hb = s
        .task_heartbeat(TaskHeartbeatParams {
            fail_rule: docket_core::task::standard_fail_rule,
            id: t.id,
            token: token.clone(),
            progress: Some(json!({"pct": 50})),
            lease: Some(Duration::from_secs(120)),
            now: t0() + secs(30),
        })
        .await
        .unwrap();
    assert_eq!(hb.lease_expires_at, Some(t0() + secs(150)));
    assert_eq!(hb.progress, Some(json!({"pct": 50})));
    // Heartbeat without a duration keeps the attempt's lease length.
    let hb = s
        .task_heartbeat(TaskHeartbeatParams {
            fail_rule: docket_core::task::standard_fail_rule,
            id: t.id,
            token: token.clone(),
            progress: None,
            lease: None,
            now: t0() + secs(40),
        })
        .await
        .unwrap();
    assert_eq!(hb.lease_expires_at, Some(t0() + secs(160)));
    assert_eq!(hb.progress, Some(json!({"pct": 50})));
    // Stale / bogus tokens change nothing.
    for bad in ["00000000-0000-0000-0000-000000000000", "nonsense"] {
        let e = s
            .task_heartbeat(TaskHeartbeatParams {
                fail_rule: docket_core::task::standard_fail_rule,
                id: t.id,
                token: bad.into(),
                progress: Some(json!("x")),
                lease: None,
                now: t0(),
            })
            .await
            .unwrap_err();
        assert!(matches!(e, StoreError::LeaseLost), "{e:?}");
        let outs = s
            .task_complete_many(TaskCompleteManyParams {
                fail_rule: docket_core::task::standard_fail_rule,
                items: &[TaskComplete {
                    id: t.id,
                    token: bad.into(),
                    result: json!("x"),
                    next: None,
                }],
                now: t0(),
            })
            .await
            .unwrap();
        assert_eq!(outs, vec![LeaseOutcome::LeaseLost]);
    }
    let e = s
        .task_heartbeat(TaskHeartbeatParams {
            fail_rule: docket_core::task::standard_fail_rule,
            id: 424242,
            token: token.clone(),
            progress: None,
            lease: None,
            now: t0(),
        })
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::NotFound(_)));
    let again = s.task_get(t.id).await.unwrap().unwrap();
    assert_eq!(again.state, TaskState::Running);
    assert_eq!(again.progress, Some(json!({"pct": 50})));
    // The lease expires, the task is rescued and claimed again; the old lease can never
    // overwrite the new attempt's result.
    assert_eq!(
        rescue(
            s,
            docket_core::task::standard_fail_rule,
            t0() + secs(161),
            100
        )
        .await
        .unwrap()
        .len(),
        1
    );
    s.task_promote(TaskPromoteParams {
        now: t0() + secs(3600),
        limit: 100,
    })
    .await
    .unwrap();
    let t2 = claim(s, "default", 1, t0() + secs(3600)).await.remove(0);
    assert_eq!(t2.attempt, 2);
    let old = s
        .task_complete_many(TaskCompleteManyParams {
            fail_rule: docket_core::task::standard_fail_rule,
            items: &[done(&t, json!("old"))],
            now: t0() + secs(3600),
        })
        .await
        .unwrap();
    assert_eq!(old, vec![LeaseOutcome::LeaseLost]);
    let old = s
        .task_fail_many(TaskFailManyParams {
            fail_rule: docket_core::task::standard_fail_rule,
            items: &[fail(&t, "old")],
            worker: None,
            now: t0() + secs(3600),
        })
        .await
        .unwrap();
    assert_eq!(old, vec![LeaseOutcome::LeaseLost]);
    let new = s
        .task_complete_many(TaskCompleteManyParams {
            fail_rule: docket_core::task::standard_fail_rule,
            items: &[done(&t2, json!("new"))],
            now: t0() + secs(3601),
        })
        .await
        .unwrap();
    assert!(matches!(
        new[0],
        LeaseOutcome::Ok {
            state: TaskState::Completed,
            ..
        }
    ));
    let fin = s.task_get(t.id).await.unwrap().unwrap();
    assert_eq!(fin.result, Some(json!("new")));
    assert_eq!(fin.finished_at, Some(t0() + secs(3601)));
    // Completing twice is refused too.
    let twice = s
        .task_complete_many(TaskCompleteManyParams {
            fail_rule: docket_core::task::standard_fail_rule,
            items: &[done(&t2, json!("again"))],
            now: t0(),
        })
        .await
        .unwrap();
    assert_eq!(twice, vec![LeaseOutcome::LeaseLost]);
}

/// The attempt deadline (`attempted_at + timeout`, issue 9): a lease never reaches past it, a
/// heartbeat or completion at or after it fails the attempt with `timeout`, and a lease that
/// expires before it is rescued as `lease expired`.
pub(super) async fn attempt_deadline(b: Bundle) {
    let s = &*b.store;
    let mut n = nt("d");
    n.timeout = Some(Duration::from_secs(10));
    n.backoff = Some(docket_core::Backoff {
        jitter: 0.0,
        initial: Duration::from_secs(5),
        ..Default::default()
    });
    insert(s, vec![n.clone(), n.clone(), n], t0()).await;
    let got = s
        .task_claim(TaskClaimParams {
            kinds: None,
            stages: None,
            queue: "default".into(),
            worker: "w1".into(),
            node: "n1".into(),
            limit: 2,
            lease: Some(Duration::from_secs(3600)),
            now: t0(),
            nonce: None,
        })
        .await
        .unwrap();
    assert_eq!(got.len(), 2);
    for t in &got {
        assert_eq!(
            t.lease.as_ref().unwrap().expires_at,
            t0() + secs(10),
            "capped at the timeout"
        );
    }
    let hb = |t: &docket_core::Task, at: i64| TaskHeartbeatParams {
        fail_rule: docket_core::task::standard_fail_rule,
        id: t.id,
        token: t.lease.clone().unwrap().token,
        progress: None,
        lease: Some(Duration::from_secs(60)),
        now: t0() + secs(at),
    };
    let fresh = s.task_heartbeat(hb(&got[0], 5)).await.unwrap();
    assert_eq!(fresh.lease_expires_at, Some(t0() + secs(10)));
    let e = s.task_heartbeat(hb(&got[0], 10)).await.unwrap_err();
    assert!(matches!(e, StoreError::TimedOut), "{e:?}");
    let r = s.task_get(got[0].id).await.unwrap().unwrap();
    assert_eq!(r.state, TaskState::Retryable);
    assert_eq!(r.run_at, t0() + secs(15));
    assert_eq!(r.errors[0].message, "timeout");
    let outs = s
        .task_complete_many(TaskCompleteManyParams {
            fail_rule: docket_core::task::standard_fail_rule,
            items: &[done(&got[1], json!("late"))],
            now: t0() + secs(11),
        })
        .await
        .unwrap();
    assert_eq!(outs, vec![LeaseOutcome::TimedOut]);
    let r = s.task_get(got[1].id).await.unwrap().unwrap();
    assert_eq!(r.state, TaskState::Retryable);
    assert_eq!(r.result, None);
    assert_eq!(r.errors[0].message, "timeout");
    // A short lease that runs out before the deadline is `lease expired`.
    let third = s
        .task_claim(TaskClaimParams {
            kinds: None,
            stages: None,
            queue: "default".into(),
            worker: "w1".into(),
            node: "n1".into(),
            limit: 1,
            lease: Some(Duration::from_secs(2)),
            now: t0(),
            nonce: None,
        })
        .await
        .unwrap();
    assert_eq!(third.len(), 1);
    assert_eq!(
        rescue(s, docket_core::task::standard_fail_rule, t0() + secs(3), 10)
            .await
            .unwrap()
            .len(),
        1
    );
    let r = s.task_get(third[0].id).await.unwrap().unwrap();
    assert_eq!(r.errors[0].message, "lease expired");
}

/// The rescuer reads without locking and decides; the store applies a decision only while the
/// task is as it was read (River's JobGetStuck / JobRescueMany): one heartbeated, completed,
/// re-claimed or rescued by another node meanwhile is left alone, so two nodes rescuing the
/// same batch fail each attempt once.
pub(super) async fn rescue_applies_only_what_it_read(b: Bundle) {
    let s = &*b.store;
    let mut tasks = vec![];
    for k in ["beat", "done", "again", "twice"] {
        let mut n = nt(k);
        n.timeout = Some(Duration::from_secs(60));
        tasks.push(n);
    }
    insert(s, tasks, t0()).await;
    let mut lease = claim(s, "default", 4, t0()).await;
    lease.sort_by_key(|t| t.id);
    // Leases of 5 s, within the 60 s timeout: expired at 6 s, the deadline still far.
    for t in &lease {
        s.task_heartbeat(TaskHeartbeatParams {
            id: t.id,
            token: t.lease.as_ref().unwrap().token.clone(),
            progress: None,
            lease: Some(Duration::from_secs(5)),
            now: t0(),
            fail_rule: docket_core::task::standard_fail_rule,
        })
        .await
        .unwrap();
    }
    let now = t0() + secs(6);
    let stuck = s
        .task_rescue_list(TaskRescueListParams { now, limit: 10 })
        .await
        .unwrap();
    assert_eq!(stuck.len(), 4);
    let plan: Vec<docket_core::lease::Failure> = stuck
        .iter()
        .map(|t| docket_core::lease::Failure::rescue(t, docket_core::task::standard_fail_rule, now))
        .collect();
    assert!(plan.iter().all(|f| f.error.message == "lease expired"));
    // Meanwhile: "beat" renews its lease, "done" completes (a completion within the deadline is
    // taken after the lease ran out), "again" is rescued and claimed again (another node).
    let (beat, done_, again_) = (&lease[0], &lease[1], &lease[2]);
    s.task_heartbeat(TaskHeartbeatParams {
        id: beat.id,
        token: beat.lease.as_ref().unwrap().token.clone(),
        progress: None,
        lease: Some(Duration::from_secs(30)),
        now,
        fail_rule: docket_core::task::standard_fail_rule,
    })
    .await
    .unwrap();
    let o = s
        .task_complete_many(TaskCompleteManyParams {
            items: &[done(done_, json!(1))],
            now,
            fail_rule: docket_core::task::standard_fail_rule,
        })
        .await
        .unwrap();
    assert!(matches!(
        o[0],
        LeaseOutcome::Ok {
            state: TaskState::Completed,
            ..
        }
    ));
    let first = s
        .task_rescue_many(TaskRescueManyParams {
            items: vec![plan[2].clone()],
            now,
        })
        .await
        .unwrap();
    assert_eq!(first.len(), 1);
    s.task_promote(TaskPromoteParams {
        now: t0() + secs(3600),
        limit: 10,
    })
    .await
    .unwrap();
    let re = claim(s, "default", 1, t0() + secs(3600)).await;
    assert_eq!(re[0].id, again_.id);
    // The whole plan now: only "twice" is still as read.
    let applied = s
        .task_rescue_many(TaskRescueManyParams {
            items: plan.clone(),
            now,
        })
        .await
        .unwrap();
    assert_eq!(applied.len(), 1, "{applied:?}");
    assert_eq!(applied[0].kind, "twice");
    // A second node applying the same plan changes nothing.
    assert!(s
        .task_rescue_many(TaskRescueManyParams { items: plan, now })
        .await
        .unwrap()
        .is_empty());
    let get = |id| async move { s.task_get(id).await.unwrap().unwrap() };
    assert_eq!(get(beat.id).await.state, TaskState::Running);
    assert_eq!(get(done_.id).await.state, TaskState::Completed);
    let a = get(again_.id).await;
    assert_eq!(
        (a.state, a.attempt, a.errors.len()),
        (TaskState::Running, 2, 1)
    );
    let t = get(lease[3].id).await;
    assert_eq!((t.state, t.errors.len()), (TaskState::Retryable, 1));
    assert_eq!(t.errors[0].message, "lease expired");
}

pub(super) async fn rescue_retries_then_discards(b: Bundle) {
    let s = &*b.store;
    let mut n = nt("r");
    n.max_attempts = Some(2);
    n.timeout = Some(Duration::from_secs(10));
    n.backoff = Some(docket_core::Backoff {
        jitter: 0.0,
        initial: Duration::from_secs(5),
        ..Default::default()
    });
    let id = insert(s, vec![n], t0()).await[0].id;
    let t = claim(s, "default", 1, t0()).await.remove(0);
    assert_eq!(t.lease.unwrap().expires_at, t0() + secs(10));
    assert_eq!(
        rescue(
            s,
            docket_core::task::standard_fail_rule,
            t0() + secs(10),
            100
        )
        .await
        .unwrap()
        .len(),
        0,
        "not yet expired"
    );
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
        1
    );
    let r = s.task_get(id).await.unwrap().unwrap();
    assert_eq!(r.state, TaskState::Retryable);
    assert_eq!(r.run_at, t0() + secs(16));
    assert_eq!(r.errors.len(), 1);
    // The lease ran out at the attempt's deadline (attempted_at + timeout).
    assert_eq!(r.errors[0].message, "timeout");
    assert_eq!(r.errors[0].attempt, 1);
    assert_eq!(r.errors[0].worker.as_deref(), Some("w1"));
    assert_eq!(s.task_next_due().await.unwrap(), Some(t0() + secs(16)));
    assert_eq!(
        s.task_promote(TaskPromoteParams {
            now: t0() + secs(15),
            limit: 100
        })
        .await
        .unwrap()
        .count,
        0
    );
    assert_eq!(
        s.task_promote(TaskPromoteParams {
            now: t0() + secs(16),
            limit: 100
        })
        .await
        .unwrap()
        .count,
        1
    );
    claim(s, "default", 1, t0() + secs(16)).await.remove(0);
    assert_eq!(
        rescue(
            s,
            docket_core::task::standard_fail_rule,
            t0() + secs(100),
            100
        )
        .await
        .unwrap()
        .len(),
        1
    );
    let r = s.task_get(id).await.unwrap().unwrap();
    assert_eq!(r.state, TaskState::Discarded);
    assert_eq!(r.errors.len(), 2);
    assert_eq!(r.finished_at, Some(t0() + secs(100)));
}

pub(super) async fn fail_rules(b: Bundle) {
    let s = &*b.store;
    let mut v = vec![];
    for k in ["backoff", "retry_in", "permanent", "last"] {
        let mut n = nt(k);
        n.max_attempts = Some(if k == "last" { 1 } else { 3 });
        n.backoff = Some(docket_core::Backoff {
            kind: docket_core::BackoffKind::Exponential,
            jitter: 0.0,
            initial: Duration::from_secs(2),
            coefficient: 3.0,
            max: Duration::from_secs(60),
        });
        v.push(n);
    }
    insert(s, v, t0()).await;
    let c = claim(s, "default", 4, t0()).await;
    let mut items: Vec<TaskFail> = c
        .iter()
        .map(|t| fail(t, &format!("{} failed", t.kind)))
        .collect();
    items[1].retry_in = Some(Duration::from_millis(1500));
    items[2].permanent = true;
    let outs = s
        .task_fail_many(TaskFailManyParams {
            fail_rule: docket_core::task::standard_fail_rule,
            items: &items,
            worker: Some("wX"),
            now: t0(),
        })
        .await
        .unwrap();
    // Outcomes carry what metrics label by: queue, kind and the attempt's start.
    for (o, t) in outs.iter().zip(&c) {
        let LeaseOutcome::Ok { labels, .. } = o else {
            panic!("{o:?}")
        };
        assert_eq!(
            (labels.queue.as_str(), labels.kind.as_str()),
            ("default", t.kind.as_str())
        );
        assert_eq!(labels.attempted_at, Some(t0()));
    }
    assert_eq!(
        outs.iter().map(state_run_at).collect::<Vec<_>>(),
        vec![
            (TaskState::Retryable, t0() + secs(2)),
            (TaskState::Retryable, docket_core::time::add_ms(t0(), 1500)),
            (TaskState::Discarded, c[2].run_at),
            (TaskState::Discarded, c[3].run_at)
        ]
    );
    let t = s.task_get(c[0].id).await.unwrap().unwrap();
    assert_eq!(t.errors[0].message, "backoff failed");
    assert_eq!(t.errors[0].worker.as_deref(), Some("wX"));
    // Second failure of the same task: 2s × 3.
    s.task_promote(TaskPromoteParams {
        now: t0() + secs(2),
        limit: 10,
    })
    .await
    .unwrap();
    let again = claim(s, "default", 10, t0() + secs(2)).await;
    let first = again.iter().find(|t| t.id == c[0].id).unwrap();
    let outs = s
        .task_fail_many(TaskFailManyParams {
            fail_rule: docket_core::task::standard_fail_rule,
            items: &[fail(first, "again")],
            worker: None,
            now: t0() + secs(2),
        })
        .await
        .unwrap();
    assert_eq!(
        outs.iter().map(state_run_at).collect::<Vec<_>>(),
        vec![(TaskState::Retryable, t0() + secs(8))]
    );
    let t = s.task_get(c[0].id).await.unwrap().unwrap();
    assert_eq!(t.errors.len(), 2);
    assert_eq!(t.attempt, 2);
    // Unknown ids in a batch are reported, not fatal.
    let outs = s
        .task_fail_many(TaskFailManyParams {
            fail_rule: docket_core::task::standard_fail_rule,
            items: &[TaskFail {
                id: 777_777,
                token: "x".into(),
                error: "e".into(),
                retry_in: None,
                permanent: false,
            }],
            worker: None,
            now: t0(),
        })
        .await
        .unwrap();
    assert_eq!(outs, vec![LeaseOutcome::NotFound]);
}

/// The store applies the fail rule it is given and decides nothing itself: with a rule that
/// always discards, a failure with attempts left is discarded; with one that retries an hour
/// later, a task out of attempts is retried at that time — on failure, on rescue, and when a
/// heartbeat finds the attempt past its deadline.
pub(super) async fn fail_rule_is_the_callers(b: Bundle) {
    use docket_core::task::FailDecision;
    let s = &*b.store;
    fn discard(_: &docket_core::Task, _: Timestamp, _: Option<Duration>, _: bool) -> FailDecision {
        FailDecision::Discard
    }
    fn hour_later(
        _: &docket_core::Task,
        now: Timestamp,
        _: Option<Duration>,
        _: bool,
    ) -> FailDecision {
        FailDecision::Retry {
            run_at: now + secs(3600),
        }
    }
    let q = |name: &str| NewTask {
        queue: Some(name.into()),
        max_attempts: Some(1),
        ..nt("k")
    };
    // Failure: attempts left (max 5) but the rule discards.
    insert(
        s,
        vec![NewTask {
            max_attempts: Some(5),
            ..q("r1")
        }],
        t0(),
    )
    .await;
    let t = claim(s, "r1", 1, t0()).await.remove(0);
    let out = s
        .task_fail_many(TaskFailManyParams {
            fail_rule: discard,
            items: &[fail(&t, "no")],
            worker: None,
            now: t0(),
        })
        .await
        .unwrap();
    assert_eq!(state_run_at(&out[0]).0, TaskState::Discarded);
    // Failure: out of attempts (max 1) but the rule retries in an hour.
    insert(s, vec![q("r2")], t0()).await;
    let t = claim(s, "r2", 1, t0()).await.remove(0);
    let out = s
        .task_fail_many(TaskFailManyParams {
            fail_rule: hour_later,
            items: &[fail(&t, "no")],
            worker: None,
            now: t0(),
        })
        .await
        .unwrap();
    assert_eq!(
        state_run_at(&out[0]),
        (TaskState::Retryable, t0() + secs(3600))
    );
    // Rescue of an expired lease: the same rule.
    insert(s, vec![q("r3")], t0()).await;
    let t = s
        .task_claim(TaskClaimParams {
            kinds: None,
            stages: None,
            queue: "r3".into(),
            worker: "w".into(),
            node: "n1".into(),
            limit: 1,
            lease: Some(Duration::from_secs(1)),
            now: t0(),
            nonce: None,
        })
        .await
        .unwrap()
        .remove(0);
    rescue(s, hour_later, t0() + secs(5), 10).await.unwrap();
    let got = s.task_get(t.id).await.unwrap().unwrap();
    assert_eq!(
        (got.state, got.run_at),
        (TaskState::Retryable, t0() + secs(5) + secs(3600))
    );
}

/// A linear backoff (node-daemons' `delayRatio`) is stored with its kind and the fail rule
/// spaces the attempts `attempt × step`, capped at `max`.
pub(super) async fn linear_backoff(b: Bundle) {
    let s = &*b.store;
    let mut n = nt("lin");
    n.max_attempts = Some(5);
    n.backoff = Some(
        serde_json::from_value(json!({"kind": "linear", "step": "10s", "max": "35s", "jitter": 0}))
            .unwrap(),
    );
    let t = insert(s, vec![n], t0()).await.remove(0);
    let stored = s.task_get(t.id).await.unwrap().unwrap();
    assert_eq!(stored.backoff.kind, docket_core::BackoffKind::Linear);
    assert_eq!(stored.backoff, t.backoff);
    let mut now = t0();
    // attempt × step, capped: 10, 20, 30, 35 (doubling would give 10, 20, 35, 35).
    for want in [10, 20, 30, 35] {
        if now > t0() {
            s.task_promote(TaskPromoteParams { now, limit: 10 })
                .await
                .unwrap();
        }
        let c = claim(s, "default", 1, now).await;
        assert_eq!(c.len(), 1, "due at {now}");
        let out = s
            .task_fail_many(TaskFailManyParams {
                items: &[fail(&c[0], "no")],
                worker: None,
                now,
                fail_rule: docket_core::task::standard_fail_rule,
            })
            .await
            .unwrap();
        let (state, run_at) = state_run_at(&out[0]);
        assert_eq!(state, TaskState::Retryable);
        assert_eq!(run_at, now + secs(want), "attempt {}", c[0].attempt);
        now = run_at;
    }
}

/// Every finished attempt — completed, failed, timed out, lost, cancelled — lands in the run
/// log with its stage, times, worker and node; a task keeps the last RUN_LOG_KEEP and counts all.
pub(super) async fn run_log_of_every_attempt(b: Bundle) {
    use docket_core::run::{RunOutcome, RUN_LOG_KEEP};
    let s = &*b.store;
    let mut n = nt("runs");
    n.max_attempts = Some(100);
    n.timeout = Some(Duration::from_secs(10));
    n.backoff = Some(docket_core::Backoff {
        jitter: 0.0,
        initial: Duration::from_secs(1),
        coefficient: 1.0,
        ..Default::default()
    });
    let id = insert(s, vec![n], t0()).await[0].id;
    let mut now = t0();
    // Attempt 1 fails, attempt 2 is lost (rescued), then failures until the log is full.
    let t = claim(s, "default", 1, now).await.remove(0);
    assert_eq!(t.attempt_node.as_deref(), Some("n1"));
    let outs = s
        .task_fail_many(TaskFailManyParams {
            items: &[fail(&t, "boom")],
            worker: Some("w1"),
            now: now + secs(2),
            fail_rule: docket_core::task::standard_fail_rule,
        })
        .await
        .unwrap();
    assert_eq!(state_run_at(&outs[0]).0, TaskState::Retryable);
    let r = s.task_get(id).await.unwrap().unwrap();
    assert_eq!(r.run_count, 1);
    assert_eq!(r.runs.len(), 1);
    let run = &r.runs[0];
    assert_eq!(run.attempt, 1);
    assert_eq!(run.outcome, RunOutcome::Failed);
    assert_eq!(run.message.as_deref(), Some("boom"));
    assert_eq!(run.started_at, Some(now));
    assert_eq!(run.finished_at, now + secs(2));
    assert_eq!(run.duration_ms, Some(2000));
    assert_eq!(run.worker.as_deref(), Some("w1"));
    assert_eq!(run.node.as_deref(), Some("n1"));
    let trace = r.trace_id.clone().unwrap();
    assert_eq!(
        run.trace_id.as_deref(),
        Some(docket_core::run::attempt_trace_id(&trace, None, 1).as_str())
    );
    now += secs(10);
    promote(s, now).await;
    claim(s, "default", 1, now).await.remove(0);
    now += secs(3);
    rescue(s, docket_core::task::standard_fail_rule, now + secs(8), 10)
        .await
        .unwrap();
    let r = s.task_get(id).await.unwrap().unwrap();
    assert_eq!(r.runs[1].outcome, RunOutcome::Timeout, "{:?}", r.runs);
    for _ in 0..RUN_LOG_KEEP {
        now += secs(60);
        promote(s, now).await;
        let t = claim(s, "default", 1, now).await.remove(0);
        s.task_fail_many(TaskFailManyParams {
            items: &[fail(&t, "again")],
            worker: None,
            now,
            fail_rule: docket_core::task::standard_fail_rule,
        })
        .await
        .unwrap();
    }
    now += secs(60);
    promote(s, now).await;
    let t = claim(s, "default", 1, now).await.remove(0);
    let outs = s
        .task_complete_many(TaskCompleteManyParams {
            items: &[done(&t, json!({"ok": true}))],
            now: now + secs(1),
            fail_rule: docket_core::task::standard_fail_rule,
        })
        .await
        .unwrap();
    assert_eq!(state_run_at(&outs[0]).0, TaskState::Completed);
    let r = s.task_get(id).await.unwrap().unwrap();
    assert_eq!(r.run_count, RUN_LOG_KEEP + 3);
    assert_eq!(r.runs.len(), RUN_LOG_KEEP as usize);
    let last = r.runs.last().unwrap();
    assert_eq!(last.outcome, RunOutcome::Completed);
    assert_eq!(last.attempt, RUN_LOG_KEEP + 3);
    assert_eq!(last.duration_ms, Some(1000));
    assert_eq!(last.node.as_deref(), Some("n1"));
    assert_eq!(last.message, None);
    assert_eq!(r.runs[0].attempt, 4, "the oldest entries went first");
    let attempts: Vec<i32> = r.runs.iter().map(|x| x.attempt).collect();
    assert!(
        attempts.windows(2).all(|w| w[0] + 1 == w[1]),
        "{attempts:?}"
    );
    let mut ids: Vec<&str> = r
        .runs
        .iter()
        .filter_map(|x| x.trace_id.as_deref())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(
        ids.len(),
        RUN_LOG_KEEP as usize,
        "each attempt has its own trace id"
    );

    // A cancel requested while a task runs ends its attempt `cancelled` in the log.
    let id = insert(s, vec![nt("runs-cancel")], now).await[0].id;
    let t = claim(s, "default", 1, now).await.remove(0);
    s.task_cancel(TaskCancelParams { id, now }).await.unwrap();
    let outs = s
        .task_complete_many(TaskCompleteManyParams {
            items: &[done(&t, json!(1))],
            now,
            fail_rule: docket_core::task::standard_fail_rule,
        })
        .await
        .unwrap();
    assert_eq!(outs[0], LeaseOutcome::Cancelled);
    let r = s.task_get(id).await.unwrap().unwrap();
    assert_eq!(r.run_count, 1);
    assert_eq!(r.runs[0].outcome, RunOutcome::Cancelled);
}

/// A worker completing a stage hands the task on to the next one in one call: same id, back to
/// available (or scheduled), attempts counted again, the stage history and run log kept; claims
/// can pick stages.
pub(super) async fn stages_hand_the_task_on(b: Bundle) {
    use crate::NextStage;
    let s = &*b.store;
    let mut n = nt("order");
    n.stage = Some("fetch".into());
    let other = nt("single");
    let ids: Vec<i64> = insert(s, vec![n, other], t0())
        .await
        .iter()
        .map(|t| t.id)
        .collect();
    let by_stage = |stages: &[&str], now| TaskClaimParams {
        queue: "default".into(),
        worker: "w1".into(),
        node: "n1".into(),
        limit: 10,
        lease: None,
        kinds: None,
        stages: Some(stages.iter().map(|x| x.to_string()).collect()),
        now,
        nonce: None,
    };
    assert!(s
        .task_claim(by_stage(&["ship"], t0()))
        .await
        .unwrap()
        .is_empty());
    let got = s.task_claim(by_stage(&["fetch"], t0())).await.unwrap();
    assert_eq!(got.len(), 1, "only the task at stage fetch");
    let t = &got[0];
    assert_eq!(
        (t.id, t.stage.as_deref(), t.attempt),
        (ids[0], Some("fetch"), 1)
    );
    let mut step = done(t, json!({"fetched": 3}));
    step.next = Some(NextStage {
        stage: "ship".into(),
        state: TaskState::Scheduled,
        run_at: t0() + secs(30),
        payload: Some(json!({"items": 3})),
        priority: Some(7),
    });
    let outs = s
        .task_complete_many(TaskCompleteManyParams {
            items: &[step],
            now: t0() + secs(1),
            fail_rule: docket_core::task::standard_fail_rule,
        })
        .await
        .unwrap();
    assert_eq!(
        state_run_at(&outs[0]),
        (TaskState::Scheduled, t0() + secs(30))
    );
    let r = s.task_get(ids[0]).await.unwrap().unwrap();
    assert_eq!(r.state, TaskState::Scheduled);
    assert_eq!(r.stage.as_deref(), Some("ship"));
    assert_eq!(r.stages_done, vec![Some("fetch".to_string())]);
    assert_eq!((r.attempt, r.priority), (0, 7));
    assert_eq!(r.payload, json!({"items": 3}));
    assert_eq!(r.result, Some(json!({"fetched": 3})));
    assert_eq!(r.finished_at, None);
    assert_eq!(r.run_count, 1);
    assert_eq!(r.runs[0].stage.as_deref(), Some("fetch"));
    assert_eq!(r.runs[0].outcome, docket_core::run::RunOutcome::Completed);
    s.task_promote(TaskPromoteParams {
        now: t0() + secs(30),
        limit: 10,
    })
    .await
    .unwrap();
    let got = s
        .task_claim(by_stage(&["ship"], t0() + secs(30)))
        .await
        .unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].id, got[0].attempt),
        (ids[0], 1),
        "attempts count per stage"
    );
    // The stale lease of the first stage cannot complete anything now.
    let outs = s
        .task_complete_many(TaskCompleteManyParams {
            items: &[done(t, json!(0))],
            now: t0() + secs(31),
            fail_rule: docket_core::task::standard_fail_rule,
        })
        .await
        .unwrap();
    assert_eq!(outs[0], LeaseOutcome::LeaseLost);
    // Mixed batch: the last stage completes, the single-stage task completes.
    let single = claim(s, "default", 1, t0() + secs(31)).await.remove(0);
    assert_eq!(single.id, ids[1]);
    let outs = s
        .task_complete_many(TaskCompleteManyParams {
            items: &[done(&got[0], json!("shipped")), done(&single, json!(1))],
            now: t0() + secs(32),
            fail_rule: docket_core::task::standard_fail_rule,
        })
        .await
        .unwrap();
    assert!(outs
        .iter()
        .all(|o| state_run_at(o).0 == TaskState::Completed));
    let r = s.task_get(ids[0]).await.unwrap().unwrap();
    assert_eq!(r.stage.as_deref(), Some("ship"));
    assert_eq!(r.run_count, 2);
    assert_eq!(
        r.runs
            .iter()
            .map(|x| x.stage.as_deref())
            .collect::<Vec<_>>(),
        vec![Some("fetch"), Some("ship")]
    );
    // A task without a stage hands on too: its first stage is recorded as null.
    let id = insert(s, vec![nt("plain")], t0() + secs(40)).await[0].id;
    let t = claim(s, "default", 1, t0() + secs(40)).await.remove(0);
    let mut step = done(&t, json!(null));
    step.next = Some(NextStage {
        stage: "second".into(),
        state: TaskState::Available,
        run_at: t0() + secs(41),
        payload: None,
        priority: None,
    });
    s.task_complete_many(TaskCompleteManyParams {
        items: &[step],
        now: t0() + secs(41),
        fail_rule: docket_core::task::standard_fail_rule,
    })
    .await
    .unwrap();
    let r = s.task_get(id).await.unwrap().unwrap();
    assert_eq!(r.state, TaskState::Available);
    assert_eq!(r.stages_done, vec![None]);
    assert_eq!(r.payload, json!({"k": "plain"}), "no new payload keeps it");
}

async fn promote(s: &dyn Store, now: Timestamp) {
    s.task_promote(TaskPromoteParams { now, limit: 100 })
        .await
        .unwrap();
}

/// The ring of slots (PostgreSQL's migration 0021): whatever a turn moves or truncates, every
/// task keeps its state, its lease and its unique key. Elsewhere the call does nothing.
pub(super) async fn tasks_survive_the_ring_turning(b: Bundle) {
    let s = &*b.store;
    let turn = |now: Timestamp, every: Duration| TaskRotateParams {
        now,
        every,
        lock_timeout: Duration::from_secs(5),
        batch: 2,
        most_moved: i64::MAX,
    };
    let full = |now: Timestamp| TaskRotateParams {
        most_moved: 5,
        ..turn(now, Duration::ZERO)
    };
    let mut keyed = nt("keyed");
    keyed.unique_key = Some("ring-1".into());
    let mut later = nt("later");
    later.run_at = Some(t0() + secs(60));
    let mut v = vec![nt("running"), keyed.clone(), later];
    v.extend((0..5).map(|i| nt(&format!("waiting{i}"))));
    let ids: Vec<i64> = insert(s, v, t0()).await.iter().map(|t| t.id).collect();
    let mut running = claim(s, "default", 1, t0()).await;
    assert_eq!(running[0].kind, "running");
    let running = running.remove(0);
    let pg = s.backend() == Backend::Postgres;
    // Four turns come back to the slot the tasks went into: it is emptied into slot 0 (in
    // batches of 2, then the rest under the lock) and truncated.
    let mut moved = 0;
    for i in 1..=4 {
        if i == 4 && pg {
            // Six tasks are left in the slot to empty: more than 5 wait for the backlog to drain.
            let r = s.task_rotate(full(t0() + secs(i))).await.unwrap();
            assert_eq!(r, Rotation::Full);
        }
        let r = s
            .task_rotate(turn(t0() + secs(i), Duration::ZERO))
            .await
            .unwrap();
        match r {
            Rotation::Turned { slot, moved: m, .. } => {
                assert!(pg, "{r:?}");
                assert_eq!(slot, ((i as i16) % 4) + 1, "turn {i}");
                moved += m;
            }
            other => {
                assert!(!pg, "{other:?}");
                let want = match s.backend() {
                    // Nothing finished yet to move to docket_tasks_done.
                    Backend::MySql => Rotation::Archived { moved: 0 },
                    _ => Rotation::Unsupported,
                };
                assert_eq!(other, want);
            }
        }
    }
    if pg {
        // The running task and the five waiting ones were in the ring; the unique and the
        // scheduled task were never there.
        assert_eq!(moved, 6);
        // A turn younger than `every` is not due.
        let r = s.task_rotate(turn(t0() + secs(5), Duration::from_secs(60)));
        assert_eq!(r.await.unwrap(), Rotation::NotDue);
    }
    for id in &ids {
        assert!(s.task_get(*id).await.unwrap().is_some(), "task {id} lost");
    }
    // The lease still holds; the key is still taken.
    let again = insert(s, vec![keyed], t0()).await;
    assert_eq!((again[0].id, again[0].inserted), (ids[1], Some(false)));
    let out = s
        .task_complete_many(TaskCompleteManyParams {
            fail_rule: docket_core::task::standard_fail_rule,
            items: &[done(&running, json!("after the turns"))],
            now: t0() + secs(5),
        })
        .await
        .unwrap();
    assert!(
        matches!(
            out[0],
            LeaseOutcome::Ok {
                state: TaskState::Completed,
                ..
            }
        ),
        "{out:?}"
    );
    let got = claim(s, "default", 10, t0() + secs(5)).await;
    assert_eq!(got.len(), 6, "keyed and the five waiting: {got:?}");
    s.task_promote(TaskPromoteParams {
        now: t0() + secs(61),
        limit: 10,
    })
    .await
    .unwrap();
    let late = claim(s, "default", 10, t0() + secs(61)).await;
    assert_eq!(late.len(), 1);
    assert_eq!(late[0].kind, "later");
}

/// Maintenance never hides a waiting task from a claim: promote and expire lock only the rows
/// they change (MySQL finds them without locks, then locks them by primary key), so a claim made
/// while the jobs run still gets every available task. A locking scan would
/// lock, and at READ COMMITTED release again, the waiting rows it looked at, and the claim's
/// SKIP LOCKED would pass them over (seen: a claim of 2 waiting tasks answered none).
pub(super) async fn maintenance_leaves_waiting_tasks_to_claims(b: Bundle) {
    let s = b.store.clone();
    // The jobs on connections of their own, as another node's maintenance would run them.
    let other = s.clone();
    let now = t0() + secs(2);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let jobs = {
        let (other, stop) = (other.clone(), stop.clone());
        tokio::spawn(async move {
            let mut passes = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                other
                    .task_promote(TaskPromoteParams { now, limit: 1000 })
                    .await
                    .unwrap();
                other
                    .task_expire(TaskExpireParams { now, limit: 1000 })
                    .await
                    .unwrap();
                passes += 1;
            }
            passes
        })
    };
    for round in 0..40 {
        // Work for the jobs in another queue: due tasks to promote, tasks to expire.
        let mut fodder = vec![];
        for i in 0..4 {
            let mut n = nt("fodder");
            n.queue = Some("fodder".into());
            if i % 2 == 0 {
                n.run_at = Some(t0() + secs(1));
            } else {
                n.expires_at = Some(t0() + secs(1));
            }
            fodder.push(n);
        }
        insert(&*s, fodder, t0()).await;
        insert(&*s, (0..10).map(|_| nt("w")).collect(), t0()).await;
        let got = claim(&*s, "default", 10, now).await;
        assert_eq!(
            got.len(),
            10,
            "round {round}: a claim got {} of 10",
            got.len()
        );
        let items: Vec<TaskComplete> = got.iter().map(|t| done(t, json!(null))).collect();
        s.task_complete_many(TaskCompleteManyParams {
            items: &items,
            now,
            fail_rule: docket_core::task::standard_fail_rule,
        })
        .await
        .unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(jobs.await.unwrap() > 0, "the jobs ran meanwhile");
}

/// A claim gives each task the lease of `docket_core::lease::claim_lease` (issue 24: on
/// PostgreSQL the common claim computes it in its one statement, a claim among concurrency
/// keys in Rust): for timeouts from 1 ms to 30 days, asked leases from none to 30 days, plain
/// tasks and process steps, with and without a concurrency key. Checked through what the
/// claim returns (the lease's end) and a heartbeat that keeps the lease length it stored and
/// stops at the deadline it stored. On PostgreSQL each claim is checked to have taken the path
/// it is meant to (the one statement for a task without a key whose timeout and lease are
/// under its 100 years), so both computations are held to the rule.
pub(super) async fn claim_leases_follow_the_rule(b: Bundle) {
    let s = &*b.store;
    let day = Duration::from_secs(86_400);
    let century = day * 36_500;
    // 1,000 years: past what the API accepts (30 days), as a library caller or a row written
    // with plain SQL may have it; the rule saturates at docket_core::time::max().
    let ages = day * 365_000;
    let timeouts = [
        Duration::from_millis(1),
        Duration::from_secs(10),
        day * 30,
        ages,
    ];
    let leases = [
        None,
        Some(Duration::from_millis(100)),
        Some(Duration::from_secs(3600)),
        Some(day * 30),
        Some(ages),
        Some(Duration::MAX),
    ];
    let mut case = 0;
    for timeout in timeouts {
        for lease in leases {
            for process in [false, true] {
                for key in [false, true] {
                    case += 1;
                    let queue = format!("lease-{case}");
                    let n = NewTask {
                        queue: Some(queue.clone()),
                        timeout: Some(timeout),
                        concurrency_key: key.then(|| format!("k-{case}")),
                        concurrency_limit: key.then_some(5),
                        ..nt("l")
                    };
                    let mut r = NewTask {
                        timeout: Some(timeout.min(day * 30)),
                        ..n
                    }
                    .resolve(None, &TaskDefaults::default(), t0())
                    .unwrap();
                    r.timeout_ms = docket_core::duration::to_ms(timeout);
                    if process {
                        r.process = Some(docket_core::ProcessRef {
                            namespace: "ns".into(),
                            id: format!("p{case}"),
                        });
                    }
                    s.task_insert_many(TaskInsertManyParams {
                        tasks: vec![r],
                        now: t0(),
                    })
                    .await
                    .unwrap();
                    let before = s.claims_in_one_statement();
                    let got = s
                        .task_claim(TaskClaimParams {
                            kinds: None,
                            stages: None,
                            queue: queue.clone(),
                            worker: "w1".into(),
                            node: "n1".into(),
                            limit: 10,
                            lease,
                            now: t0(),
                            nonce: None,
                        })
                        .await
                        .unwrap();
                    let what =
                        format!("timeout {timeout:?} lease {lease:?} process {process} key {key}");
                    assert_eq!(got.len(), 1, "{what}");
                    let one = s.backend() == Backend::Postgres
                        && !key
                        && timeout <= century
                        && lease.is_none_or(|l| l <= century);
                    assert_eq!(
                        s.claims_in_one_statement() - before,
                        u64::from(one),
                        "{what}: claimed by the other path"
                    );
                    let t = &got[0];
                    let rule = docket_core::lease::claim_lease(t0(), lease, timeout, process);
                    assert_eq!(t.lease_expires_at, Some(rule.expires_at), "{what}");
                    assert_eq!(
                        t.lease.as_ref().unwrap().expires_at,
                        rule.expires_at,
                        "{what}"
                    );
                    assert_eq!(t.attempted_at, Some(t0()), "{what}");
                    assert_eq!(t.state, docket_core::TaskState::Running, "{what}");
                    // A heartbeat 1 ms later renews by the stored lease length, capped by the
                    // stored deadline (none for a process step).
                    let at = docket_core::time::add_ms(t0(), 1);
                    let asked = lease.unwrap_or(timeout);
                    let want = docket_core::lease::lease_expiry(at, asked, rule.deadline_at);
                    match s
                        .task_heartbeat(TaskHeartbeatParams {
                            fail_rule: docket_core::task::standard_fail_rule,
                            id: t.id,
                            token: t.lease.clone().unwrap().token,
                            progress: None,
                            lease: None,
                            now: at,
                        })
                        .await
                    {
                        Ok(hb) => assert_eq!(hb.lease_expires_at, Some(want), "{what}"),
                        // A 1 ms attempt is over at the heartbeat: refused as timed out.
                        Err(e) => assert!(rule.deadline_at.is_some_and(|d| at >= d), "{what}: {e}"),
                    }
                }
            }
        }
    }
}

/// A claim released by its nonce (a worker's stop, issue 37): its tasks are available again at
/// once and their attempt not counted; a release that arrives before the claim commits is found
/// by the claim's own check; finished tasks, other queues and other claims are left alone.
pub(super) async fn released_claims_count_no_attempt(b: Bundle) {
    let s = &*b.store;
    let by = |nonce: u128, limit: i64, now: Timestamp| TaskClaimParams {
        kinds: None,
        stages: None,
        queue: "default".into(),
        worker: "w1".into(),
        node: "n1".into(),
        limit,
        lease: None,
        now,
        nonce: Some(nonce),
    };
    async fn release(
        s: &dyn Store,
        nonce: u128,
        release: Release<'_>,
        queue: Option<&str>,
    ) -> Result<Vec<Released>> {
        s.task_release(TaskReleaseParams {
            nonce,
            release,
            queue,
            now: t0(),
        })
        .await
    }
    let ids = |r: &[Released]| {
        let mut v: Vec<i64> = r.iter().map(|x| x.id).collect();
        v.sort_unstable();
        v
    };
    let made = insert(s, vec![nt("a"), nt("b"), nt("c"), nt("d")], t0()).await;
    let (n1, n2, n3) = (0x11_u128 << 100, 0x22_u128 << 100 | 7, u128::MAX - 5);

    // Released by its claim id: back to available, attempt 0, the old token holds nothing.
    let got = s.task_claim(by(n1, 2, t0())).await.unwrap();
    assert_eq!(got.len(), 2);
    assert!(got[0]
        .lease
        .as_ref()
        .unwrap()
        .token
        .starts_with(&format!("{n1:032x}")));
    assert!(release(s, n1, Release::Claim, Some("elsewhere"))
        .await
        .unwrap()
        .is_empty());
    let r = release(s, n1, Release::Claim, Some("default"))
        .await
        .unwrap();
    assert_eq!(ids(&r), ids_of(&got));
    assert!(r.iter().all(|x| x.queue == "default"));
    for t in &got {
        let now = s.task_get(t.id).await.unwrap().unwrap();
        assert_eq!(now.state, TaskState::Available, "{now:?}");
        assert_eq!(now.attempt, 0);
        assert!(now.errors.is_empty() && now.lease.is_none(), "{now:?}");
    }
    let late = s
        .task_complete_many(TaskCompleteManyParams {
            items: &[done(&got[0], json!(1))],
            now: t0(),
            fail_rule: docket_core::task::standard_fail_rule,
        })
        .await
        .unwrap();
    assert!(matches!(late[0], LeaseOutcome::LeaseLost), "{late:?}");
    // Releasing again finds nothing: they are not held.
    assert!(release(s, n1, Release::Claim, None)
        .await
        .unwrap()
        .is_empty());

    // A release that overtook its claim: the claim commits after it, and its check hands the
    // tasks back. Without a mark the check leaves a claim alone.
    assert!(release(s, n2, Release::Claim, None)
        .await
        .unwrap()
        .is_empty());
    let got2 = s.task_claim(by(n2, 2, t0())).await.unwrap();
    assert_eq!(got2.len(), 2);
    let got3 = s.task_claim(by(n3, 2, t0())).await.unwrap();
    assert_eq!(got3.len(), 2);
    let i3 = ids_of(&got3);
    assert!(release(s, n3, Release::IfClaimReleased(&i3), None)
        .await
        .unwrap()
        .is_empty());
    let i2 = ids_of(&got2);
    let r = release(s, n2, Release::IfClaimReleased(&i2), None)
        .await
        .unwrap();
    assert_eq!(ids(&r), i2);

    // Some tasks of a claim (held, not started); the wrong nonce holds none of them; a
    // finished task stays finished.
    assert!(release(s, n1, Release::Tasks(&i3), None)
        .await
        .unwrap()
        .is_empty());
    s.task_complete_many(TaskCompleteManyParams {
        items: &[done(&got3[0], json!(1))],
        now: t0(),
        fail_rule: docket_core::task::standard_fail_rule,
    })
    .await
    .unwrap();
    let r = release(s, n3, Release::Tasks(&i3), Some("default"))
        .await
        .unwrap();
    assert_eq!(ids(&r), vec![got3[1].id]);
    assert_eq!(
        s.task_get(got3[0].id).await.unwrap().unwrap().state,
        TaskState::Completed
    );
    // Everything not completed is claimable again, each at its first attempt.
    let again = claim(s, "default", 10, t0()).await;
    assert_eq!(again.len(), made.len() - 1);
    assert!(again.iter().all(|t| t.attempt == 1), "{again:?}");
}

fn ids_of(tasks: &[docket_core::Task]) -> Vec<i64> {
    let mut v: Vec<i64> = tasks.iter().map(|t| t.id).collect();
    v.sort_unstable();
    v
}

/// Which claims PostgreSQL answers with its one statement (`claim_fast`): a plain queue's,
/// empty or not — a fast path that always gave up would pass every other case — and no claim
/// that meets a concurrency key, a queue limit, a rate limit or a fair queue: those take the
/// transaction that counts running tasks under locks. SQLite and MySQL count none.
pub(super) async fn claims_take_one_statement_where_they_can(b: Bundle) {
    use docket_core::rate_limit::{Kind, RateLimitSpec};
    let s = &*b.store;
    let pg = s.backend() == Backend::Postgres;
    let before = s.claims_in_one_statement();
    insert(s, vec![nt("a"), nt("b")], t0()).await;
    assert_eq!(claim(s, "default", 10, t0()).await.len(), 2);
    assert!(claim(s, "default", 10, t0()).await.is_empty());
    assert_eq!(
        s.claims_in_one_statement() - before,
        if pg { 2 } else { 0 },
        "a plain queue's claims, full and empty"
    );

    let put = |name: &'static str, settings: docket_core::QueueSettings| async move {
        s.queue_put(QueuePutParams {
            name,
            settings: &settings,
            now: t0(),
        })
        .await
        .unwrap();
    };
    put(
        "limited",
        docket_core::QueueSettings {
            concurrency_limit: Some(5),
            ..Default::default()
        },
    )
    .await;
    put(
        "fair",
        docket_core::QueueSettings {
            fair: true,
            ..Default::default()
        },
    )
    .await;
    let spec = RateLimitSpec {
        kind: Kind::Concurrent,
        limit: 5,
        period: None,
    };
    s.rate_limit_put("rl", &spec, t0()).await.unwrap();
    let task = |queue: &str| NewTask {
        queue: Some(queue.into()),
        ..nt("t")
    };
    let tasks = vec![
        NewTask {
            concurrency_key: Some("k".into()),
            ..task("keyed")
        },
        task("limited"),
        NewTask {
            rate_limit: Some("rl".into()),
            ..task("rated")
        },
        NewTask {
            partition_key: Some("p".into()),
            ..task("fair")
        },
    ];
    insert(s, tasks, t0()).await;
    for queue in ["keyed", "limited", "rated", "fair"] {
        let before = s.claims_in_one_statement();
        assert_eq!(claim(s, queue, 10, t0()).await.len(), 1, "{queue}");
        assert_eq!(
            s.claims_in_one_statement(),
            before,
            "{queue}: claimed by the one statement"
        );
    }
}

/// A completion's statements (`complete_held`, `complete_to_next_stage`) restate the `Held`
/// case of `docket_core::lease::check` in SQL on PostgreSQL and SQLite: every item of one
/// call — held, another claim's token, a malformed token, a cancel requested, past its deadline,
/// finished already, unknown, and stage hand-overs held and late — gets the outcome the Rust
/// rule gives for the task as it was read before the call.
pub(super) async fn completions_follow_the_lease_check(b: Bundle) {
    use docket_core::lease::{self, LeaseCheck, LeaseToken};
    let s = &*b.store;
    let with = |timeout: u64| NewTask {
        queue: Some("chk".into()),
        timeout: Some(Duration::from_secs(timeout)),
        ..nt("k")
    };
    let timeouts = [60, 60, 60, 60, 2, 60, 60, 2];
    insert(s, timeouts.iter().map(|t| with(*t)).collect(), t0()).await;
    let got = claim(s, "chk", 8, t0()).await;
    assert_eq!(got.len(), 8);
    let token = |t: &docket_core::Task| t.lease.as_ref().unwrap().token.clone();
    // The one finished already.
    let first = s
        .task_complete_many(TaskCompleteManyParams {
            fail_rule: docket_core::task::standard_fail_rule,
            items: &[done(&got[5], json!(0))],
            now: t0() + secs(1),
        })
        .await
        .unwrap();
    assert!(matches!(first[0], LeaseOutcome::Ok { .. }), "{first:?}");
    s.task_cancel(TaskCancelParams {
        id: got[3].id,
        now: t0() + secs(1),
    })
    .await
    .unwrap();
    let other = LeaseToken {
        nonce: LeaseToken::new_nonce(),
        id: got[1].id,
    }
    .to_string();
    let next = |n: i32| docket_core::task::NextStage {
        stage: format!("s{n}"),
        state: TaskState::Available,
        run_at: t0() + secs(5),
        payload: None,
        priority: None,
    };
    let item =
        |t: &docket_core::Task, token: String, next: Option<docket_core::task::NextStage>| {
            TaskComplete {
                id: t.id,
                token,
                result: json!({"id": t.id}),
                next,
            }
        };
    let items = vec![
        item(&got[0], token(&got[0]), None),
        item(&got[1], other, None),
        item(&got[2], "nope".into(), None),
        item(&got[3], token(&got[3]), None),
        item(&got[4], token(&got[4]), None),
        item(&got[5], token(&got[5]), None),
        item(&got[6], token(&got[6]), Some(next(1))),
        item(&got[7], token(&got[7]), Some(next(2))),
        TaskComplete {
            id: i64::MAX - 7,
            token: token(&got[0]),
            result: json!(null),
            next: None,
        },
    ];
    let now = t0() + secs(5);
    let mut want = vec![];
    for it in &items {
        let Some(t) = s.task_get(it.id).await.unwrap() else {
            want.push(LeaseOutcome::NotFound);
            continue;
        };
        let claimed = got.iter().find(|g| g.id == it.id).unwrap();
        let stored = LeaseToken::parse(&token(claimed)).map(|l| l.nonce);
        want.push(match lease::check(&t, stored, &it.token, now) {
            LeaseCheck::Held => LeaseOutcome::Ok {
                state: it.next.as_ref().map_or(TaskState::Completed, |n| n.state),
                run_at: it.next.as_ref().map_or(t.run_at, |n| n.run_at),
                labels: docket_core::lease::TaskLabels::of(&t),
            },
            c => c.refusal(),
        });
    }
    let outs = s
        .task_complete_many(TaskCompleteManyParams {
            fail_rule: docket_core::task::standard_fail_rule,
            items: &items,
            now,
        })
        .await
        .unwrap();
    assert_eq!(outs.len(), want.len());
    for (i, (o, w)) in outs.iter().zip(&want).enumerate() {
        match (o, w) {
            (
                LeaseOutcome::Ok {
                    state,
                    run_at,
                    labels,
                },
                LeaseOutcome::Ok {
                    state: ws,
                    run_at: wr,
                    labels: wl,
                },
            ) => {
                assert_eq!((state, run_at), (ws, wr), "item {i}");
                assert_eq!(
                    (&labels.queue, &labels.kind),
                    (&wl.queue, &wl.kind),
                    "item {i}"
                );
            }
            _ => assert_eq!(o, w, "item {i}"),
        }
    }
    // Each kind of answer is there: the case covers every branch of the rule.
    assert!(matches!(outs[0], LeaseOutcome::Ok { .. }), "{outs:?}");
    assert_eq!(
        outs[1..6].to_vec(),
        vec![
            LeaseOutcome::LeaseLost,
            LeaseOutcome::LeaseLost,
            LeaseOutcome::Cancelled,
            LeaseOutcome::TimedOut,
            LeaseOutcome::LeaseLost
        ]
    );
    assert!(matches!(outs[6], LeaseOutcome::Ok { .. }), "{outs:?}");
    assert_eq!(outs[7], LeaseOutcome::TimedOut);
    assert_eq!(outs[8], LeaseOutcome::NotFound);
    let state = |i: usize| {
        let id = got[i].id;
        async move { s.task_get(id).await.unwrap().unwrap().state }
    };
    assert_eq!(state(0).await, TaskState::Completed);
    assert_eq!(state(1).await, TaskState::Running);
    assert_eq!(state(3).await, TaskState::Cancelled);
    assert_eq!(state(6).await, TaskState::Available);
}
