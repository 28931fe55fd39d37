//! The engine on every backend (PostgreSQL, SQLite, MySQL/MariaDB): in-process workers, graceful shutdown, concurrency keys and the
//! maintenance pass driven by a manual clock.

use async_trait::async_trait;
use chrono::TimeZone;
use docket_core::{Clock, ManualClock, NewTask, SystemClock, Task, TaskState};
use docket_engine::maintenance;
use docket_engine::probe::{Probe, Step};
use docket_engine::worker::{Handler, Outcome, WorkerConfig, WorkerPool};
use docket_engine::{Claim, Engine, EngineConfig};
use docket_store::testing::TestStore;
use docket_store::{Store, TaskListParams};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

struct Db {
    store: Arc<dyn Store>,
    _db: TestStore,
}

async fn pg() -> Db {
    let t = TestStore::postgres().await;
    Db {
        store: t.store.clone(),
        _db: t,
    }
}

async fn mysql() -> Db {
    let t = TestStore::mysql().await;
    Db {
        store: t.store.clone(),
        _db: t,
    }
}

async fn sqlite() -> Db {
    let t = TestStore::sqlite().await;
    Db {
        store: t.store.clone(),
        _db: t,
    }
}

fn engine(db: &Db, clock: Arc<dyn Clock>) -> Engine {
    let mut cfg = EngineConfig::new("e1", db.store.backend());
    cfg.rescue_interval = Duration::from_millis(100);
    Engine::new(db.store.clone(), clock, cfg)
}

struct Echo;
#[async_trait]
impl Handler for Echo {
    async fn run(&self, t: &Task) -> Outcome {
        Outcome::Complete(json!({"echo": t.payload}))
    }
}

struct Flaky;
#[async_trait]
impl Handler for Flaky {
    async fn run(&self, t: &Task) -> Outcome {
        if t.attempt < 3 {
            Outcome::Retry {
                error: format!("try {}", t.attempt),
                retry_in: Some(Duration::from_millis(20)),
            }
        } else {
            Outcome::Complete(json!(t.attempt))
        }
    }
}

struct Bad;
#[async_trait]
impl Handler for Bad {
    async fn run(&self, _: &Task) -> Outcome {
        Outcome::Discard("invalid input".into())
    }
}

/// Sleeps, and records the most tasks it saw running at once.
struct Slow {
    now: AtomicUsize,
    max: AtomicUsize,
    ms: u64,
}
#[async_trait]
impl Handler for Slow {
    async fn run(&self, _: &Task) -> Outcome {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(n, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(self.ms)).await;
        self.now.fetch_sub(1, Ordering::SeqCst);
        Outcome::Complete(json!(null))
    }
}

/// Panics on kind `boom`; sleeps an hour on kind `hang`.
struct Unruly;
#[async_trait]
impl Handler for Unruly {
    async fn run(&self, t: &Task) -> Outcome {
        if t.kind == "boom" {
            panic!("handler exploded on task {}", t.id);
        }
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Outcome::Complete(json!(null))
    }
}

/// Issue 9: a panicking handler fails its attempt at once with `panic: …` (not `lease
/// expired` a lease later), and a handler past the task's timeout is cancelled and fails with
/// `timeout`; the pool goes on working.
async fn pool_survives_panics_and_enforces_timeouts(db: Db) {
    let e = engine(&db, Arc::new(SystemClock));
    let stop = CancellationToken::new();
    let spec = |kind: &str| NewTask {
        max_attempts: Some(1),
        timeout: Some(Duration::from_millis(500)),
        ..NewTask::new(kind, json!(null))
    };
    let got = e
        .enqueue_many(vec![spec("boom"), spec("hang"), spec("ok")])
        .await
        .unwrap();
    let mut cfg = WorkerConfig::new("default");
    cfg.grace = Duration::from_millis(100);
    let pool = WorkerPool::new(e.clone(), cfg)
        .register("boom", Arc::new(Unruly))
        .register("hang", Arc::new(Unruly))
        .register("ok", Arc::new(Echo));
    let run = tokio::spawn(pool.run(stop.clone()));
    let all = wait_finished(&*db.store, 3).await;
    stop.cancel();
    run.await.unwrap();
    let by = |id: i64| all.iter().find(|t| t.id == id).unwrap().clone();
    let boom = by(got[0].id);
    assert_eq!(boom.state, TaskState::Discarded);
    assert!(
        boom.errors[0]
            .message
            .starts_with("panic: handler exploded on task"),
        "{:?}",
        boom.errors
    );
    let hang = by(got[1].id);
    assert_eq!(hang.state, TaskState::Discarded);
    assert_eq!(hang.errors[0].message, "timeout");
    assert!(
        hang.errors[0].duration_ms.unwrap() < 5000,
        "{:?}",
        hang.errors
    );
    assert_eq!(by(got[2].id).state, TaskState::Completed);
}

/// Issue 12: the pool claims only kinds it has handlers for; a task of another kind waits
/// (available, untouched) instead of being discarded.
async fn pool_leaves_unknown_kinds_waiting(db: Db) {
    let e = engine(&db, Arc::new(SystemClock));
    let stop = CancellationToken::new();
    let got = e
        .enqueue_many(vec![
            NewTask::new("known", json!(1)),
            NewTask::new("unknown", json!(2)),
        ])
        .await
        .unwrap();
    let pool =
        WorkerPool::new(e.clone(), WorkerConfig::new("default")).register("known", Arc::new(Echo));
    let run = tokio::spawn(pool.run(stop.clone()));
    wait_finished(&*db.store, 1).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.cancel();
    run.await.unwrap();
    let unknown = db.store.task_get(got[1].id).await.unwrap().unwrap();
    assert_eq!(unknown.state, TaskState::Available);
    assert_eq!(unknown.attempt, 0);
    assert!(unknown.errors.is_empty());
}

async fn wait_finished(s: &dyn Store, n: usize) -> Vec<Task> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let all = s
            .task_list(TaskListParams {
                limit: 1000,
                ..Default::default()
            })
            .await
            .unwrap();
        if all.iter().filter(|t| t.state.is_finished()).count() >= n {
            return all;
        }
        assert!(
            Instant::now() < deadline,
            "not finished: {:?}",
            all.iter().map(|t| (t.id, t.state)).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn pool_runs_handlers(db: Db) {
    let e = engine(&db, Arc::new(SystemClock));
    let stop = CancellationToken::new();
    e.start(stop.clone()).await.unwrap();
    let mut cfg = WorkerConfig::new("default");
    cfg.concurrency = 4;
    cfg.prefetch = 8;
    let pool = WorkerPool::new(e.clone(), cfg)
        .register("echo", Arc::new(Echo))
        .register("flaky", Arc::new(Flaky))
        .register("bad", Arc::new(Bad));
    let run = tokio::spawn(pool.run(stop.clone()));
    let mut specs: Vec<NewTask> = (0..20).map(|i| NewTask::new("echo", json!(i))).collect();
    specs.push(NewTask::new("flaky", json!("f")));
    specs.push(NewTask::new("bad", json!("b")));
    specs.push(NewTask::new("mystery", json!("m")));
    e.enqueue_many(specs).await.unwrap();
    let all = wait_finished(&*db.store, 22).await;
    for t in &all {
        match t.kind.as_str() {
            "echo" => {
                assert_eq!(t.state, TaskState::Completed);
                assert_eq!(t.result, Some(json!({"echo": t.payload})));
            }
            "flaky" => {
                assert_eq!((t.state, t.attempt), (TaskState::Completed, 3));
                let msgs: Vec<&str> = t.errors.iter().map(|e| e.message.as_str()).collect();
                assert_eq!(msgs, vec!["try 1", "try 2"]);
            }
            "bad" => {
                assert_eq!((t.state, t.attempt), (TaskState::Discarded, 1));
                assert_eq!(t.errors[0].message, "invalid input");
            }
            // No handler: not claimed, it waits for a worker that handles it.
            _ => assert_eq!((t.state, t.attempt), (TaskState::Available, 0)),
        }
    }
    stop.cancel();
    run.await.unwrap();
}

async fn concurrency_key_holds_in_pool(db: Db) {
    // A poll interval far beyond the test's deadline: the next task of the key must be started
    // by the wake-up its predecessor's completion sends, not by polling.
    let mut cfg = EngineConfig::new("e1", db.store.backend());
    cfg.poll_interval = Duration::from_secs(60);
    let e = Engine::new(db.store.clone(), Arc::new(SystemClock), cfg);
    let stop = CancellationToken::new();
    e.start(stop.clone()).await.unwrap();
    let slow = Arc::new(Slow {
        now: AtomicUsize::new(0),
        max: AtomicUsize::new(0),
        ms: 30,
    });
    let mut cfg = WorkerConfig::new("default");
    cfg.concurrency = 8;
    cfg.prefetch = 8;
    let run = tokio::spawn(
        WorkerPool::new(e.clone(), cfg)
            .register("one", slow.clone())
            .run(stop.clone()),
    );
    let specs = (0..12)
        .map(|i| NewTask {
            concurrency_key: Some("process-1".into()),
            ..NewTask::new("one", json!(i))
        })
        .collect();
    e.enqueue_many(specs).await.unwrap();
    wait_finished(&*db.store, 12).await;
    assert_eq!(
        slow.max.load(Ordering::SeqCst),
        1,
        "one task of the key at a time"
    );
    stop.cancel();
    run.await.unwrap();
}

async fn shutdown_finishes_claimed_work(db: Db) {
    let e = engine(&db, Arc::new(SystemClock));
    let slow = Arc::new(Slow {
        now: AtomicUsize::new(0),
        max: AtomicUsize::new(0),
        ms: 400,
    });
    let mut cfg = WorkerConfig::new("default");
    cfg.concurrency = 2;
    cfg.prefetch = 2;
    let stop = CancellationToken::new();
    let run = tokio::spawn(
        WorkerPool::new(e.clone(), cfg)
            .register("slow", slow.clone())
            .run(stop.clone()),
    );
    e.enqueue_many((0..10).map(|i| NewTask::new("slow", json!(i))).collect())
        .await
        .unwrap();
    while slow.now.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.cancel();
    tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .expect("pool stops within its grace")
        .unwrap();
    let all = db
        .store
        .task_list(TaskListParams {
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    let count = |s| all.iter().filter(|t| t.state == s).count();
    assert_eq!(
        count(TaskState::Running),
        0,
        "everything claimed was finished and written"
    );
    assert!(count(TaskState::Completed) >= 1);
    assert_eq!(
        count(TaskState::Completed) + count(TaskState::Available),
        10
    );
}

async fn maintenance_with_manual_clock(db: Db) {
    let t0 = chrono::Utc.with_ymd_and_hms(2030, 6, 1, 0, 0, 0).unwrap();
    let clock = ManualClock::new(t0);
    let e = engine(&db, Arc::new(clock.clone()));
    let later = NewTask {
        run_in: Some(Duration::from_secs(10)),
        ..NewTask::new("later", json!(1))
    };
    let expiring = NewTask {
        run_in: Some(Duration::from_secs(1)),
        expires_at: Some(docket_core::time::add(
            t0,
            std::time::Duration::from_secs(2),
        )),
        ..NewTask::new("expiring", json!(2))
    };
    let leased = NewTask {
        max_attempts: Some(1),
        ..NewTask::new("leased", json!(3))
    };
    let got = e.enqueue_many(vec![later, expiring, leased]).await.unwrap();
    let p = maintenance::pass(&e, clock.now()).await.unwrap();
    assert_eq!(p, maintenance::Pass::default());
    let never = CancellationToken::new();
    let c = e
        .claim(
            &Claim::new("default", "w", 1).lease(Duration::from_secs(5)),
            &never,
        )
        .await
        .unwrap();
    assert_eq!(c[0].id, got[2].id);
    clock.advance(Duration::from_secs(10));
    let p = maintenance::pass(&e, clock.now()).await.unwrap();
    assert_eq!((p.promoted, p.rescued, p.expired), (1, 1, 1), "{p:?}");
    let t = |i: usize| got[i].id;
    assert_eq!(
        db.store.task_get(t(0)).await.unwrap().unwrap().state,
        TaskState::Available
    );
    assert_eq!(
        db.store.task_get(t(1)).await.unwrap().unwrap().state,
        TaskState::Discarded
    );
    assert_eq!(
        db.store.task_get(t(2)).await.unwrap().unwrap().state,
        TaskState::Discarded
    );
    // Discarded tasks are kept 7 days by default, then pruned.
    clock.advance(Duration::from_secs(6 * 24 * 3600));
    assert_eq!(maintenance::pass(&e, clock.now()).await.unwrap().pruned, 0);
    clock.advance(Duration::from_secs(2 * 24 * 3600));
    assert_eq!(maintenance::pass(&e, clock.now()).await.unwrap().pruned, 2);
}

async fn schedules_fire_each_occurrence_once(db: Db) {
    use docket_core::ScheduleSpec;
    use docket_engine::schedule::fire_due;
    let t0 = chrono::Utc.with_ymd_and_hms(2030, 6, 1, 0, 0, 0).unwrap();
    let clock = ManualClock::new(t0);
    let e1 = engine(&db, Arc::new(clock.clone()));
    let e2 = {
        let cfg = EngineConfig::new("e2", db.store.backend());
        Engine::new(db.store.clone(), Arc::new(clock.clone()), cfg)
    };
    let spec = ScheduleSpec {
        name: "tick".into(),
        task: NewTask::new("tick", json!({"n": 1})),
        every: Some(Duration::from_secs(60)),
        drift: false,
        after_end: false,
        cron: None,
        timezone: None,
        start_at: None,
    };
    let s = e1.schedule_put(spec.clone()).await.unwrap();
    assert_eq!(s.next_run_at, t0);
    // Two nodes race for every occurrence: exactly one of them enqueues it.
    for round in 0..10 {
        let (a, b) = tokio::join!(fire_due(&e1, clock.now()), fire_due(&e2, clock.now()));
        assert_eq!(a.unwrap() + b.unwrap(), 1, "round {round}");
        let (a, b) = tokio::join!(fire_due(&e1, clock.now()), fire_due(&e2, clock.now()));
        assert_eq!(a.unwrap() + b.unwrap(), 0, "round {round} fired twice");
        clock.advance(Duration::from_secs(60));
    }
    let tasks = db
        .store
        .task_list(TaskListParams {
            kind: Some("tick".into()),
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(tasks.len(), 10);
    let mut keys: Vec<_> = tasks
        .iter()
        .map(|t| t.unique_key.clone().unwrap())
        .collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 10, "a unique key per occurrence");
    assert!(keys[0].starts_with("schedule:tick:2030-06-01T00:00:00"));
    // Down for 10.5 minutes: one catch-up run, then back on the grid.
    clock.advance(Duration::from_secs(630));
    assert_eq!(fire_due(&e1, clock.now()).await.unwrap(), 1);
    assert_eq!(fire_due(&e1, clock.now()).await.unwrap(), 0);
    let s = db.store.schedule_get("tick").await.unwrap().unwrap();
    assert_eq!(
        s.next_run_at,
        docket_core::time::add(t0, std::time::Duration::from_secs(21 * 60))
    );
    assert!(s.last_task_id.is_some());
    // Paused: nothing fires; resumed: from the next occurrence after now, no burst.
    e1.schedule_pause("tick", true).await.unwrap().unwrap();
    clock.advance(Duration::from_secs(300));
    assert_eq!(fire_due(&e1, clock.now()).await.unwrap(), 0);
    let s = e1.schedule_pause("tick", false).await.unwrap().unwrap();
    assert!(!s.paused);
    assert!(s.next_run_at > clock.now());
    assert_eq!(fire_due(&e1, clock.now()).await.unwrap(), 0);
    // Cron in a time zone.
    let cron = ScheduleSpec {
        name: "nightly".into(),
        every: None,
        cron: Some("30 2 * * *".into()),
        timezone: Some("America/New_York".into()),
        ..spec.clone()
    };
    let s = e1.schedule_put(cron).await.unwrap();
    assert_eq!(
        s.next_run_at,
        chrono::Utc.with_ymd_and_hms(2030, 6, 1, 6, 30, 0).unwrap()
    );
    // Bad specs are refused and nothing is stored.
    let bad = ScheduleSpec {
        name: "bad".into(),
        every: None,
        cron: Some("not a cron".into()),
        ..spec
    };
    assert!(matches!(
        e1.schedule_put(bad).await,
        Err(docket_engine::EngineError::InvalidSchedule(_))
    ));
    assert!(db.store.schedule_get("bad").await.unwrap().is_none());
    assert_eq!(db.store.schedule_list().await.unwrap().len(), 2);
    assert!(db.store.schedule_delete("tick").await.unwrap());
    assert!(!db.store.schedule_delete("tick").await.unwrap());
}

/// A token's `last_used_at` is written on first use and then at most once a minute (docs:
/// operations/security.md), so a busy worker does not turn every request into a write; expiry follows the
/// clock.
async fn token_last_use_is_written_once_a_minute(db: Db) {
    use docket_engine::auth::{NewToken, TokenCheck};
    let t0 = chrono::Utc.with_ymd_and_hms(2030, 6, 1, 0, 0, 0).unwrap();
    let clock = ManualClock::new(t0);
    let e = engine(&db, Arc::new(clock.clone()));
    let (secret, _) = e
        .token_create(NewToken {
            name: "w".into(),
            scopes: vec![docket_core::auth::Scope::Work],
            expires_in: Some(Duration::from_secs(3600)),
            ..Default::default()
        })
        .await
        .unwrap();
    let last = || async { db.store.token_list().await.unwrap()[0].last_used_at };
    assert_eq!(last().await, None);
    assert!(matches!(
        e.token_check(&secret).await.unwrap(),
        TokenCheck::Valid(_)
    ));
    assert_eq!(last().await, Some(t0));
    clock.advance(Duration::from_secs(59));
    e.token_check(&secret).await.unwrap();
    assert_eq!(last().await, Some(t0), "not again within the minute");
    clock.advance(Duration::from_secs(1));
    e.token_check(&secret).await.unwrap();
    let t1 = docket_core::time::add(t0, Duration::from_secs(60));
    assert_eq!(last().await, Some(t1));
    clock.advance(Duration::from_secs(3600));
    assert!(matches!(
        e.token_check(&secret).await.unwrap(),
        TokenCheck::Expired
    ));
    assert_eq!(
        last().await,
        Some(t1),
        "an expired token's use is not recorded"
    );
}

/// `EngineConfig::fail_rule` decides how a failed attempt ends (docs: library.md): with a
/// rule that discards every failure, a task that would be retried (attempts left) is discarded
/// after its first failure; the default rule retries it.
async fn engine_fail_rule_decides(db: Db) {
    fn discard_all(
        _: &Task,
        _: docket_core::Timestamp,
        _: Option<Duration>,
        _: bool,
    ) -> docket_core::task::FailDecision {
        docket_core::task::FailDecision::Discard
    }
    let mut cfg = EngineConfig::new("e1", db.store.backend());
    cfg.fail_rule = discard_all;
    let e = Engine::new(db.store.clone(), Arc::new(SystemClock), cfg);
    let stop = CancellationToken::new();
    e.start(stop.clone()).await.unwrap();
    let pool =
        WorkerPool::new(e.clone(), WorkerConfig::new("default")).register("flaky", Arc::new(Flaky));
    let run = tokio::spawn(pool.run(stop.clone()));
    e.enqueue_many(vec![NewTask {
        max_attempts: Some(5),
        ..NewTask::new("flaky", json!(null))
    }])
    .await
    .unwrap();
    let all = wait_finished(&*db.store, 1).await;
    assert_eq!((all[0].state, all[0].attempt), (TaskState::Discarded, 1));
    assert_eq!(all[0].errors[0].message, "try 1");
    stop.cancel();
    run.await.unwrap();
}

/// Two engines on one database, each with its own store (pool), as two nodes.
async fn two_nodes(db: &Db) -> ([Engine; 2], Arc<dyn Store>) {
    let node2 = db._db.another_node().await;
    let engines = [
        Engine::new(
            db.store.clone(),
            Arc::new(SystemClock),
            EngineConfig::new("n1", db.store.backend()),
        ),
        Engine::new(
            node2.clone(),
            Arc::new(SystemClock),
            EngineConfig::new("n2", node2.backend()),
        ),
    ];
    (engines, node2)
}

/// Two nodes (each its own store and pool on one database), four claimers each, 1,000 tasks:
/// every task is claimed and completed exactly once.
async fn two_nodes_claim_each_task_once(db: Db) {
    let (engines, node2) = two_nodes(&db).await;
    const N: usize = 1000;
    for chunk in (0..N).collect::<Vec<_>>().chunks(250) {
        engines[0]
            .enqueue_many(
                chunk
                    .iter()
                    .map(|i| NewTask::new("t", json!({"i": i})))
                    .collect(),
            )
            .await
            .unwrap();
    }
    let stop = CancellationToken::new();
    let mut handles = vec![];
    for w in 0..8 {
        let e = engines[w % 2].clone();
        let stop = stop.clone();
        handles.push(tokio::spawn(async move {
            let mut mine = vec![];
            loop {
                let got = e
                    .claim(&Claim::new("default", format!("w{w}"), 5), &stop)
                    .await
                    .unwrap();
                if got.is_empty() {
                    break;
                }
                let items: Vec<docket_store::TaskComplete> = got
                    .iter()
                    .map(|t| docket_store::TaskComplete {
                        id: t.id,
                        token: t.lease.as_ref().unwrap().token.clone(),
                        result: json!(w),
                        next: None,
                    })
                    .collect();
                let outs = e.complete_many(&items).await.unwrap();
                assert!(
                    outs.iter()
                        .all(|o| matches!(o, docket_store::LeaseOutcome::Ok { .. })),
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
    let claimed = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(
        (claimed, all.len()),
        (N, N),
        "a task was claimed twice or never"
    );
    let done = db
        .store
        .task_list(TaskListParams {
            states: vec![TaskState::Completed],
            limit: 10_000,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(done.len(), N);
    assert!(done.iter().all(|t| t.attempt == 1));
    node2.close().await;
}

/// Sixteen enqueuers on two nodes (on Galera: through different database nodes) enqueue the same
/// 20 unique keys at once, each in its own order: every enqueue answers (a conflict between
/// nodes goes again inside, never to the caller), each key is held by one task, and every
/// answer for a key names that task.
async fn unique_enqueues_on_two_nodes(db: Db) {
    let (engines, node2) = two_nodes(&db).await;
    const KEYS: usize = 20;
    let mut handles = vec![];
    for w in 0..16 {
        let e = engines[w % 2].clone();
        handles.push(tokio::spawn(async move {
            let specs: Vec<NewTask> = (0..KEYS)
                .map(|i| {
                    let k = (i * 7 + w) % KEYS;
                    NewTask {
                        unique_key: Some(format!("k{k}")),
                        ..NewTask::new("u", json!({"w": w}))
                    }
                })
                .collect();
            e.enqueue_many(specs).await.unwrap()
        }));
    }
    let mut by_key: std::collections::HashMap<String, std::collections::HashSet<i64>> =
        Default::default();
    for h in handles {
        for t in h.await.unwrap() {
            by_key
                .entry(t.unique_key.unwrap())
                .or_default()
                .insert(t.id);
        }
    }
    assert_eq!(by_key.len(), KEYS);
    assert!(
        by_key.values().all(|ids| ids.len() == 1),
        "a key answered with two tasks: {by_key:?}"
    );
    let stored = db
        .store
        .task_list(TaskListParams {
            kind: Some("u".into()),
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(stored.len(), KEYS, "one task per key");
    node2.close().await;
}

/// Debounce (issue 43) on two nodes: 20 enqueuers (10 per node) enqueue the same 5 keys at
/// once, then one more enqueue per key carries `"last"`: each key made exactly one task, every
/// answer for a key names it, and workers on both nodes run each key's task once, with the last
/// payload.
async fn debounce_on_two_nodes(db: Db) {
    let (engines, node2) = two_nodes(&db).await;
    const KEYS: usize = 5;
    let spec = |k: usize, payload: serde_json::Value| NewTask {
        debounce: Some(docket_core::debounce::Debounce {
            key: format!("d{k}"),
            // Long enough that no task comes due while the enqueuers still run on a busy
            // 2-core box; the last enqueue moves it to 1.5 s after itself.
            period: Duration::from_millis(1500),
            max_wait: Some(Duration::from_secs(60)),
        }),
        ..NewTask::new("deb", payload)
    };
    let mut handles = vec![];
    for w in 0..20 {
        let e = engines[w % 2].clone();
        handles.push(tokio::spawn(async move {
            let mut out = vec![];
            for i in 0..KEYS {
                let k = (i + w) % KEYS;
                let t = e.enqueue_many(vec![spec(k, json!({"w": w, "k": k}))]).await;
                out.push((k, t.unwrap().remove(0)));
            }
            out
        }));
    }
    let mut by_key: std::collections::HashMap<usize, std::collections::HashSet<i64>> =
        Default::default();
    let mut created = 0;
    for h in handles {
        for (k, t) in h.await.unwrap() {
            assert_eq!(t.debounce_key.as_deref(), Some(format!("d{k}").as_str()));
            if t.replaced == Some(false) {
                created += 1;
            }
            by_key.entry(k).or_default().insert(t.id);
        }
    }
    assert_eq!(created, KEYS, "one enqueue per key created its task");
    assert!(
        by_key.values().all(|ids| ids.len() == 1),
        "a key answered with two tasks: {by_key:?}"
    );
    for k in 0..KEYS {
        let t = engines[k % 2]
            .enqueue_many(vec![spec(k, json!({"last": true, "k": k}))])
            .await
            .unwrap()
            .remove(0);
        assert_eq!((t.replaced, t.inserted), (Some(true), Some(false)));
        assert!(by_key[&k].contains(&t.id));
    }
    let stop = CancellationToken::new();
    let mut runs = vec![];
    for e in &engines {
        e.start(stop.clone()).await.unwrap();
        let pool = WorkerPool::new(e.clone(), WorkerConfig::new("default"))
            .register("deb", Arc::new(Echo));
        runs.push(tokio::spawn(pool.run(stop.clone())));
    }
    let all = wait_finished(&*db.store, KEYS).await;
    stop.cancel();
    for r in runs {
        r.await.unwrap();
    }
    let deb: Vec<_> = all.iter().filter(|t| t.kind == "deb").collect();
    assert_eq!(deb.len(), KEYS, "one task per key: {deb:?}");
    for t in deb {
        assert_eq!((t.state, t.attempt), (TaskState::Completed, 1));
        assert_eq!(t.payload["last"], json!(true), "{t:?}");
        assert_eq!(t.result, Some(json!({"echo": t.payload})));
    }
    node2.close().await;
}

/// Worker labels (issue 43) on two nodes: pools with labels {gpu, region=eu} (node 1), {gpu}
/// and none (node 2) claim at once from one queue. Every task runs once; what requires a GPU
/// runs on a GPU pool, what prefers eu for an hour on the eu pool, what prefers it for 0 s and
/// the plain tasks anywhere (the plain pool takes some), and what requires a label no pool has
/// still waits.
async fn worker_labels_on_two_nodes(db: Db) {
    let (engines, node2) = two_nodes(&db).await;
    let l = |pairs: &[(&str, &str)]| -> docket_core::labels::Labels {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    };
    let prefer = |ms: u64| docket_core::labels::Prefer {
        labels: l(&[("region", "eu")]),
        for_: Duration::from_millis(ms),
    };
    let mut specs = vec![];
    for i in 0..20 {
        specs.push(NewTask {
            requires: Some(l(&[("gpu", "a100")])),
            ..NewTask::new("req", json!({"i": i}))
        });
        specs.push(NewTask {
            prefer: Some(prefer(3_600_000)),
            ..NewTask::new("pref", json!({"i": i}))
        });
        specs.push(NewTask {
            prefer: Some(prefer(0)),
            ..NewTask::new("soon", json!({"i": i}))
        });
        specs.push(NewTask::new("plain", json!({"i": i})));
    }
    for i in 0..5 {
        specs.push(NewTask {
            requires: Some(l(&[("gpu", "h100")])),
            ..NewTask::new("h100", json!({"i": i}))
        });
    }
    engines[0].enqueue_many(specs).await.unwrap();
    let stop = CancellationToken::new();
    let mut runs = vec![];
    for (node, name, labels) in [
        (0, "gpu-eu", l(&[("gpu", "a100"), ("region", "eu")])),
        (1, "gpu", l(&[("gpu", "a100")])),
        (1, "plain", l(&[])),
    ] {
        let e = &engines[node];
        if name != "plain" {
            e.start(stop.clone()).await.unwrap();
        }
        let mut cfg = WorkerConfig::new("default");
        cfg.worker = name.into();
        cfg.labels = labels;
        cfg.concurrency = 2;
        cfg.prefetch = 2;
        let mut pool = WorkerPool::new(e.clone(), cfg);
        for kind in ["req", "pref", "soon", "plain", "h100"] {
            pool = pool.register(kind, Arc::new(Echo));
        }
        runs.push(tokio::spawn(pool.run(stop.clone())));
    }
    let all = wait_finished(&*db.store, 80).await;
    // The h100 tasks had every chance the others had.
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.cancel();
    for r in runs {
        r.await.unwrap();
    }
    let all = {
        let _ = all;
        db.store
            .task_list(TaskListParams {
                limit: 1000,
                ..Default::default()
            })
            .await
            .unwrap()
    };
    let by = |kind: &'static str| all.iter().filter(move |t| t.kind == kind);
    for t in all.iter().filter(|t| t.kind != "h100") {
        assert_eq!((t.state, t.attempt), (TaskState::Completed, 1), "{t:?}");
    }
    for t in by("req") {
        let w = t.worker.as_deref().unwrap();
        assert!(w == "gpu-eu" || w == "gpu", "{t:?}");
    }
    for t in by("pref") {
        assert_eq!(t.worker.as_deref(), Some("gpu-eu"), "{t:?}");
    }
    for t in by("h100") {
        assert_eq!((t.state, t.attempt), (TaskState::Available, 0), "{t:?}");
    }
    assert!(
        all.iter().any(|t| t.worker.as_deref() == Some("plain")),
        "the plain pool took none"
    );
    node2.close().await;
}

/// Queue limits and concurrency keys stay exact when eight claimers on two nodes race: a queue
/// limited to 3 never has more than 3 tasks between claim and completion, a key limited to 2
/// never more than 2 (each claimer takes one task at a time and holds it 20 ms before
/// completing it) — and each limit was reached, which takes claims of several claimers at once.
async fn limits_hold_across_nodes(db: Db) {
    let (engines, node2) = two_nodes(&db).await;
    let settings = docket_core::QueueSettings {
        concurrency_limit: Some(3),
        ..Default::default()
    };
    engines[0]
        .queue_put("test", "lim", &settings)
        .await
        .unwrap();
    let mut specs: Vec<NewTask> = (0..40)
        .map(|i| NewTask {
            queue: Some("lim".into()),
            ..NewTask::new("t", json!(i))
        })
        .collect();
    specs.extend((0..40).map(|i| NewTask {
        queue: Some("keyed".into()),
        concurrency_key: Some("k".into()),
        concurrency_limit: Some(2),
        ..NewTask::new("t", json!(i))
    }));
    engines[0].enqueue_many(specs).await.unwrap();
    let stop = CancellationToken::new();
    let in_hand: Arc<[AtomicUsize; 2]> = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let most: Arc<[AtomicUsize; 2]> = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let mut handles = vec![];
    for w in 0..8 {
        let e = engines[w % 2].clone();
        let (stop, in_hand, most) = (stop.clone(), in_hand.clone(), most.clone());
        handles.push(tokio::spawn(async move {
            let (q, i) = if w % 4 < 2 { ("lim", 0) } else { ("keyed", 1) };
            let mut done = 0;
            let mut idle = 0;
            while idle < 50 {
                let got = e
                    .claim(&Claim::new(q, format!("w{w}"), 1), &stop)
                    .await
                    .unwrap();
                if got.is_empty() {
                    idle += 1;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
                idle = 0;
                let now = in_hand[i].fetch_add(got.len(), Ordering::SeqCst) + got.len();
                most[i].fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                in_hand[i].fetch_sub(got.len(), Ordering::SeqCst);
                let items: Vec<docket_store::TaskComplete> = got
                    .iter()
                    .map(|t| docket_store::TaskComplete {
                        id: t.id,
                        token: t.lease.as_ref().unwrap().token.clone(),
                        result: json!(null),
                        next: None,
                    })
                    .collect();
                e.complete_many(&items).await.unwrap();
                done += got.len();
            }
            done
        }));
    }
    let mut total = 0;
    for h in handles {
        total += h.await.unwrap();
    }
    assert_eq!(total, 80, "every task ran once");
    let (q, k) = (
        most[0].load(Ordering::SeqCst),
        most[1].load(Ordering::SeqCst),
    );
    assert!(q <= 3, "queue limit 3, {q} were in hand at once");
    assert!(k <= 2, "key limit 2, {k} were in hand at once");
    // The limits were reached by claims of one task each, so the race was real.
    assert_eq!(
        (q, k),
        (3, 2),
        "claimers never held the limits' worth at once"
    );
    node2.close().await;
}

/// A task enqueued through one node reaches a claimer long-polling on another: by NOTIFY on
/// PostgreSQL, by polling (200 ms by default) on SQLite and MySQL, which have no cross-process
/// wake-up. Generous bound: well under the claim's 20 s wait.
async fn other_nodes_find_work(db: Db) {
    let (engines, node2) = two_nodes(&db).await;
    let stop = CancellationToken::new();
    for e in &engines {
        e.start(stop.clone()).await.unwrap();
    }
    let claimer = {
        let e = engines[1].clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let t0 = Instant::now();
            let got = e
                .claim(
                    &Claim::new("far", "w", 1).wait(Duration::from_secs(20)),
                    &stop,
                )
                .await
                .unwrap();
            (t0.elapsed(), got)
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t = engines[0]
        .enqueue_many(vec![NewTask {
            queue: Some("far".into()),
            ..NewTask::new("k", json!(1))
        }])
        .await
        .unwrap();
    let (took, got) = claimer.await.unwrap();
    assert_eq!(got.iter().map(|g| g.id).collect::<Vec<_>>(), vec![t[0].id]);
    assert!(took < Duration::from_secs(5), "picked up after {took:?}");
    stop.cancel();
    node2.close().await;
}

/// Two nodes polling only every 60 s, started, and each in the other's peer list (heartbeats
/// done now rather than at the next period).
async fn two_slow_nodes(db: &Db, stop: &CancellationToken) -> ([Engine; 2], Arc<dyn Store>) {
    let node2 = db._db.another_node().await;
    let engines = [("n1", db.store.clone()), ("n2", node2.clone())].map(|(name, store)| {
        let mut cfg = EngineConfig::new(name, store.backend());
        cfg.poll_interval = Duration::from_secs(60);
        Engine::new(store, Arc::new(SystemClock), cfg)
    });
    for e in &engines {
        e.start(stop.clone()).await.unwrap();
    }
    for e in engines.iter().chain(engines.iter()) {
        maintenance::heartbeat(e, e.clock.now()).await.unwrap();
    }
    (engines, node2)
}

/// Claims one task of `queue` on `e` (kinds `kinds`), waiting up to 30 s: how long it took and
/// the ids.
fn claim_in_background(
    e: &Engine,
    queue: &'static str,
    kinds: Option<Vec<String>>,
    limit: i64,
    stop: &CancellationToken,
) -> tokio::task::JoinHandle<(Duration, Vec<i64>)> {
    let (e, stop) = (e.clone(), stop.clone());
    tokio::spawn(async move {
        let t0 = Instant::now();
        let got = e
            .claim(
                &Claim {
                    kinds,
                    ..Claim::new(queue, "w", limit).wait(Duration::from_secs(30))
                },
                &stop,
            )
            .await
            .unwrap();
        (t0.elapsed(), got.iter().map(|t| t.id).collect())
    })
}

async fn enqueue_to(e: &Engine, queue: &str, kinds: &[&str]) -> Vec<i64> {
    e.enqueue_many(
        kinds
            .iter()
            .map(|k| NewTask {
                queue: Some(queue.into()),
                ..NewTask::new(*k, json!(1))
            })
            .collect(),
    )
    .await
    .unwrap()
    .iter()
    .map(|t| t.id)
    .collect()
}

/// Issue 24 item 3: with the poll at 60 s, a task enqueued through one node reaches an idle
/// claimer on the other at once — by NOTIFY on PostgreSQL, by the nodes' UDP wake-ups
/// (`docket_engine::peers`) on SQLite and MySQL. The bound (5 s) is generous for a busy
/// machine and far below the poll. A datagram with a wrong key wakes nothing, and a peer whose
/// address is dead costs the enqueue nothing.
async fn peers_wake_idle_nodes(db: Db) {
    let stop = CancellationToken::new();
    let (engines, node2) = two_slow_nodes(&db, &stop).await;
    // A third node whose address is dead (nothing listens there) is among node 1's peers.
    let now = chrono::Utc::now();
    db.store
        .node_heartbeat(&docket_store::NodeRecord {
            name: "gone".into(),
            started_at: now,
            heartbeat_at: now,
            stopped_at: None,
            draining_at: None,
            version: "0".into(),
            info: json!({"wake": "127.0.0.1:9", "wake_key": "00"}),
        })
        .await
        .unwrap();
    maintenance::heartbeat(&engines[0], now).await.unwrap();
    let claimer = claim_in_background(&engines[1], "far", None, 1, &stop);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ids = enqueue_to(&engines[0], "far", &["k"]).await;
    let (took, got) = claimer.await.unwrap();
    assert_eq!(got, ids);
    assert!(took < Duration::from_secs(5), "picked up after {took:?}");
    // The longest queue name the API takes (256 characters, here 768 bytes) fits a datagram.
    let long: &'static str = Box::leak("ü€".repeat(128).into_boxed_str());
    let claimer = claim_in_background(&engines[1], long, None, 1, &stop);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ids = enqueue_to(&engines[0], long, &["k"]).await;
    let (took, got) = claimer.await.unwrap();
    assert_eq!(got, ids);
    assert!(took < Duration::from_secs(5), "picked up after {took:?}");

    if db.store.backend() != docket_store::Backend::Postgres {
        // A forged wake-up (wrong key) is refused: the claimer keeps waiting for its poll.
        let addr = engines[1].waker.peers().expect("peer wake on").info()["wake"]
            .as_str()
            .unwrap()
            .to_string();
        let mut claimer = claim_in_background(&engines[1], "forged", None, 1, &stop);
        tokio::time::sleep(Duration::from_millis(300)).await;
        // Put the task in through the store of node 2 without waking anyone.
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let quiet = enqueue_quietly(&db, "forged").await;
        sock.send_to(
            b"docket-wake 1 0123456789abcdef0123456789abcdef forged",
            &addr,
        )
        .unwrap();
        let r = tokio::time::timeout(Duration::from_secs(1), &mut claimer).await;
        assert!(r.is_err(), "a wrong key woke the claimer: {r:?}");
        // The right key (what node 1 sends) wakes it.
        engines[0].waker.wake("forged");
        let (took, got) = claimer.await.unwrap();
        assert_eq!(got, vec![quiet]);
        assert!(took < Duration::from_secs(6), "picked up after {took:?}");
    }
    stop.cancel();
    node2.close().await;
}

/// Inserts a task through a store of its own that no engine listens to: nobody hears of it.
async fn enqueue_quietly(db: &Db, queue: &str) -> i64 {
    let store = db._db.another_node().await;
    let now = chrono::Utc::now();
    let t = NewTask {
        queue: Some(queue.into()),
        ..NewTask::new("k", json!(1))
    }
    .resolve(None, &Default::default(), now)
    .unwrap();
    let id = store
        .task_insert_many(docket_store::TaskInsertManyParams {
            tasks: vec![t],
            now,
        })
        .await
        .unwrap()[0]
        .id;
    store.close().await;
    id
}

/// Issue 24: an insert wakes one idle claimer, not all of them (three claimers of two wait, one
/// task comes, and one claim looks again: the probe's marks of claims that had waited), yet no
/// task waits for a poll (60 s here): a claimer woken for a kind it does not take wakes the
/// others; one whose claim came back full wakes the next; three tasks enqueued at once reach
/// three claimers of one each.
async fn one_wake_finds_every_task(db: Db) {
    let stop = CancellationToken::new();
    let mut cfg = EngineConfig::new("n1", db.store.backend());
    cfg.poll_interval = Duration::from_secs(60);
    let probe = Arc::new(Probe::default());
    let e = Engine::new(db.store.clone(), Arc::new(SystemClock), cfg).with_probe(probe.clone());
    e.start(stop.clone()).await.unwrap();
    // One task wakes one of three idle claimers; that claim, not full, wakes no other.
    let single = CancellationToken::new();
    let idle: Vec<_> = (0..3)
        .map(|_| claim_in_background(&e, "single", None, 2, &single))
        .collect();
    let looked = |since: Instant, waited: i64| {
        probe
            .marks()
            .iter()
            .filter(|m| m.step == Step::ClaimStart && m.id == waited && m.at >= since)
            .count()
    };
    let t0 = Instant::now();
    while looked(t0 - Duration::from_secs(60), 0) < 3 {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the claimers did not start"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let enqueued = Instant::now();
    let ids = enqueue_to(&e, "single", &["k"]).await;
    while !idle.iter().any(|c| c.is_finished()) {
        assert!(enqueued.elapsed() < Duration::from_secs(5), "nobody woke");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Time for any other woken claimer to look.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        looked(enqueued, 1),
        1,
        "one insert woke more than one claimer"
    );
    single.cancel();
    let mut got = vec![];
    for c in idle {
        got.extend(c.await.unwrap().1);
    }
    assert_eq!(got, ids);
    // Kind filters: the claimer of `a` waits first, so it is the one woken for a `b` task.
    let a = claim_in_background(&e, "mixed", Some(vec!["a".into()]), 1, &stop);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let b = claim_in_background(&e, "mixed", Some(vec!["b".into()]), 1, &stop);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ids = enqueue_to(&e, "mixed", &["b"]).await;
    let (took, got) = b.await.unwrap();
    assert_eq!(got, ids);
    assert!(took < Duration::from_secs(5), "b picked up after {took:?}");
    let ids = enqueue_to(&e, "mixed", &["a"]).await;
    let (_, got) = a.await.unwrap();
    assert_eq!(got, ids);

    // Three at once, three claimers of one each.
    let claimers: Vec<_> = (0..3)
        .map(|_| claim_in_background(&e, "burst", None, 1, &stop))
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut ids = enqueue_to(&e, "burst", &["k", "k", "k"]).await;
    let mut got = vec![];
    for c in claimers {
        let (took, g) = c.await.unwrap();
        assert!(took < Duration::from_secs(5), "picked up after {took:?}");
        assert_eq!(g.len(), 1);
        got.extend(g);
    }
    got.sort();
    ids.sort();
    assert_eq!(got, ids);
    stop.cancel();
}

/// A queue's schedule_interval (asyncflow t_schedule_cfg) is how often its idle claims look at
/// the database: with the node's poll interval at 60 s, a task enqueued through another node is
/// found within the queue's 100 ms on SQLite and MySQL (no cross-process wake-up there), and a
/// queue without the setting is not found within a second. PostgreSQL's NOTIFY wakes at once
/// either way, so there only the pick-up is checked.
/// A schedule with `after_end` fires `every` after its last run's task finished, and nothing
/// while that task is unfinished (issue 21 item 12; node-daemons' worker sleeps after a run).
async fn schedule_after_end_waits_for_the_run(db: Db) {
    use docket_engine::schedule::fire_due;
    let t0 = chrono::Utc.with_ymd_and_hms(2030, 6, 1, 0, 0, 0).unwrap();
    let clock = ManualClock::new(t0);
    let e = engine(&db, Arc::new(clock.clone()));
    let spec: docket_core::ScheduleSpec = serde_json::from_value(json!({
        "name": "sleepy", "every": "60s", "after_end": true, "task": {"kind": "nap", "queue": "naps"},
    }))
    .unwrap();
    e.schedule_put(spec).await.unwrap();
    let fire = || fire_due(&e, clock.now());
    assert_eq!(fire().await.unwrap(), 1, "the first run at once");
    // 5 minutes on, the run is still unfinished: nothing fires, however long it takes.
    for _ in 0..5 {
        clock.advance(Duration::from_secs(60));
        assert_eq!(fire().await.unwrap(), 0);
    }
    let stop = tokio_util::sync::CancellationToken::new();
    let got = e.claim(&Claim::new("naps", "w", 1), &stop).await.unwrap();
    assert_eq!(got.len(), 1);
    clock.advance(Duration::from_secs(30));
    let ended = clock.now();
    e.complete_many(&[docket_store::TaskComplete {
        id: got[0].id,
        token: got[0].lease.as_ref().unwrap().token.clone(),
        result: json!(null),
        next: None,
    }])
    .await
    .unwrap();
    // 59 s after the end: not yet; the schedule waits for end + every.
    clock.advance(Duration::from_secs(59));
    assert_eq!(fire().await.unwrap(), 0);
    let s = db.store.schedule_get("sleepy").await.unwrap().unwrap();
    assert_eq!(
        s.next_run_at,
        docket_core::time::add(ended, Duration::from_secs(60)),
        "it waits for the end of the run plus every"
    );
    clock.advance(Duration::from_secs(1));
    assert_eq!(fire().await.unwrap(), 1, "every after the run ended");
    assert_eq!(fire().await.unwrap(), 0);
}

async fn schedule_interval_sets_the_poll(db: Db) {
    let node2 = db._db.another_node().await;
    let engines = [("n1", db.store.clone()), ("n2", node2.clone())].map(|(name, store)| {
        let mut cfg = EngineConfig::new(name, store.backend());
        cfg.poll_interval = Duration::from_secs(60);
        Engine::new(store, Arc::new(SystemClock), cfg)
    });
    engines[0]
        .queue_put(
            "t",
            "fast",
            &docket_core::QueueSettings {
                schedule_interval: Some(Duration::from_millis(100)),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let stop = CancellationToken::new();
    let claim = |queue: &'static str, wait: Duration| {
        let e = engines[1].clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let t0 = Instant::now();
            let got = e
                .claim(&Claim::new(queue, "w", 1).wait(wait), &stop)
                .await
                .unwrap();
            (t0.elapsed(), got.len())
        })
    };
    let fast = claim("fast", Duration::from_secs(20));
    let slow = claim("slow", Duration::from_secs(30));
    tokio::time::sleep(Duration::from_millis(300)).await;
    for q in ["fast", "slow"] {
        engines[0]
            .enqueue_many(vec![NewTask {
                queue: Some(q.into()),
                ..NewTask::new("k", json!(1))
            }])
            .await
            .unwrap();
    }
    let (took, n) = fast.await.unwrap();
    assert_eq!(n, 1);
    assert!(took < Duration::from_secs(5), "picked up after {took:?}");
    let slow = tokio::time::timeout(Duration::from_secs(2), slow).await;
    if db.store.backend() != docket_store::Backend::Postgres {
        assert!(
            slow.is_err(),
            "without schedule_interval the 60 s poll has not looked yet: {slow:?}"
        );
    }
    stop.cancel();
    node2.close().await;
}

/// Draining a node (issue 12 item 11): its pinned waiting tasks move to another node, it claims
/// nothing (a drain made through another node reaches it at its next heartbeat), and resuming
/// ends that.
async fn drain_moves_tasks_and_stops_claiming(db: Db) {
    let (engines, node2) = two_nodes(&db).await;
    let now = chrono::Utc::now();
    for e in &engines {
        maintenance::heartbeat(e, now).await.unwrap();
    }
    let pinned: Vec<NewTask> = (0..3)
        .map(|i| NewTask {
            node: Some("n2".into()),
            ..NewTask::new("k", json!(i))
        })
        .collect();
    engines[0].enqueue_many(pinned).await.unwrap();
    let stop = CancellationToken::new();
    assert_eq!(
        engines[0]
            .node_drain("op", "nobody", true, None)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        engines[0]
            .node_drain("op", "n2", true, Some("n1"))
            .await
            .unwrap(),
        Some(3)
    );
    assert!(!engines[1].is_draining(), "not told yet");
    maintenance::heartbeat(&engines[1], now).await.unwrap();
    assert!(engines[1].is_draining(), "its heartbeat reads the registry");
    let t0 = Instant::now();
    let none = engines[1]
        .claim(
            &Claim::new("default", "w", 10).wait(Duration::from_millis(300)),
            &stop,
        )
        .await
        .unwrap();
    assert!(none.is_empty() && t0.elapsed() >= Duration::from_millis(250));
    let got = engines[0]
        .claim(&Claim::new("default", "w", 10), &stop)
        .await
        .unwrap();
    assert_eq!(got.len(), 3, "moved to n1 and claimed there");
    let nodes = engines[0].node_list().await.unwrap();
    let n2 = nodes.iter().find(|n| n.name == "n2").unwrap();
    assert_eq!(engines[0].node_state(n2), "draining");
    assert_eq!(
        engines[1]
            .node_drain("op", "n2", false, None)
            .await
            .unwrap(),
        Some(0)
    );
    assert!(!engines[1].is_draining(), "resumed through itself: at once");
    let audit = engines[0].audit_list(10).await.unwrap();
    assert!(audit
        .iter()
        .any(|a| a.action == "node.drain" && a.target == "n2"));
    node2.close().await;
}

/// The maintenance job `rotate` turns the ring of task slots (PostgreSQL) at most once per
/// `rotate_interval` of the engine's clock and, while the slots fill slowly (under
/// `rotate_min_fill_bytes`, 8 MiB), once per `rotate_idle_interval` (60 s): a turn pauses claims
/// for a moment. A task the fourth turn finds still waiting moves to slot 0, claimable as
/// before. Elsewhere it does nothing.
async fn rotate_turns_the_ring_every_interval(db: Db) {
    let t0 = chrono::Utc.with_ymd_and_hms(2030, 6, 1, 0, 0, 0).unwrap();
    let clock = ManualClock::new(t0);
    let e = engine(&db, Arc::new(clock.clone()));
    let pg = db.store.backend() == docket_store::Backend::Postgres;
    let got = e
        .enqueue_many(vec![NewTask::new("waits", json!(1))])
        .await
        .unwrap();
    // The first call turns (the ring never turned on this clock); the next ones, a second
    // apart, find the slot being filled nearly empty: no turn, nothing moved.
    let mut moved = vec![];
    for _ in 0..4 {
        moved.push(maintenance::rotate(&e, clock.now()).await.unwrap());
        // Not due again before the interval has passed.
        assert_eq!(maintenance::rotate(&e, clock.now()).await.unwrap(), 0);
        clock.advance(Duration::from_secs(1));
    }
    assert_eq!(moved, vec![0; 4]);
    // A minute apart the ring turns anyway: the third of these turns is its fourth, which
    // empties the slot the task went into. (Turning every second, it would have moved above.)
    let mut moved = vec![];
    for _ in 0..3 {
        clock.advance(Duration::from_secs(60));
        moved.push(maintenance::rotate(&e, clock.now()).await.unwrap());
    }
    assert_eq!(moved, if pg { vec![0, 0, 1] } else { vec![0; 3] });
    let never = CancellationToken::new();
    let c = e
        .claim(&Claim::new("default", "w", 5), &never)
        .await
        .unwrap();
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].id, got[0].id);
}

macro_rules! both {
    ($($name:ident),* $(,)?) => {
        mod pg { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name(super::pg().await).await; } )* }
        mod sqlite { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name(super::sqlite().await).await; } )* }
        mod mysql { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name(super::mysql().await).await; } )* }
    };
}

both!(
    pool_leaves_unknown_kinds_waiting,
    pool_survives_panics_and_enforces_timeouts,
    pool_runs_handlers,
    concurrency_key_holds_in_pool,
    shutdown_finishes_claimed_work,
    maintenance_with_manual_clock,
    schedules_fire_each_occurrence_once,
    schedule_after_end_waits_for_the_run,
    token_last_use_is_written_once_a_minute,
    engine_fail_rule_decides,
    two_nodes_claim_each_task_once,
    unique_enqueues_on_two_nodes,
    debounce_on_two_nodes,
    worker_labels_on_two_nodes,
    limits_hold_across_nodes,
    other_nodes_find_work,
    schedule_interval_sets_the_poll,
    peers_wake_idle_nodes,
    one_wake_finds_every_task,
    drain_moves_tasks_and_stops_claiming,
    rotate_turns_the_ring_every_interval,
);
