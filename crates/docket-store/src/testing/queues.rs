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
