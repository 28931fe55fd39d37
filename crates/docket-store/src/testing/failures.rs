//! Conformance cases: failures — fail rules, backoff, rescue of expired leases.

use super::fixtures::*;

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
            labels: Default::default(),
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

/// Dead-letter queues (issue 43): a task of a queue with `dead_letter` discarded after its last
/// attempt — by a worker's failure or by the rescuer — is also enqueued in that queue, with
/// `dead_letter_of` (its id, queue, kind, attempts and errors), in the discard's transaction; a
/// retry, a cancel, a queue without the setting and a dead letter's own discard make none.
pub(super) async fn dead_letters_follow_discards(b: Bundle) {
    let s = &*b.store;
    let put = |name: &'static str, settings: QueueSettings| async move {
        s.queue_put(QueuePutParams {
            name,
            settings: &settings,
            now: t0(),
        })
        .await
        .unwrap();
    };
    put(
        "src",
        QueueSettings {
            dead_letter: Some("dlq".into()),
            ..Default::default()
        },
    )
    .await;
    // The dead-letter queue names src back: a dead letter's discard must not loop.
    put(
        "dlq",
        QueueSettings {
            dead_letter: Some("src".into()),
            max_attempts: Some(1),
            ..Default::default()
        },
    )
    .await;
    let spec = |kind: &str, attempts: i32| NewTask {
        queue: Some("src".into()),
        max_attempts: Some(attempts),
        priority: Some(4),
        user_id: Some("u1".into()),
        partition_key: Some("p1".into()),
        ..NewTask::new(kind, json!({"order": kind}))
    };
    let tasks = insert(
        s,
        vec![
            spec("last", 1),
            spec("retried", 2),
            spec("cancelled", 1),
            spec("lost", 1),
        ],
        t0(),
    )
    .await;
    let (last, retried, cancelled, lost) = (&tasks[0], &tasks[1], &tasks[2], &tasks[3]);
    s.task_cancel(TaskCancelParams {
        id: cancelled.id,
        now: t0(),
    })
    .await
    .unwrap();
    let got = claim(s, "src", 10, t0()).await;
    assert_eq!(got.len(), 3);
    let held = |id: i64| got.iter().find(|t| t.id == id).unwrap().clone();
    let outs = s
        .task_fail_many(TaskFailManyParams {
            fail_rule: docket_core::task::standard_fail_rule,
            items: &[
                fail(&held(last.id), "card declined"),
                fail(&held(retried.id), "later"),
            ],
            worker: Some("w1"),
            now: t0() + secs(1),
        })
        .await
        .unwrap();
    assert_eq!(state_run_at(&outs[0]).0, TaskState::Discarded);
    assert_eq!(state_run_at(&outs[1]).0, TaskState::Retryable);
    let letters = |n: usize| async move {
        let l = s
            .task_list(TaskListParams {
                queue: Some("dlq".into()),
                limit: 100,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(l.len(), n, "{l:?}");
        l
    };
    let l = letters(1).await;
    let d = &l[0];
    assert_eq!(
        (d.kind.as_str(), &d.payload),
        ("last", &json!({"order": "last"}))
    );
    assert_eq!(
        (d.state, d.priority, d.user_id.as_deref()),
        (TaskState::Available, 4, Some("u1"))
    );
    assert_eq!(d.trace_id, last.trace_id);
    assert_eq!(d.partition_key.as_deref(), Some("p1"));
    // The dead-letter queue's settings: one attempt there.
    assert_eq!(d.max_attempts, 1);
    let of = d.dead_letter_of.as_ref().unwrap();
    assert_eq!(
        (of.task_id, of.queue.as_str(), of.kind.as_str(), of.attempts),
        (last.id, "src", "last", 1)
    );
    assert_eq!(of.errors.len(), 1);
    assert_eq!(of.errors[0].message, "card declined");
    assert_eq!(of.discarded_at, t0() + secs(1));
    assert_eq!(
        s.task_get(d.id)
            .await
            .unwrap()
            .unwrap()
            .dead_letter_of
            .as_ref(),
        Some(of)
    );
    // The rescuer's discard (a lease that expired on the last attempt) makes one too.
    let lost_lease = held(lost.id).lease.unwrap().expires_at;
    rescue(
        s,
        docket_core::task::standard_fail_rule,
        lost_lease + secs(1),
        10,
    )
    .await
    .unwrap();
    let l = letters(2).await;
    let from_rescue = l.iter().find(|t| t.kind == "lost").unwrap();
    assert_eq!(
        from_rescue.dead_letter_of.as_ref().unwrap().task_id,
        lost.id
    );
    assert_eq!(from_rescue.dead_letter_of.as_ref().unwrap().errors.len(), 1);
    // A dead letter's own discard makes none (dlq names src back).
    let dl = claim(s, "dlq", 10, t0() + secs(600)).await;
    assert_eq!(dl.len(), 2);
    for t in &dl {
        discard(s, t, "still broken", t0() + secs(601)).await;
    }
    let src = s
        .task_list(TaskListParams {
            queue: Some("src".into()),
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(src.len(), 4, "no dead letter went back to src: {src:?}");
    letters(2).await;
    // An expired task (never started) makes none.
    let expiring = insert(
        s,
        vec![NewTask {
            expires_at: Some(t0() + secs(700)),
            ..spec("expired", 1)
        }],
        t0() + secs(650),
    )
    .await;
    s.task_expire(TaskExpireParams {
        now: t0() + secs(701),
        limit: 100,
    })
    .await
    .unwrap();
    let e = s.task_get(expiring[0].id).await.unwrap().unwrap();
    assert_eq!(e.state, TaskState::Discarded);
    letters(2).await;
    // A queue without the setting: a discard makes nothing anywhere.
    let plain = insert(
        s,
        vec![NewTask {
            max_attempts: Some(1),
            ..nt("plain")
        }],
        t0(),
    )
    .await;
    let c = claim(s, "default", 10, t0()).await;
    assert_eq!(c[0].id, plain[0].id);
    discard(s, &c[0], "x", t0() + secs(2)).await;
    let all = s
        .task_list(TaskListParams {
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(all.len(), 8, "{all:?}");
}
