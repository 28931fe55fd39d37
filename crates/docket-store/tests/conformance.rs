//! One suite, every backend: each test runs against PostgreSQL (its own schema) and SQLite (its
//! own file). Time is passed explicitly, so nothing here sleeps.

use chrono::TimeZone;
use docket_core::task::ResolvedTask;
use docket_core::{NewTask, QueueSettings, TaskDefaults, TaskState, Timestamp};
use docket_store::*;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

struct Bundle {
    store: Arc<dyn Store>,
    _dir: Option<tempfile::TempDir>,
}

fn pg_url() -> String {
    std::env::var("DOCKET_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

async fn pg() -> Bundle {
    let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
    let store = connect(&ConnectOptions {
        url: pg_url(),
        schema: Some(schema),
        max_connections: Some(12),
        relaxed_commit: true,
    })
    .await
    .expect("PostgreSQL is running (scripts/test.sh starts it)");
    store.migrate().await.unwrap();
    Bundle { store, _dir: None }
}

async fn sqlite() -> Bundle {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("t.db").display());
    let store = connect(&ConnectOptions::new(url)).await.unwrap();
    store.migrate().await.unwrap();
    Bundle {
        store,
        _dir: Some(dir),
    }
}

fn t0() -> Timestamp {
    chrono::Utc.with_ymd_and_hms(2030, 1, 1, 12, 0, 0).unwrap()
}

fn secs(s: i64) -> chrono::Duration {
    chrono::TimeDelta::try_seconds(s).expect("small")
}

fn resolve(n: NewTask, now: Timestamp) -> ResolvedTask {
    n.resolve(None, &TaskDefaults::default(), now).unwrap()
}

async fn insert(s: &dyn Store, tasks: Vec<NewTask>, now: Timestamp) -> Vec<docket_core::Task> {
    let names: Vec<String> = tasks.iter().map(|t| t.queue_name().to_string()).collect();
    let qs = s.queue_settings_many(&names).await.unwrap();
    let tasks = tasks
        .into_iter()
        .map(|n| {
            let q = qs.get(n.queue_name()).cloned();
            n.resolve(q.as_ref(), &TaskDefaults::default(), now)
                .unwrap()
        })
        .collect();
    s.task_insert_many(TaskInsertManyParams { tasks, now })
        .await
        .unwrap()
}

fn nt(kind: &str) -> NewTask {
    NewTask::new(kind, json!({"k": kind}))
}

async fn claim(s: &dyn Store, queue: &str, limit: i64, now: Timestamp) -> Vec<docket_core::Task> {
    s.task_claim(TaskClaimParams {
        kinds: None,
        queue: queue.into(),
        worker: "w1".into(),
        node: "n1".into(),
        limit,
        lease: None,
        now,
    })
    .await
    .unwrap()
}

fn done(token: &docket_core::Task, result: serde_json::Value) -> TaskComplete {
    TaskComplete {
        id: token.id,
        token: token.lease.as_ref().unwrap().token.clone(),
        result,
    }
}

fn fail(t: &docket_core::Task, msg: &str) -> TaskFail {
    TaskFail {
        id: t.id,
        token: t.lease.as_ref().unwrap().token.clone(),
        error: msg.into(),
        retry_in: None,
        permanent: false,
    }
}

async fn insert_get_and_defaults(b: Bundle) {
    let s = &*b.store;
    s.queue_put(
        "mail",
        &QueueSettings {
            max_attempts: Some(4),
            timeout: Some(Duration::from_secs(7)),
            ..Default::default()
        },
        t0(),
    )
    .await
    .unwrap();
    let mut n = nt("send");
    n.queue = Some("mail".into());
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

async fn claim_order_priority_run_at_id(b: Bundle) {
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
}

/// A claim that names kinds takes only tasks of those kinds (asyncflow's hold by task type).
async fn claim_by_kinds(b: Bundle) {
    let s = &*b.store;
    insert(s, vec![nt("a"), nt("b"), nt("c"), nt("a")], t0()).await;
    let by = |kinds: Option<Vec<&str>>| TaskClaimParams {
        queue: "default".into(),
        worker: "w1".into(),
        node: "n1".into(),
        limit: 10,
        lease: None,
        kinds: kinds.map(|k| k.into_iter().map(String::from).collect()),
        now: t0(),
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

async fn claim_skips_what_it_must(b: Bundle) {
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
    s.task_cancel(got[4].id, t0()).await.unwrap();
    s.queue_set_paused("p", true, t0()).await.unwrap();
    let claimed = claim(s, "default", 10, t0()).await;
    assert_eq!(
        claimed.iter().map(|t| t.kind.as_str()).collect::<Vec<_>>(),
        vec!["mine"]
    );
    assert!(claim(s, "p", 10, t0()).await.is_empty());
    // Scheduled tasks come due only through the scheduler's promotion.
    assert!(claim(s, "default", 10, t0() + secs(10)).await.is_empty());
    let p = s.task_promote(t0() + secs(10), 100).await.unwrap();
    assert_eq!(p.count, 1);
    assert_eq!(p.queues, vec!["default".to_string()]);
    let c = claim(s, "default", 10, t0() + secs(10)).await;
    assert_eq!(
        c.iter().map(|t| t.kind.as_str()).collect::<Vec<_>>(),
        vec!["future"]
    );
    // Resuming the queue makes its task claimable.
    s.queue_set_paused("p", false, t0()).await.unwrap();
    assert_eq!(claim(s, "p", 10, t0()).await.len(), 1);
    // The expired task is discarded by the expirer.
    assert_eq!(s.task_expire(t0(), 100).await.unwrap(), 1);
    let e = s.task_get(got[1].id).await.unwrap().unwrap();
    assert_eq!(e.state, TaskState::Discarded);
    assert!(e.errors[0].message.contains("expired"));
}

async fn concurrency_key_limit(b: Bundle) {
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
    s.task_complete_many(&[done(&got[0], json!(1))], t0())
        .await
        .unwrap();
    let next = claim(s, "default", 10, t0()).await;
    assert_eq!(
        next.iter().map(|t| t.kind.as_str()).collect::<Vec<_>>(),
        vec!["k2"]
    );
}

async fn queue_concurrency_limit(b: Bundle) {
    let s = &*b.store;
    s.queue_put(
        "q",
        &QueueSettings {
            concurrency_limit: Some(3),
            ..Default::default()
        },
        t0(),
    )
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
    s.task_fail_many(&[fail(&a[0], "boom")], None, t0())
        .await
        .unwrap();
    assert_eq!(claim(s, "q", 10, t0()).await.len(), 1);
    let q = s.queue_get("q").await.unwrap();
    assert_eq!(q.counts[&TaskState::Running], 3);
    assert_eq!(q.counts[&TaskState::Retryable], 1);
    assert_eq!(q.counts[&TaskState::Available], 6);
    assert_eq!(q.settings.concurrency_limit, Some(3));
}

async fn exactly_once_under_concurrent_claimers(b: Bundle) {
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
                        queue: "default".into(),
                        worker: format!("w{w}"),
                        node: format!("n{}", w % 2),
                        limit: 7,
                        lease: None,
                        now: t0(),
                    })
                    .await
                    .unwrap();
                if got.is_empty() {
                    break;
                }
                let items: Vec<TaskComplete> = got.iter().map(|t| done(t, json!(w))).collect();
                let outs = s.task_complete_many(&items, t0()).await.unwrap();
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

async fn leases_heartbeats_and_stale_tokens(b: Bundle) {
    let s = &*b.store;
    let mut long = nt("a");
    long.timeout = Some(Duration::from_secs(3600));
    insert(s, vec![long], t0()).await;
    let t = claim(s, "default", 1, t0()).await.remove(0);
    let token = t.lease.clone().unwrap().token;
    let hb = s
        .task_heartbeat(TaskHeartbeatParams {
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
            .task_complete_many(
                &[TaskComplete {
                    id: t.id,
                    token: bad.into(),
                    result: json!("x"),
                }],
                t0(),
            )
            .await
            .unwrap();
        assert_eq!(outs, vec![LeaseOutcome::LeaseLost]);
    }
    let e = s
        .task_heartbeat(TaskHeartbeatParams {
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
    assert_eq!(s.task_rescue(t0() + secs(161), 100).await.unwrap().len(), 1);
    s.task_promote(t0() + secs(3600), 100).await.unwrap();
    let t2 = claim(s, "default", 1, t0() + secs(3600)).await.remove(0);
    assert_eq!(t2.attempt, 2);
    let old = s
        .task_complete_many(&[done(&t, json!("old"))], t0() + secs(3600))
        .await
        .unwrap();
    assert_eq!(old, vec![LeaseOutcome::LeaseLost]);
    let old = s
        .task_fail_many(&[fail(&t, "old")], None, t0() + secs(3600))
        .await
        .unwrap();
    assert_eq!(old, vec![LeaseOutcome::LeaseLost]);
    let new = s
        .task_complete_many(&[done(&t2, json!("new"))], t0() + secs(3601))
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
        .task_complete_many(&[done(&t2, json!("again"))], t0())
        .await
        .unwrap();
    assert_eq!(twice, vec![LeaseOutcome::LeaseLost]);
}

/// The attempt deadline (`attempted_at + timeout`, issue 9): a lease never reaches past it, a
/// heartbeat or completion at or after it fails the attempt with `timeout`, and a lease that
/// expires before it is rescued as `lease expired`.
async fn attempt_deadline(b: Bundle) {
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
            queue: "default".into(),
            worker: "w1".into(),
            node: "n1".into(),
            limit: 2,
            lease: Some(Duration::from_secs(3600)),
            now: t0(),
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
        .task_complete_many(&[done(&got[1], json!("late"))], t0() + secs(11))
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
            queue: "default".into(),
            worker: "w1".into(),
            node: "n1".into(),
            limit: 1,
            lease: Some(Duration::from_secs(2)),
            now: t0(),
        })
        .await
        .unwrap();
    assert_eq!(third.len(), 1);
    assert_eq!(s.task_rescue(t0() + secs(3), 10).await.unwrap().len(), 1);
    let r = s.task_get(third[0].id).await.unwrap().unwrap();
    assert_eq!(r.errors[0].message, "lease expired");
}

async fn rescue_retries_then_discards(b: Bundle) {
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
        s.task_rescue(t0() + secs(10), 100).await.unwrap().len(),
        0,
        "not yet expired"
    );
    assert_eq!(s.task_rescue(t0() + secs(11), 100).await.unwrap().len(), 1);
    let r = s.task_get(id).await.unwrap().unwrap();
    assert_eq!(r.state, TaskState::Retryable);
    assert_eq!(r.run_at, t0() + secs(16));
    assert_eq!(r.errors.len(), 1);
    // The lease ran out at the attempt's deadline (attempted_at + timeout).
    assert_eq!(r.errors[0].message, "timeout");
    assert_eq!(r.errors[0].attempt, 1);
    assert_eq!(r.errors[0].worker.as_deref(), Some("w1"));
    assert_eq!(s.task_next_due().await.unwrap(), Some(t0() + secs(16)));
    assert_eq!(s.task_promote(t0() + secs(15), 100).await.unwrap().count, 0);
    assert_eq!(s.task_promote(t0() + secs(16), 100).await.unwrap().count, 1);
    claim(s, "default", 1, t0() + secs(16)).await.remove(0);
    assert_eq!(s.task_rescue(t0() + secs(100), 100).await.unwrap().len(), 1);
    let r = s.task_get(id).await.unwrap().unwrap();
    assert_eq!(r.state, TaskState::Discarded);
    assert_eq!(r.errors.len(), 2);
    assert_eq!(r.finished_at, Some(t0() + secs(100)));
}

async fn fail_rules(b: Bundle) {
    let s = &*b.store;
    let mut v = vec![];
    for k in ["backoff", "retry_in", "permanent", "last"] {
        let mut n = nt(k);
        n.max_attempts = Some(if k == "last" { 1 } else { 3 });
        n.backoff = Some(docket_core::Backoff {
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
    let outs = s.task_fail_many(&items, Some("wX"), t0()).await.unwrap();
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
    s.task_promote(t0() + secs(2), 10).await.unwrap();
    let again = claim(s, "default", 10, t0() + secs(2)).await;
    let first = again.iter().find(|t| t.id == c[0].id).unwrap();
    let outs = s
        .task_fail_many(&[fail(first, "again")], None, t0() + secs(2))
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
        .task_fail_many(
            &[TaskFail {
                id: 777_777,
                token: "x".into(),
                error: "e".into(),
                retry_in: None,
                permanent: false,
            }],
            None,
            t0(),
        )
        .await
        .unwrap();
    assert_eq!(outs, vec![LeaseOutcome::NotFound]);
}

async fn cancel_and_retry_by_hand(b: Bundle) {
    let s = &*b.store;
    let got = insert(s, vec![nt("waiting"), nt("running"), nt("running2")], t0()).await;
    let c = s.task_cancel(got[0].id, t0()).await.unwrap();
    assert_eq!(c.state, TaskState::Cancelled);
    assert_eq!(c.finished_at, Some(t0()));
    // Cancelling again is harmless.
    assert_eq!(
        s.task_cancel(got[0].id, t0()).await.unwrap().state,
        TaskState::Cancelled
    );
    let running = claim(s, "default", 2, t0()).await;
    assert_eq!(running.len(), 2);
    let r = s.task_cancel(running[0].id, t0()).await.unwrap();
    assert_eq!(r.state, TaskState::Running);
    assert_eq!(r.cancel_requested_at, Some(t0()));
    let e = s
        .task_heartbeat(TaskHeartbeatParams {
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
        .task_complete_many(&[done(&running[0], json!(1))], t0())
        .await
        .unwrap();
    assert_eq!(outs, vec![LeaseOutcome::Cancelled]);
    // A cancel that lands while the work finishes: complete answers cancelled, result kept.
    s.task_cancel(running[1].id, t0()).await.unwrap();
    let outs = s
        .task_complete_many(&[done(&running[1], json!("r"))], t0())
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
    let r = s.task_retry(got[0].id, t0() + secs(5)).await.unwrap();
    assert_eq!(r.state, TaskState::Available);
    assert_eq!(r.finished_at, None);
    let again = claim(s, "default", 10, t0() + secs(5)).await;
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].id, got[0].id);
    s.task_complete_many(&[done(&again[0], json!(null))], t0())
        .await
        .unwrap();
    let e = s.task_retry(got[0].id, t0()).await.unwrap_err();
    assert!(matches!(e, StoreError::InvalidState(_)), "{e:?}");
    let e = s.task_cancel(got[0].id, t0()).await.unwrap_err();
    assert!(matches!(e, StoreError::InvalidState(_)), "{e:?}");
    assert!(matches!(
        s.task_retry(99_999, t0()).await.unwrap_err(),
        StoreError::NotFound(_)
    ));
    assert!(matches!(
        s.task_cancel(99_999, t0()).await.unwrap_err(),
        StoreError::NotFound(_)
    ));
}

async fn retry_of_exhausted_task_gets_one_more_attempt(b: Bundle) {
    let s = &*b.store;
    let mut n = nt("x");
    n.max_attempts = Some(1);
    let id = insert(s, vec![n], t0()).await[0].id;
    let t = claim(s, "default", 1, t0()).await.remove(0);
    s.task_fail_many(&[fail(&t, "nope")], None, t0())
        .await
        .unwrap();
    assert_eq!(
        s.task_get(id).await.unwrap().unwrap().state,
        TaskState::Discarded
    );
    let r = s.task_retry(id, t0()).await.unwrap();
    assert_eq!(r.max_attempts, 2);
    let t = claim(s, "default", 1, t0()).await.remove(0);
    assert_eq!(t.attempt, 2);
}

async fn unique_keys(b: Bundle) {
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
    s.task_complete_many(&[done(&t, json!(1))], t0())
        .await
        .unwrap();
    let third = insert(s, vec![a2], t0()).await;
    assert_eq!(third[0].inserted, Some(true));
    assert_ne!(third[0].id, got[0].id);
}

async fn prune_by_retention(b: Bundle) {
    let s = &*b.store;
    s.queue_put(
        "short",
        &QueueSettings {
            retention_completed: Some(Duration::from_secs(10)),
            ..Default::default()
        },
        t0(),
    )
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
    s.task_complete_many(&items, t0()).await.unwrap();
    let mut f = fail(&bad[0], "x");
    f.permanent = true;
    s.task_fail_many(&[f], None, t0()).await.unwrap();
    let short = claim(s, "short", 1, t0()).await;
    s.task_complete_many(&[done(&short[0], json!(1))], t0())
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

async fn node_registry(b: Bundle) {
    let s = &*b.store;
    let rec = |name: &str, at: Timestamp| NodeRecord {
        name: name.into(),
        started_at: t0(),
        heartbeat_at: at,
        stopped_at: None,
        version: "0.1.0".into(),
        info: json!({"listen": "127.0.0.1:7070"}),
    };
    s.node_heartbeat(&rec("a", t0())).await.unwrap();
    s.node_heartbeat(&rec("b", t0())).await.unwrap();
    s.node_heartbeat(&rec("a", t0() + secs(5))).await.unwrap();
    s.node_stop("b", t0() + secs(6)).await.unwrap();
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

async fn queue_settings_round_trip(b: Bundle) {
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
    };
    let q = s.queue_put("x", &set, t0()).await.unwrap();
    assert_eq!(q.settings, set);
    let q = s.queue_set_paused("x", true, t0()).await.unwrap();
    assert!(q.settings.paused);
    assert_eq!(q.settings.max_attempts, Some(9));
    insert(s, vec![nt("in-default")], t0()).await;
    let all = s.queue_list().await.unwrap();
    assert_eq!(
        all.iter().map(|q| q.name.as_str()).collect::<Vec<_>>(),
        vec!["default", "x"]
    );
    assert_eq!(all[0].counts[&TaskState::Available], 1);
    assert_eq!(all[0].counts.len(), 7);
    let unknown = s.queue_get("nothing").await.unwrap();
    assert_eq!(unknown.settings, QueueSettings::default());
}

async fn bulk_insert_claim_complete(b: Bundle) {
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
    let outs = s.task_complete_many(&items, t0()).await.unwrap();
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
}

async fn process_zombies_simple_repair_and_list(b: Bundle) {
    use docket_core::process::{HistoryRange, ProcessStatus};
    let s = &*b.store;
    let task = |kind: &str, run_in: Option<u64>| {
        resolve(
            NewTask {
                queue: Some("process:z".into()),
                concurrency_key: Some("z:p1".into()),
                concurrency_limit: Some(1),
                run_in: run_in.map(Duration::from_secs),
                ..NewTask::new(kind, json!({"process_id": "p1"}))
            },
            t0(),
        )
    };
    let init = s
        .process_create("z", "p1", task("init", None), t0())
        .await
        .unwrap();
    assert!(matches!(
        s.process_create("z", "p1", task("init", None), t0()).await,
        Err(StoreError::Conflict(_))
    ));
    let timer = s
        .process_enqueue(
            "z",
            "p1",
            task("timeout", Some(3600)),
            ProcessStatus::Init,
            t0(),
        )
        .await
        .unwrap();
    let refused = s
        .process_enqueue("z", "p1", task("call", None), ProcessStatus::Running, t0())
        .await;
    assert!(
        matches!(refused, Err(StoreError::InvalidState(ref m)) if m == "process is init"),
        "{refused:?}"
    );
    let c = s
        .task_claim(TaskClaimParams {
            kinds: None,
            queue: "process:z".into(),
            worker: "w".into(),
            node: "n1".into(),
            limit: 5,
            lease: Some(Duration::from_secs(10)),
            now: t0(),
        })
        .await
        .unwrap();
    assert_eq!(c.iter().map(|t| t.id).collect::<Vec<_>>(), vec![init.id]);
    // Its node dies: past the lease, the generic rescuer leaves it to zombie collection.
    assert_eq!(s.task_rescue(t0() + secs(11), 100).await.unwrap().len(), 0);
    assert_eq!(
        s.process_collect_zombies(t0() + secs(5), 100)
            .await
            .unwrap(),
        0,
        "lease still good"
    );
    assert_eq!(
        s.process_collect_zombies(t0() + secs(11), 100)
            .await
            .unwrap(),
        1
    );
    let (p, _) = s
        .process_get("z", "p1", HistoryRange::default())
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
        s.process_list("z", Some(ProcessStatus::Error), None, 10)
            .await
            .unwrap()
            .len(),
        1
    );
    s.process_simple_repair("z", "p1", t0() + secs(20))
        .await
        .unwrap();
    let (p, _) = s
        .process_get("z", "p1", HistoryRange::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (p.status, p.previous_status, p.detail),
        (ProcessStatus::Running, Some(ProcessStatus::Error), None)
    );
    assert!(matches!(
        s.process_simple_repair("z", "p1", t0()).await,
        Err(StoreError::InvalidState(_))
    ));
    assert!(matches!(
        s.process_simple_repair("z", "nope", t0()).await,
        Err(StoreError::NotFound(_))
    ));
    let all = s.process_list("z", None, None, 10).await.unwrap();
    assert_eq!(
        all.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
        vec!["p1"]
    );
    assert!(s
        .process_list("z", None, Some("p1"), 10)
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
    let notes = s.notification_list(Some("z"), 0, 100).await.unwrap();
    assert!(!notes.is_empty());
    let last = notes.last().unwrap().seq;
    assert_eq!(s.notification_last_seq().await.unwrap(), last);
    s.sink_lease("webhook:z", "me", far, t0()).await.unwrap();
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
    assert!(s.sink_advance("webhook:z", "me", last).await.unwrap());
    assert_eq!(
        s.aux_prune(aux(far)).await.unwrap().notifications,
        notes.len() as u64
    );
    assert!(s
        .notification_list(Some("z"), 0, 100)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(s.notification_last_seq().await.unwrap(), 0);
}

async fn dashboard_reads_and_operator_actions(b: Bundle) {
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
    // Oldest available per queue.
    let oldest = s.queue_oldest_available().await.unwrap();
    assert_eq!(oldest, vec![("default".to_string(), t0())]);
    // Run now: scheduled → available; an available task is refused.
    let now = t0() + secs(5);
    let t = s.task_run_now(tasks[2].id, now).await.unwrap();
    assert_eq!((t.state, t.run_at), (TaskState::Available, now));
    assert!(matches!(
        s.task_run_now(tasks[0].id, now).await,
        Err(StoreError::InvalidState(_))
    ));
    assert!(matches!(
        s.task_run_now(999_999, now).await,
        Err(StoreError::NotFound(_))
    ));
    // Throughput: completed and discarded per minute.
    let c = claim(s, "default", 3, t0() + secs(10)).await;
    assert_eq!(c.len(), 3);
    s.task_complete_many(
        &[done(&c[0], json!(1)), done(&c[1], json!(2))],
        t0() + secs(61),
    )
    .await
    .unwrap();
    let mut f = fail(&c[2], "boom in the errors");
    f.permanent = true;
    s.task_fail_many(&[f], None, t0() + secs(130))
        .await
        .unwrap();
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
    s.audit_add(
        "cli:ann",
        "task.cancel",
        "task:1",
        Some(json!({"q": "default"})),
        t0(),
    )
    .await
    .unwrap();
    s.audit_add(
        "dashboard",
        "queue.pause",
        "queue:default",
        None,
        t0() + secs(1),
    )
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
    let (in_use, idle) = s.pool_connections();
    assert!(in_use + idle >= 1);
}

macro_rules! suite {
    ($backend:ident: $($name:ident),* $(,)?) => {
        mod $backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::$backend().await).await;
                }
            )*
        }
    };
}

macro_rules! both {
    ($($name:ident),* $(,)?) => {
        suite!(pg: $($name),*);
        suite!(sqlite: $($name),*);
    };
}

both!(
    insert_get_and_defaults,
    claim_order_priority_run_at_id,
    claim_skips_what_it_must,
    concurrency_key_limit,
    queue_concurrency_limit,
    exactly_once_under_concurrent_claimers,
    leases_heartbeats_and_stale_tokens,
    attempt_deadline,
    claim_by_kinds,
    rescue_retries_then_discards,
    fail_rules,
    cancel_and_retry_by_hand,
    retry_of_exhausted_task_gets_one_more_attempt,
    unique_keys,
    prune_by_retention,
    node_registry,
    queue_settings_round_trip,
    bulk_insert_claim_complete,
    process_zombies_simple_repair_and_list,
    dashboard_reads_and_operator_actions,
    api_tokens,
);

/// Tokens: create (only the hash is kept), find by hash, names unique among live tokens,
/// revoke, last use, list.
async fn api_tokens(b: Bundle) {
    use docket_core::auth::Scope;
    let s = &b.store;
    let made = s
        .token_create(TokenCreate {
            name: "ci".into(),
            hash: "h1".into(),
            scopes: vec![Scope::Work, Scope::Read],
            queues: vec!["emails".into()],
            expires_at: Some(t0() + secs(3600)),
            now: t0(),
        })
        .await
        .unwrap();
    assert_eq!(made.name, "ci");
    assert_eq!(made.scopes, vec![Scope::Work, Scope::Read]);
    assert_eq!(made.queues, vec!["emails".to_string()]);
    assert_eq!(made.created_at, t0());
    assert_eq!(made.expires_at, Some(t0() + secs(3600)));
    assert_eq!((made.revoked_at, made.last_used_at), (None, None));
    let found = s.token_by_hash("h1").await.unwrap().unwrap();
    assert_eq!(found, made);
    assert!(s.token_by_hash("nope").await.unwrap().is_none());
    // A second live token with the name is refused; so is a second token with the hash.
    let again = |name: &str, hash: &str| TokenCreate {
        name: name.into(),
        hash: hash.into(),
        scopes: vec![Scope::Admin],
        queues: vec![],
        expires_at: None,
        now: t0(),
    };
    assert!(matches!(
        s.token_create(again("ci", "h2")).await,
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        s.token_create(again("other", "h1")).await,
        Err(StoreError::Conflict(_))
    ));
    s.token_touch(TokenTouch {
        id: made.id,
        now: t0() + secs(5),
    })
    .await
    .unwrap();
    assert_eq!(
        s.token_by_hash("h1").await.unwrap().unwrap().last_used_at,
        Some(t0() + secs(5))
    );
    // Revoking: once; then the name is free again and the revoked one stays listed.
    let rv = |name: &str| TokenRevoke {
        name: name.into(),
        now: t0() + secs(10),
    };
    assert!(s.token_revoke(rv("ci")).await.unwrap());
    assert!(!s.token_revoke(rv("ci")).await.unwrap());
    assert!(!s.token_revoke(rv("missing")).await.unwrap());
    assert_eq!(
        s.token_by_hash("h1").await.unwrap().unwrap().revoked_at,
        Some(t0() + secs(10))
    );
    let second = s.token_create(again("ci", "h2")).await.unwrap();
    let all = s.token_list().await.unwrap();
    assert_eq!(
        all.iter().map(|t| t.id).collect::<Vec<_>>(),
        vec![made.id, second.id]
    );
    assert!(all[0].revoked_at.is_some() && all[1].revoked_at.is_none());
}

fn state_run_at(o: &LeaseOutcome) -> (TaskState, docket_core::Timestamp) {
    match o {
        LeaseOutcome::Ok { state, run_at, .. } => (*state, *run_at),
        other => panic!("not applied: {other:?}"),
    }
}
