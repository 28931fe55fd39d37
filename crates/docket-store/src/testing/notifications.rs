//! Conformance cases: the backend's identity, migrations, and wake-ups.

use super::fixtures::*;

/// `migrate` again is harmless; `backend` and `supports_listen_notify` agree (PostgreSQL's
/// LISTEN/NOTIFY carries other processes' changes; SQLite's listener only this process's);
/// and on both an insert arrives on the listener as a wake-up for its queue.
pub(super) async fn notifications_sinks_and_listen(b: Bundle) {
    let s = &*b.store;
    s.migrate().await.expect("migrating twice is harmless");
    assert_eq!(s.supports_listen_notify(), s.backend() == Backend::Postgres);
    let mut rx = s.listen().await.unwrap().expect("a listener");
    insert(
        s,
        vec![NewTask {
            queue: Some("woken".into()),
            ..nt("k")
        }],
        t0(),
    )
    .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(Wake::Queue(q))) if q == "woken" => break,
            Ok(Some(Wake::All)) => break,
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the listener closed"),
            Err(_) => panic!("no wake-up for the insert within 20 s"),
        }
    }
}

/// Task events: nothing is recorded before a queue is watched; after, each insert and change of
/// state of a watched queue's task is, in the transaction that makes it, in order — and
/// nothing of other queues, of an insert a unique key turned away, or of a claim that did not
/// take the task. Watching twice (two nodes) is harmless; delete takes exactly the rows named.
pub(super) async fn task_events_record_transitions(b: Bundle) {
    use docket_core::sink::task_event;
    let s = &*b.store;
    let q = |queue: &str, key: Option<&str>| NewTask {
        queue: Some(queue.into()),
        unique_key: key.map(String::from),
        ..nt("k")
    };
    let list = |queue: &'static str| s.task_event_list(TaskEventListParams { queue, limit: 100 });
    insert(s, vec![q("ev", None)], t0()).await;
    assert!(list("ev").await.unwrap().is_empty(), "not watched yet");
    for _ in 0..2 {
        s.task_events_watch(&["ev".to_string()]).await.unwrap();
    }
    let got = insert(
        s,
        vec![q("ev", Some("u")), q("ev", Some("u")), q("plain", None)],
        t0(),
    )
    .await;
    assert_eq!(got[1].inserted, Some(false));
    let id = got[0].id;
    // The task inserted before the watch is cancelled; ours fails once, then completes.
    let other = s
        .task_list(TaskListParams {
            queue: Some("ev".into()),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.id != id)
        .unwrap()
        .id;
    s.task_cancel(TaskCancelParams {
        id: other,
        now: t0(),
    })
    .await
    .unwrap();
    let c = claim(s, "ev", 10, t0()).await;
    assert_eq!(c.len(), 1);
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
    let again = claim(s, "ev", 10, t0() + secs(1)).await;
    assert_eq!(again.len(), 1);
    s.task_complete_many(TaskCompleteManyParams {
        fail_rule: docket_core::task::standard_fail_rule,
        items: &[done(&again[0], json!(1))],
        now: t0(),
    })
    .await
    .unwrap();
    let rows = list("ev").await.unwrap();
    let of = |task: i64| -> Vec<(Option<String>, String, Option<&'static str>)> {
        rows.iter()
            .filter(|r| r.task_id == task)
            .map(|r| (r.from_state.clone(), r.to_state.clone(), task_event(r)))
            .collect()
    };
    let st = |s: &str| s.to_string();
    let some = |s: &str| Some(s.to_string());
    assert_eq!(
        of(id),
        vec![
            (None, st("available"), Some("enqueued")),
            (some("available"), st("running"), Some("started")),
            (some("running"), st("retryable"), Some("retried")),
            (some("retryable"), st("available"), None),
            (some("available"), st("running"), Some("started")),
            (some("running"), st("completed"), Some("completed")),
        ],
        "{rows:?}"
    );
    assert_eq!(
        of(other),
        vec![(some("available"), st("cancelled"), Some("cancelled"))],
        "recorded from the watch on: {rows:?}"
    );
    assert!(rows.windows(2).all(|w| w[0].seq < w[1].seq));
    assert!(rows.iter().all(|r| r.queue == "ev" && r.kind == "k"));
    assert!(list("plain").await.unwrap().is_empty());
    let first: Vec<i64> = rows.iter().take(2).map(|r| r.seq).collect();
    assert_eq!(s.task_event_delete(&first).await.unwrap(), 2);
    assert_eq!(s.task_event_delete(&[]).await.unwrap(), 0);
    assert_eq!(list("ev").await.unwrap().len(), rows.len() - 2);
    // A queue watched later (another sink, another node) is recorded from then on, and the
    // ones watched before still are.
    s.task_events_watch(&["ev2".to_string()]).await.unwrap();
    insert(s, vec![q("ev2", None), q("ev", None)], t0()).await;
    claim(s, "ev2", 10, t0()).await;
    claim(s, "ev", 10, t0()).await;
    for queue in ["ev2", "ev"] {
        let tail: Vec<_> = s
            .task_event_list(TaskEventListParams { queue, limit: 100 })
            .await
            .unwrap()
            .into_iter()
            .rev()
            .take(2)
            .map(|r| r.to_state)
            .collect();
        assert_eq!(tail, vec!["running", "available"], "{queue}");
    }
    let ev2 = s
        .task_event_list(TaskEventListParams {
            queue: "ev2",
            limit: 100,
        })
        .await
        .unwrap();
    let extra: Vec<i64> = ev2
        .iter()
        .map(|r| r.seq)
        .chain(
            list("ev")
                .await
                .unwrap()
                .iter()
                .rev()
                .take(2)
                .map(|r| r.seq),
        )
        .collect();
    assert_eq!(s.task_event_delete(&extra).await.unwrap(), 4);
    // What no sink took goes with the notifications' retention.
    let pruned = s
        .aux_prune(AuxPruneParams {
            now: docket_core::time::add(chrono::Utc::now(), Duration::from_secs(30 * 86_400)),
            notifications: Duration::from_secs(86_400),
            audit: Duration::from_secs(86_400 * 365 * 100),
            nodes: Duration::from_secs(86_400 * 365 * 100),
            limit: 1000,
        })
        .await
        .unwrap();
    assert_eq!(pruned.task_events, rows.len() as u64 - 2);
    assert!(list("ev").await.unwrap().is_empty());
}
