//! Conformance cases: what a lease holder does — heartbeats, stale tokens, deadlines, completions, stages, the run log.

use super::fixtures::*;

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
            labels: Default::default(),
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
            labels: Default::default(),
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
        labels: Default::default(),
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
