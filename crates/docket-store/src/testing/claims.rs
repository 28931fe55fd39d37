//! Conformance cases: claims — order, kinds, what a claim skips, limits, exactly once, the lease a claim writes, releases, the one-statement claim.

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
        labels: Default::default(),
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
                        labels: Default::default(),
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
                            labels: Default::default(),
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
        labels: Default::default(),
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

/// Worker labels (issue 43, `docket_core::labels`): each backend's claim statements — the
/// one-statement claim (PostgreSQL), the transaction's (a task with a concurrency key) and a
/// fair queue's — take a task exactly when `may_claim` says, over a grid of affinities, claim
/// labels and times around the end of a preference; a claim without labels takes the plain
/// tasks ahead of the labelled ones it skips.
pub(super) async fn claims_follow_worker_labels(b: Bundle) {
    use docket_core::labels::{may_claim, Labels, Prefer};
    let s = &*b.store;
    let l = |pairs: &[(&str, &str)]| -> Labels {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    };
    let prefer = |pairs: &[(&str, &str)], ms: u64| Prefer {
        labels: l(pairs),
        for_: Duration::from_millis(ms),
    };
    let affinities: Vec<(Option<Labels>, Option<Prefer>)> = vec![
        (Some(l(&[("gpu", "a100")])), None),
        (Some(l(&[("gpu", "a100"), ("region", "eu")])), None),
        (None, Some(prefer(&[("region", "eu")], 30_000))),
        (
            Some(l(&[("gpu", "a100")])),
            Some(prefer(&[("region", "eu")], 30_000)),
        ),
        (None, Some(prefer(&[("region", "eu")], 0))),
        // A name and a value no JSON path could hold.
        (Some(l(&[("a.\"b'[0]", "x\"y")])), None),
    ];
    let claimers = [
        l(&[]),
        l(&[("gpu", "a100")]),
        l(&[("gpu", "h100")]),
        l(&[("gpu", "a100"), ("region", "eu")]),
        l(&[("region", "eu")]),
        l(&[("a.\"b'[0]", "x\"y")]),
    ];
    let ats = [0_i64, 29_999, 30_000];
    put_queue(s, "labels-fair", true).await;
    let mut n = 0;
    for (path, queue) in [
        ("fast", "labels"),
        ("keyed", "labels"),
        ("fair", "labels-fair"),
    ] {
        for (ai, (requires, prefer)) in affinities.iter().enumerate() {
            for (ci, labels) in claimers.iter().enumerate() {
                for at in ats {
                    n += 1;
                    let mut t = nt(&format!("a{ai}"));
                    t.queue = Some(queue.into());
                    t.requires = requires.clone();
                    t.prefer = prefer.clone();
                    if path == "keyed" {
                        // A concurrency key sends the claim through the transaction.
                        t.concurrency_key = Some(format!("k{n}"));
                    }
                    let task = insert(s, vec![t], t0()).await.remove(0);
                    assert_eq!(&task.requires, requires);
                    assert_eq!(&task.prefer, prefer);
                    let now = docket_core::time::add_ms(t0(), at);
                    let claim_with = |labels: Labels| TaskClaimParams {
                        labels,
                        kinds: None,
                        stages: None,
                        queue: queue.into(),
                        worker: "w1".into(),
                        node: "n1".into(),
                        limit: 10,
                        lease: None,
                        now,
                        nonce: None,
                    };
                    let got = s.task_claim(claim_with(labels.clone())).await.unwrap();
                    let stored =
                        docket_core::labels::Affinity::of(requires.as_ref(), prefer.as_ref());
                    let want = may_claim(stored.as_ref(), task.run_at, labels, now);
                    let what = format!(
                        "{path}: affinity {ai} ({requires:?}, {prefer:?}), labels {ci} {labels:?}, +{at} ms"
                    );
                    assert_eq!(
                        got.iter().map(|t| t.id).collect::<Vec<_>>(),
                        if want { vec![task.id] } else { vec![] },
                        "{what}"
                    );
                    if !want {
                        // Out of the way of the next case: a claim with every label takes it.
                        let all = l(&[("gpu", "a100"), ("region", "eu"), ("a.\"b'[0]", "x\"y")]);
                        let took = s.task_claim(claim_with(all)).await.unwrap();
                        assert_eq!(took.len(), 1, "{what}: not taken by every label");
                    }
                }
            }
        }
    }
    // A plain claim passes over the labelled tasks at the head of the queue to a plain one.
    let mut head = Vec::new();
    for i in 0..5 {
        let mut t = nt("gpu");
        t.queue = Some("labels-head".into());
        t.priority = Some(10);
        t.requires = Some(l(&[("gpu", &format!("g{i}"))]));
        head.push(t);
    }
    let mut plain = nt("plain");
    plain.queue = Some("labels-head".into());
    head.push(plain);
    insert(s, head, t0()).await;
    let got = claim(s, "labels-head", 10, t0()).await;
    assert_eq!(
        got.iter().map(|t| t.kind.as_str()).collect::<Vec<_>>(),
        vec!["plain"]
    );
}

async fn put_queue(s: &dyn Store, name: &str, fair: bool) {
    s.queue_put(QueuePutParams {
        name,
        settings: &QueueSettings {
            fair,
            ..QueueSettings::default()
        },
        now: t0(),
    })
    .await
    .unwrap();
}
