//! Conformance cases: queues.

use super::fixtures::*;

pub(super) async fn queue_settings_round_trip(b: Bundle) {
    let s = &*b.store;
    let set = QueueSettings {
        paused: false,
        concurrency_limit: Some(4),
        max_attempts: Some(9),
        backoff: Some(docket_core::Backoff {
            jitter: 0.0,
            ..Default::default()
        }),
        timeout: Some(Duration::from_secs(30)),
        retention_completed: Some(Duration::from_secs(60)),
        retention_failed: Some(Duration::from_secs(120)),
        mask_payload: true,
        schedule_limit: Some(2),
        schedule_interval: Some(Duration::from_secs(10)),
        rate_limit: Some("stripe:eu".into()),
        fair: true,
        partition_weights: Some([("acme".to_string(), 3)].into()),
        partition_limit: Some(2),
        dead_letter: Some("x-dead".into()),
    };
    let q = s
        .queue_put(QueuePutParams {
            name: "x",
            settings: &set,
            now: t0(),
        })
        .await
        .unwrap();
    assert_eq!(q.settings, set);
    assert_eq!((q.created_at, q.updated_at), (Some(t0()), Some(t0())));
    // schedule_limit (asyncflow t_schedule_cfg): a claim takes at most that many.
    insert(
        s,
        (0..3)
            .map(|_| NewTask {
                queue: Some("x".into()),
                ..nt("capped")
            })
            .collect(),
        t0(),
    )
    .await;
    assert_eq!(claim(s, "x", 10, t0()).await.len(), 2);
    let q = s
        .queue_set_paused(QueueSetPausedParams {
            name: "x",
            paused: true,
            now: t0() + secs(5),
        })
        .await
        .unwrap();
    assert!(q.settings.paused);
    assert_eq!(
        (q.created_at, q.updated_at),
        (Some(t0()), Some(t0() + secs(5))),
        "created stays, updated moves"
    );
    assert_eq!(q.settings.max_attempts, Some(9));
    insert(s, vec![nt("in-default")], t0()).await;
    let all = s.queue_list().await.unwrap();
    assert_eq!(
        all.iter().map(|q| q.name.as_str()).collect::<Vec<_>>(),
        vec!["default", "x"]
    );
    assert_eq!(all[0].counts[&TaskState::Available], 1);
    assert_eq!(
        all[0].created_at, None,
        "a queue of tasks only has no settings row"
    );
    assert_eq!(all[1].created_at, Some(t0()));
    assert_eq!(all[0].counts.len(), 7);
    let unknown = s.queue_get("nothing").await.unwrap();
    assert_eq!(unknown.settings, QueueSettings::default());
}

/// The kept counts of finished tasks (docket_core::counts): exact before any step, after a
/// full recount, across advances (what finished after `counted_to` is read live), and after a
/// prune (it subtracts what it deleted); a finished task retried still counts in its finished
/// state until the next recount, which repairs it.
pub(super) async fn counts_stay_exact(b: Bundle) {
    let s = &*b.store;
    let hour = Duration::from_secs(3600);
    let step = |now| async move {
        s.counts_step(CountsStepParams {
            now,
            recount_every: hour,
        })
        .await
        .unwrap()
    };
    let counts = |q: &'static str| async move {
        let c = s.queue_get(q).await.unwrap().counts;
        [
            TaskState::Available,
            TaskState::Completed,
            TaskState::Discarded,
        ]
        .map(|st| c[&st])
    };
    let in_c = || NewTask {
        queue: Some("c".into()),
        ..nt("k")
    };
    insert(s, (0..4).map(|_| in_c()).collect(), t0()).await;
    let got = claim(s, "c", 3, t0()).await;
    s.task_complete_many(TaskCompleteManyParams {
        fail_rule: docket_core::task::standard_fail_rule,
        items: &[done(&got[0], json!(1)), done(&got[1], json!(1))],
        now: t0(),
    })
    .await
    .unwrap();
    discard(s, &got[2], "x", t0()).await;
    assert_eq!(
        counts("c").await,
        [1, 2, 1],
        "nothing kept yet: all read live"
    );
    // The first step recounts from scratch, up to now - LAG.
    let st = step(t0() + secs(10)).await.expect("a first step");
    assert_eq!(st.step.from, None);
    assert_eq!(st.step.to, t0() + secs(8));
    assert_eq!(st.counted, 3);
    assert_eq!(counts("c").await, [1, 2, 1]);
    assert_eq!(step(t0() + secs(10)).await, None, "the clock did not move");
    // A task finished after counted_to is read live until an advance passes it.
    let last = claim(s, "c", 1, t0() + secs(20)).await;
    s.task_complete_many(TaskCompleteManyParams {
        fail_rule: docket_core::task::standard_fail_rule,
        items: &[done(&last[0], json!(1))],
        now: t0() + secs(20),
    })
    .await
    .unwrap();
    assert_eq!(counts("c").await, [0, 3, 1]);
    let st = step(t0() + secs(21)).await.expect("an advance");
    assert_eq!(
        (st.step.from, st.step.to, st.counted),
        (Some(t0() + secs(8)), t0() + secs(19), 0)
    );
    assert_eq!(counts("c").await, [0, 3, 1]);
    let st = step(t0() + secs(30)).await.expect("an advance");
    assert_eq!(st.counted, 1);
    assert_eq!(counts("c").await, [0, 3, 1], "counted once, not twice");
    // The per-minute counts of the same steps: each finished task once, in its minute.
    let per_minute = || async move {
        s.task_throughput(t0() - secs(60))
            .await
            .unwrap()
            .into_iter()
            .map(|m| (m.minute, m.completed, m.failed))
            .collect::<Vec<_>>()
    };
    assert_eq!(per_minute().await, vec![(t0(), 3, 1)]);
    // A prune subtracts what it deleted.
    let pruned = s
        .task_prune(TaskPruneParams {
            now: t0() + secs(100),
            retention_completed: Duration::from_secs(1),
            retention_failed: Duration::from_secs(1),
            limit: 100,
        })
        .await
        .unwrap();
    assert_eq!(pruned, 4);
    assert_eq!(counts("c").await, [0, 0, 0]);
    assert_eq!(
        per_minute().await,
        vec![(t0(), 3, 1)],
        "history: a prune leaves the minutes"
    );
    // A discarded task retried leaves the discarded count in the retry's transaction.
    insert(s, vec![in_c()], t0() + secs(200)).await;
    let t = claim(s, "c", 1, t0() + secs(200)).await.remove(0);
    discard(s, &t, "x", t0() + secs(200)).await;
    assert_eq!(step(t0() + secs(300)).await.map(|s| s.counted), Some(1));
    s.task_retry(TaskRetryParams {
        id: t.id,
        now: t0() + secs(301),
    })
    .await
    .unwrap();
    assert_eq!(
        counts("c").await,
        [1, 0, 0],
        "a retry takes its task out of the kept counts at once"
    );
    let st = step(t0() + secs(3700))
        .await
        .expect("a recount, an hour on");
    assert_eq!(st.step.from, None);
    assert_eq!(counts("c").await, [1, 0, 0], "and a recount agrees");
    let all = s.queue_list().await.unwrap();
    let c = all.iter().find(|q| q.name == "c").unwrap();
    assert_eq!(c.counts[&TaskState::Available], 1);
    assert_eq!(c.counts[&TaskState::Discarded], 0);
}

/// The charts' history (docket_core::history): a step writes each finished task's minute and
/// pickup latency bucket, and samples the depth at the minute's start; reads by queue or all.
pub(super) async fn history_of_minutes_depth_and_latency(b: Bundle) {
    use docket_core::history::bucket;
    let s = &*b.store;
    let in_h = || NewTask {
        queue: Some("h".into()),
        ..nt("k")
    };
    insert(s, (0..3).map(|_| in_h()).collect(), t0()).await;
    // Picked up 20 ms after its run_at (bucket "< 50 ms"), completed.
    let fast = claim(s, "h", 1, docket_core::time::add_ms(t0(), 20)).await;
    s.task_complete_many(TaskCompleteManyParams {
        fail_rule: docket_core::task::standard_fail_rule,
        items: &[done(&fast[0], json!(1))],
        now: t0() + secs(1),
    })
    .await
    .unwrap();
    // Picked up 3 s after (bucket "< 5 s"), failed for good.
    let slow = claim(s, "h", 1, t0() + secs(3)).await;
    discard(s, &slow[0], "x", t0() + secs(4)).await;
    s.counts_step(CountsStepParams {
        now: t0() + secs(10),
        recount_every: Duration::from_secs(3600),
    })
    .await
    .unwrap();
    for queue in [Some("h".to_string()), None] {
        let h = s
            .queue_history(QueueHistoryParams {
                queue: queue.clone(),
                since: t0() - secs(3600),
            })
            .await
            .unwrap();
        let m: Vec<_> = h.minutes.iter().filter(|m| m.minute == t0()).collect();
        assert_eq!(m.len(), 1, "{queue:?}: {h:?}");
        assert_eq!(
            (m[0].completed, m[0].discarded, m[0].cancelled),
            (1, 1, 0),
            "{h:?}"
        );
        // Sampled at the minute's start, by the first step past it: one available left.
        assert_eq!((m[0].available, m[0].running), (Some(1), Some(0)), "{h:?}");
        let mut lat: Vec<(usize, i64)> = h
            .latency
            .iter()
            .filter(|l| l.minute == t0())
            .map(|l| (l.bucket, l.n))
            .collect();
        lat.sort();
        assert_eq!(lat, vec![(bucket(20), 1), (bucket(3000), 1)], "{h:?}");
    }
    let other = s
        .queue_history(QueueHistoryParams {
            queue: Some("nope".into()),
            since: t0() - secs(3600),
        })
        .await
        .unwrap();
    assert!(other.minutes.is_empty() && other.latency.is_empty());
    // A later step adds, it does not count twice.
    s.counts_step(CountsStepParams {
        now: t0() + secs(20),
        recount_every: Duration::from_secs(3600),
    })
    .await
    .unwrap();
    let h = s
        .queue_history(QueueHistoryParams {
            queue: Some("h".into()),
            since: t0(),
        })
        .await
        .unwrap();
    assert_eq!(h.latency.iter().map(|l| l.n).sum::<i64>(), 2, "{h:?}");
}
