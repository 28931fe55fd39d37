//! progressor's scenarios against a real HTTP processor (examples/processor.py), on both
//! backends. Timers use short delays with generous deadlines.

use docket_core::process::{HistoryRange, NamespaceConfig, ProcessStatus, RetryPolicy};
use docket_core::{SystemClock, TaskState};
use docket_engine::process::{ProcessError, ProcessService, Request};
use docket_engine::{Engine, EngineConfig};
use docket_store::testing::TestStore;
use docket_store::{Store, TaskListParams};
use serde_json::{json, Value};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

struct Env {
    svc: ProcessService,
    gates: Arc<Gates>,
    store: Arc<dyn Store>,
    url: String,
    stop: CancellationToken,
    processor: Child,
    _db: TestStore,
}

impl Drop for Env {
    fn drop(&mut self) {
        self.stop.cancel();
        let _ = self.processor.kill();
        let _ = self.processor.wait();
    }
}

fn processor() -> (Child, String) {
    let (child, port) = spawn_processor();
    (child, format!("http://127.0.0.1:{port}/"))
}

use docket_store::testing::spawn_example_processor as spawn_processor;

/// A database of its own on `backend` (`pg`, `mysql`, else SQLite).
async fn test_store(backend: &str) -> TestStore {
    match backend {
        "pg" => TestStore::postgres().await,
        "mysql" => TestStore::mysql().await,
        _ => TestStore::sqlite().await,
    }
}

async fn env(backend: &str) -> Env {
    let db = test_store(backend).await;
    let store = db.store.clone();
    let mut cfg = EngineConfig::new("p1", store.backend());
    cfg.rescue_interval = Duration::from_millis(100);
    let engine = Engine::new(store.clone(), Arc::new(SystemClock), cfg);
    let stop = CancellationToken::new();
    engine.start(stop.clone()).await.unwrap();
    let svc = ProcessService::new(engine, stop.clone());
    svc.start().await.unwrap();
    let (child, url) = processor();
    let gates = Arc::new(Gates::default());
    svc.register_processor("scripted", Arc::new(Scripted(gates.clone())));
    let e = Env {
        svc,
        gates,
        store,
        url,
        stop,
        processor: child,
        _db: db,
    };
    e.ns("ns", RetryPolicy::default()).await;
    e
}

/// Steps a test holds open: a step whose script says `"gate": NAME` tells [`Gates::entered`]
/// it is running, then waits for [`Gates::release`]. Tests order what they check by these
/// events instead of by sleeps against windows (issue 21 item 24).
#[derive(Default)]
struct Gates {
    /// Per process id: processor calls in progress now, and the most at once so far.
    active: std::sync::Mutex<std::collections::HashMap<String, (usize, usize)>>,
    entered: std::sync::Mutex<std::collections::HashSet<String>>,
    changed: tokio::sync::Notify,
    open: std::sync::Mutex<std::collections::HashMap<String, Arc<tokio::sync::Semaphore>>>,
}

impl Gates {
    fn gate(&self, name: &str) -> Arc<tokio::sync::Semaphore> {
        self.open
            .lock()
            .unwrap()
            .entry(name.to_string())
            .or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(0)))
            .clone()
    }

    async fn pass(&self, name: &str) {
        self.entered.lock().unwrap().insert(name.to_string());
        self.changed.notify_waiters();
        self.gate(name).acquire().await.unwrap().forget();
    }

    /// Waits (up to 20 s) until a step reached gate `name`.
    async fn entered(&self, name: &str) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let n = self.changed.notified();
            if self.entered.lock().unwrap().contains(name) {
                return;
            }
            tokio::select! {
                _ = n => {}
                _ = tokio::time::sleep_until(deadline) => panic!("no step reached gate {name}"),
            }
        }
    }

    fn release(&self, name: &str) {
        self.gate(name).add_permits(1);
    }

    fn enter(&self, process: &str) {
        let mut a = self.active.lock().unwrap();
        let e = a.entry(process.to_string()).or_default();
        e.0 += 1;
        e.1 = e.1.max(e.0);
    }

    fn leave(&self, process: &str) {
        if let Some(e) = self.active.lock().unwrap().get_mut(process) {
            e.0 -= 1;
        }
    }

    /// The most processor calls for `process` that were ever in progress at once.
    fn most_at_once(&self, process: &str) -> usize {
        self.active.lock().unwrap().get(process).map_or(0, |e| e.1)
    }
}

/// examples/processor.py's script, in process (namespace `g`, processor `inproc:scripted`),
/// plus `"gate": NAME`.
struct Scripted(Arc<Gates>);

#[async_trait::async_trait]
impl docket_engine::process::Processor for Scripted {
    async fn process(
        &self,
        req: docket_core::process::ProcessorRequest,
    ) -> docket_core::process::ProcessorReply {
        self.0.enter(&req.process.id);
        let reply = self.script(req).await;
        self.0.leave(&reply.0);
        reply.1
    }
}

impl Scripted {
    async fn script(
        &self,
        req: docket_core::process::ProcessorRequest,
    ) -> (String, docket_core::process::ProcessorReply) {
        use docket_core::process::ProcessorReply;
        let id = req.process.id.clone();
        let mut aux = req.process.aux_state.clone();
        let step = if req.task_type == "timeout" {
            let steps = aux["timeouts"].as_array().cloned().unwrap_or_default();
            aux["timeouts"] = json!(steps.iter().skip(1).cloned().collect::<Vec<_>>());
            steps.first().cloned().unwrap_or(json!({}))
        } else {
            if let Some(a) = req.args.get("aux_state") {
                aux = a.clone();
            }
            req.args.clone()
        };
        if let Some(g) = step["gate"].as_str() {
            self.0.pass(g).await;
        }
        let events: Vec<Value> = step["events"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|p| json!({"payload": p, "metadata": {"by": req.task_type}}))
            .collect();
        let mut out = json!({"events": events, "aux_state": aux, "response": "ok"});
        if let Some(t) = step.get("timer") {
            out["action"] = json!({"timeout": t});
        }
        (
            id,
            ProcessorReply::Ok(serde_json::from_value(out).expect("a processor result")),
        )
    }
}

impl Env {
    /// Namespace `g` on the in-process scripted processor (see [`Scripted`]).
    async fn gated(&self) {
        let cfg: NamespaceConfig =
            serde_json::from_value(json!({"processor": {"url": "inproc:scripted"}})).unwrap();
        self.svc.namespace_put("g", cfg).await.unwrap();
    }

    async fn g_request(&self, kind: &str, id: &str, args: Value) -> Result<Value, ProcessError> {
        let req = Request {
            args,
            ..Default::default()
        };
        match kind {
            "init" => self.svc.init("g", id, req).await,
            _ => self.svc.call("g", id, req).await,
        }
    }

    /// Events of process `id` of namespace `g` once there are at least `n`.
    async fn g_events(&self, id: &str, n: usize) -> Vec<docket_core::process::Event> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (_, ev) = self
                .svc
                .get("g", id, HistoryRange::default())
                .await
                .unwrap();
            if ev.len() >= n {
                return ev;
            }
            assert!(Instant::now() < deadline, "only {ev:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Tasks of namespace `g` of `kind`, once there are at least `n`.
    async fn g_tasks(&self, kind: &str, n: usize) -> Vec<docket_core::Task> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let t = self
                .store
                .task_list(TaskListParams {
                    queue: Some("process:g".into()),
                    kind: Some(kind.into()),
                    limit: 1000,
                    ..Default::default()
                })
                .await
                .unwrap();
            if t.len() >= n {
                return t;
            }
            assert!(Instant::now() < deadline, "only {t:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn payloads_of(ev: &[docket_core::process::Event]) -> Vec<Value> {
    ev.iter().map(|e| e.payload.clone()).collect()
}

impl Env {
    async fn ns(&self, name: &str, retry_policy: RetryPolicy) {
        let cfg: NamespaceConfig =
            serde_json::from_value(json!({"processor": {"url": self.url}})).unwrap();
        self.svc
            .namespace_put(
                name,
                NamespaceConfig {
                    retry_policy,
                    ..cfg
                },
            )
            .await
            .unwrap();
    }

    async fn init(&self, id: &str, args: Value) -> Result<Value, ProcessError> {
        self.svc
            .init(
                "ns",
                id,
                Request {
                    args,
                    ..Default::default()
                },
            )
            .await
    }

    async fn call(&self, id: &str, args: Value) -> Result<Value, ProcessError> {
        self.svc
            .call(
                "ns",
                id,
                Request {
                    args,
                    ..Default::default()
                },
            )
            .await
    }

    async fn payloads(&self, id: &str) -> Vec<Value> {
        let (_, ev) = self
            .svc
            .get("ns", id, HistoryRange::default())
            .await
            .unwrap();
        let ids: Vec<i64> = ev.iter().map(|e| e.event_id).collect();
        assert_eq!(
            ids,
            (1..=ids.len() as i64).collect::<Vec<_>>(),
            "event ids are 1, 2, 3…"
        );
        ev.into_iter().map(|e| e.payload).collect()
    }

    async fn wait_events(&self, id: &str, n: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let p = self.payloads(id).await;
            if p.len() >= n {
                return p;
            }
            assert!(Instant::now() < deadline, "only {p:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn wait_status(&self, id: &str, st: ProcessStatus) -> docket_core::process::Process {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (p, _) = self
                .svc
                .get("ns", id, HistoryRange::default())
                .await
                .unwrap();
            if p.status == st {
                return p;
            }
            assert!(Instant::now() < deadline, "status {:?}", p.status);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn tasks(&self, kind: &str) -> Vec<docket_core::Task> {
        self.store
            .task_list(TaskListParams {
                queue: Some("process:ns".into()),
                kind: Some(kind.into()),
                limit: 1000,
                ..Default::default()
            })
            .await
            .unwrap()
    }
}

async fn timers_chained_from_init(e: Env) {
    let r = e
        .init(
            "p1",
            json!({"events": ["init"], "timer": "1s", "response": "started",
            "aux_state": {"timeouts": [{"events": ["t1"], "timer": "0s"}, {"events": ["t2"]}]}}),
        )
        .await
        .unwrap();
    assert_eq!(r, json!("started"));
    assert_eq!(e.payloads("p1").await, vec![json!("init")]);
    assert_eq!(
        e.wait_events("p1", 3).await,
        vec![json!("init"), json!("t1"), json!("t2")]
    );
    let (p, _) = e
        .svc
        .get("ns", "p1", HistoryRange::default())
        .await
        .unwrap();
    assert_eq!(p.status, ProcessStatus::Running);
    assert_eq!(p.last_event_id, 3);
    assert_eq!(
        e.init("p1", json!({})).await.unwrap_err().to_string(),
        "process exists"
    );
}

async fn call_blocks_due_timer(e: Env) {
    e.gated().await;
    e.g_request("init", "p", json!({"events": ["init"], "timer": "2s", "aux_state": {"timeouts": [{"events": ["timer"]}]}}))
        .await
        .unwrap();
    let timer = e.g_tasks("timeout", 1).await.remove(0);
    // A call holds the process past the timer's due time: the timer waits for it.
    let svc = e.svc.clone();
    let call = tokio::spawn(async move {
        svc.call(
            "g",
            "p",
            Request {
                args: json!({"events": ["call"], "gate": "call"}),
                ..Default::default()
            },
        )
        .await
    });
    e.gates.entered("call").await;
    let due = (timer.run_at - chrono::Utc::now())
        .to_std()
        .unwrap_or_default();
    tokio::time::sleep(due + Duration::from_millis(500)).await;
    assert_eq!(
        payloads_of(&e.g_events("p", 1).await),
        vec![json!("init")],
        "the due timer waits while the call runs"
    );
    e.gates.release("call");
    call.await.unwrap().unwrap();
    assert_eq!(
        payloads_of(&e.g_events("p", 3).await),
        vec![json!("init"), json!("call"), json!("timer")]
    );
    // A short call leaves a future timer to fire at its time, not before.
    e.g_request("call", "p", json!({"events": ["c2"], "timer": "1s", "aux_state": {"timeouts": [{"events": ["later"]}]}}))
        .await
        .unwrap();
    let later = e
        .g_tasks("timeout", 2)
        .await
        .into_iter()
        .max_by_key(|t| t.id)
        .unwrap();
    e.g_request("call", "p", json!({"events": ["c3"]}))
        .await
        .unwrap();
    let ev = e.g_events("p", 6).await;
    assert_eq!(
        payloads_of(&ev),
        vec![
            json!("init"),
            json!("call"),
            json!("timer"),
            json!("c2"),
            json!("c3"),
            json!("later")
        ]
    );
    assert!(
        ev[5].timestamp >= later.run_at,
        "fired at {}, due at {}",
        ev[5].timestamp,
        later.run_at
    );
}

async fn ten_concurrent_calls_run_one_by_one(e: Env) {
    e.gated().await;
    e.g_request("init", "p", json!({})).await.unwrap();
    // A call holds the process; ten calls arrive meanwhile and queue behind it.
    let svc = e.svc.clone();
    let busy = tokio::spawn(async move {
        svc.call(
            "g",
            "p",
            Request {
                args: json!({"events": ["busy"], "gate": "busy"}),
                ..Default::default()
            },
        )
        .await
    });
    e.gates.entered("busy").await;
    let mut hs = vec![];
    for i in 0..10 {
        let svc = e.svc.clone();
        hs.push(tokio::spawn(async move {
            svc.call(
                "g",
                "p",
                Request {
                    args: json!({"events": [i]}),
                    ..Default::default()
                },
            )
            .await
        }));
    }
    e.g_tasks("call", 11).await;
    e.gates.release("busy");
    busy.await.unwrap().unwrap();
    for h in hs {
        h.await.unwrap().unwrap();
    }
    let got = payloads_of(&e.g_events("p", 11).await);
    assert_eq!(got.len(), 11);
    assert_eq!(got[0], json!("busy"));
    // FIFO: the queued calls ran one at a time in arrival order (run_at, then id).
    let mut calls = e.g_tasks("call", 11).await;
    calls.sort_by_key(|t| (t.run_at, t.id));
    let queued: Vec<Value> = calls
        .iter()
        .map(|t| t.payload["args"]["events"][0].clone())
        .collect();
    assert_eq!(got, queued);
    // Never two at once, as the processor saw it. (Not from the tasks' attempted_at and
    // finished_at: each is the `now` its claim or completion took before its statement ran, so
    // a claim that waited on a busy machine can carry a time from before the previous step's
    // finish although it ran after that step's commit.)
    assert_eq!(e.gates.most_at_once("p"), 1);
    assert!(calls.iter().all(|t| t.state == TaskState::Completed));
}

async fn processor_sees_requested_history_range(e: Env) {
    e.init("p", json!({"events": [1, 2, 3, 4, 5]}))
        .await
        .unwrap();
    let r = e
        .svc
        .call(
            "ns",
            "p",
            Request {
                args: json!({}),
                range: HistoryRange {
                    offset: Some(1),
                    limit: Some(2),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(r, json!({"history": [2, 3], "last_event_id": 5}));
    let back = HistoryRange {
        limit: Some(2),
        direction: docket_core::process::Direction::Backward,
        ..Default::default()
    };
    let r = e
        .svc
        .call(
            "ns",
            "p",
            Request {
                args: json!({}),
                range: back,
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(r, json!({"history": [5, 4], "last_event_id": 5}));
    let (_, ev) = e
        .svc
        .get(
            "ns",
            "p",
            HistoryRange {
                offset: Some(3),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        ev.iter().map(|e| e.event_id).collect::<Vec<_>>(),
        vec![4, 5]
    );
}

async fn failing_call_breaks_and_repair_fixes(e: Env) {
    e.init(
        "p",
        json!({"timer": "1h", "aux_state": {"timeouts": [{"events": ["never"]}]}}),
    )
    .await
    .unwrap();
    let err = e.call("p", json!({"error": "boom"})).await.unwrap_err();
    assert!(
        matches!(&err, ProcessError::Processor(v) if v == "boom"),
        "{err:?}"
    );
    let p = e.wait_status("p", ProcessStatus::Error).await;
    assert_eq!(p.detail.as_deref(), Some("boom"));
    assert_eq!(p.previous_status, Some(ProcessStatus::Running));
    // progressor's error_and_stop (init/call/repair) breaks the process with corrupted_by
    // undefined; only a timer that will not be retried names itself (error_and_retry; see
    // timer_retries_then_repair_reruns_it). Issue 21 item 15, checked against
    // valitydev/progressor src/prg_worker.erl.
    assert_eq!(
        p.corrupted_by, None,
        "a failed call is not corrupted_by: {p:?}"
    );
    let timers = e.tasks("timeout").await;
    assert_eq!(
        timers[0].state,
        TaskState::Cancelled,
        "waiting timers are cancelled"
    );
    let err = e.call("p", json!({})).await.unwrap_err();
    assert!(
        matches!(&err, ProcessError::NotRunning(m) if m == "process is error"),
        "{err:?}"
    );
    assert!(matches!(
        e.call("nope", json!({})).await.unwrap_err(),
        ProcessError::NotFound
    ));
    // A failing repair keeps the detail; a good one updates metadata and runs the process again.
    let err = e
        .svc
        .repair(
            "ns",
            "p",
            Request {
                args: json!({"error": "still"}),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(&err, ProcessError::Processor(v) if v == "still"));
    let (p, _) = e.svc.get("ns", "p", HistoryRange::default()).await.unwrap();
    assert_eq!(
        (p.status, p.detail.as_deref()),
        (ProcessStatus::Error, Some("boom"))
    );
    e.svc
        .repair(
            "ns",
            "p",
            Request {
                args: json!({"metadata": {"fixed": true}}),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let (p, _) = e.svc.get("ns", "p", HistoryRange::default()).await.unwrap();
    assert_eq!(p.status, ProcessStatus::Running);
    assert_eq!(p.metadata, json!({"fixed": true}));
    assert_eq!(p.detail, None);
    let err = e
        .svc
        .repair("ns", "p", Request::default())
        .await
        .unwrap_err();
    assert!(matches!(err, ProcessError::IsRunning(_)));
    // A malformed timer action is a processor error: nothing of that result is kept.
    let bad = json!({"events": ["lost"], "action": {"set_timer": "2030-01-01T00:00:00Z", "timeout": "1s"}});
    let err = e.call("p", bad).await.unwrap_err();
    assert!(
        matches!(&err, ProcessError::Processor(v) if v.as_str().unwrap().contains("both set_timer and timeout")),
        "{err:?}"
    );
    assert!(!e.payloads("p").await.contains(&json!("lost")));
    e.svc.simple_repair("ns", "p").await.unwrap();
    // A failing init puts the new process in error.
    assert!(e.init("q", json!({"error": {"code": 42}})).await.is_err());
    assert_eq!(
        e.wait_status("q", ProcessStatus::Error)
            .await
            .detail
            .as_deref(),
        Some(r#"{"code":42}"#)
    );
}

async fn timer_retries_then_repair_reruns_it(e: Env) {
    e.ns(
        "ns",
        RetryPolicy {
            initial_timeout: Duration::from_millis(100),
            max_attempts: 3,
            non_retryable_errors: vec!["fatal".into()],
            ..Default::default()
        },
    )
    .await;
    // Retryable: tried exactly max_attempts times, then the process breaks, corrupted_by set.
    e.init(
        "r",
        json!({"timer": "0s", "aux_state": {"timeouts": [{"error": "flaky"}]}}),
    )
    .await
    .unwrap();
    let p = e.wait_status("r", ProcessStatus::Error).await;
    let timer = e
        .store
        .task_get(p.corrupted_by.expect("corrupted_by"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (timer.kind.as_str(), timer.attempt, timer.state),
        ("timeout", 3, TaskState::Discarded)
    );
    assert_eq!(timer.errors.len(), 3);
    // Non-retryable: one attempt; a repair that fixes the state re-runs the timer.
    e.init(
        "n",
        json!({"timer": "0s", "aux_state": {"timeouts": [{"error": "fatal: no"}]}}),
    )
    .await
    .unwrap();
    let p = e.wait_status("n", ProcessStatus::Error).await;
    let bad = e
        .store
        .task_get(p.corrupted_by.unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(bad.attempt, 1);
    e.svc
        .repair(
            "ns",
            "n",
            Request {
                args: json!({"aux_state": {"timeouts": [{"events": ["fixed"]}]}}),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(e.wait_events("n", 1).await, vec![json!("fixed")]);
}

async fn idempotency_and_timers(e: Env) {
    e.init("p", json!({})).await.unwrap();
    let req = || Request {
        args: json!({"events": ["once"], "response": "first"}),
        idempotency_key: Some("k1".into()),
        ..Default::default()
    };
    assert_eq!(e.svc.call("ns", "p", req()).await.unwrap(), json!("first"));
    assert_eq!(e.svc.call("ns", "p", req()).await.unwrap(), json!("first"));
    assert_eq!(e.payloads("p").await, vec![json!("once")], "ran once");
    // unset_timer stops a timer; a call replaces a remove timer with a timeout.
    e.call(
        "p",
        json!({"timer": "300ms", "aux_state": {"timeouts": [{"events": ["should not"]}]}}),
    )
    .await
    .unwrap();
    e.call("p", json!({"unset_timer": true})).await.unwrap();
    e.call("p", json!({"remove_timer": "300ms"})).await.unwrap();
    e.call(
        "p",
        json!({"timer": "300ms", "aux_state": {"timeouts": [{"events": ["timeout"]}]}}),
    )
    .await
    .unwrap();
    assert_eq!(
        e.wait_events("p", 2).await,
        vec![json!("once"), json!("timeout")]
    );
    let removes = e.tasks("remove").await;
    assert_eq!(removes[0].state, TaskState::Cancelled);
    let timeouts = e.tasks("timeout").await;
    assert_eq!(
        timeouts.iter().map(|t| t.state).collect::<Vec<_>>(),
        vec![TaskState::Cancelled, TaskState::Completed]
    );
}

async fn remove_by_timer(e: Env) {
    e.init("gone", json!({"events": ["x"], "remove_timer": "300ms"}))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while e
        .svc
        .get("ns", "gone", HistoryRange::default())
        .await
        .is_ok()
    {
        assert!(Instant::now() < deadline, "not removed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let left = e
        .store
        .task_list(TaskListParams {
            concurrency_key: Some("ns:gone".into()),
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(
        left.is_empty(),
        "no task is left under the process: {left:?}"
    );
    // Without a time: `{"remove": true}` removes the process at once, and init still answers
    // (the remove may commit before the caller reads init's task back: the finished task stays).
    for i in 0..5 {
        e.init(
            &format!("now{i}"),
            json!({"events": ["y"], "action": {"remove": true}}),
        )
        .await
        .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while e
        .svc
        .get("ns", "now4", HistoryRange::default())
        .await
        .is_ok()
    {
        assert!(Instant::now() < deadline, "not removed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn put_imports_a_process(e: Env) {
    use docket_core::process::ProcessImportSpec;
    let spec: ProcessImportSpec = serde_json::from_value(json!({
        "history": [{"payload": "old-1"}, {"payload": "old-2", "metadata": {"src": "legacy"}}],
        "aux_state": {"timeouts": [{"events": ["after import"]}]},
        "metadata": {"migrated": true},
        "timer": {"timeout": "300ms"}
    }))
    .unwrap();
    let p = e.svc.put("ns", "imp", spec.clone()).await.unwrap();
    assert_eq!((p.status, p.last_event_id), (ProcessStatus::Running, 2));
    assert!(matches!(
        e.svc.put("ns", "imp", spec).await,
        Err(ProcessError::Exists)
    ));
    assert_eq!(
        e.wait_events("imp", 3).await,
        vec![json!("old-1"), json!("old-2"), json!("after import")]
    );
    // Without a timer: nothing runs until called.
    let plain: ProcessImportSpec =
        serde_json::from_value(json!({"history": [{"payload": 1}]})).unwrap();
    e.svc.put("ns", "plain", plain).await.unwrap();
    e.call("plain", json!({"events": [2]})).await.unwrap();
    assert_eq!(e.payloads("plain").await, vec![json!(1), json!(2)]);
    assert!(e
        .tasks("timeout")
        .await
        .iter()
        .all(|t| t.payload["process_id"] != "plain"));
}

async fn slow_processor_times_out(e: Env) {
    let cfg: NamespaceConfig =
        serde_json::from_value(json!({"processor": {"url": e.url}, "process_step_timeout": "1s"}))
            .unwrap();
    e.svc.namespace_put("slow", cfg).await.unwrap();
    let t = Instant::now();
    let err = e
        .svc
        .init(
            "slow",
            "s1",
            Request {
                args: json!({"sleep": 3}),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ProcessError::Timeout), "{err:?}");
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "answered at the step timeout, not when the processor did"
    );
}

async fn webhook_gets_every_notification_in_order(e: Env) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("hook.jsonl");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/webhook_sink.py"
    );
    // The sink refuses its first 2 requests: docket must retry, in order, losing nothing.
    let sink = Command::new("python3")
        .arg(script)
        .arg(port.to_string())
        .arg(&out)
        .arg("2")
        .spawn()
        .unwrap();
    let _sink = Killed(sink);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let cfg: NamespaceConfig = serde_json::from_value(json!({
        "processor": {"url": e.url},
        "webhook": {"url": format!("http://127.0.0.1:{port}/")}
    }))
    .unwrap();
    e.svc.namespace_put("hooked", cfg).await.unwrap();
    let req = |args: Value| Request {
        args,
        ..Default::default()
    };
    e.svc
        .init("hooked", "h1", req(json!({"events": ["a"]})))
        .await
        .unwrap();
    e.svc
        .call("hooked", "h1", req(json!({"events": ["b", "c"]})))
        .await
        .unwrap();
    let _ = e.svc.call("hooked", "h1", req(json!({"error": "x"}))).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let got: Vec<Value> = loop {
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        let v: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if v.len() >= 5 {
            break v;
        }
        assert!(Instant::now() < deadline, "webhook got only {v:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let kinds: Vec<&str> = got.iter().map(|n| n["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, vec!["created", "event", "event", "event", "failed"]);
    let payloads: Vec<&Value> = got
        .iter()
        .filter(|n| n["kind"] == "event")
        .map(|n| &n["data"]["payload"])
        .collect();
    assert_eq!(payloads, vec![&json!("a"), &json!("b"), &json!("c")]);
    let seqs: Vec<i64> = got.iter().map(|n| n["seq"].as_i64().unwrap()).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "in order, no duplicates: {seqs:?}"
    );
}

async fn call_during_running_timeout_runs_before_next_timer(e: Env) {
    e.gated().await;
    let steps = json!([{"events": ["t1"], "gate": "t1", "timer": "0s"}, {"events": ["t2"]}]);
    e.g_request(
        "init",
        "p",
        json!({"timer": "0s", "aux_state": {"timeouts": steps}}),
    )
    .await
    .unwrap();
    // t1 is running; the call arrives meanwhile and is queued; t1 ends and sets the next timer.
    e.gates.entered("t1").await;
    let svc = e.svc.clone();
    let call = tokio::spawn(async move {
        svc.call(
            "g",
            "p",
            Request {
                args: json!({"events": ["call"]}),
                ..Default::default()
            },
        )
        .await
    });
    e.g_tasks("call", 1).await;
    e.gates.release("t1");
    call.await.unwrap().unwrap();
    assert_eq!(
        payloads_of(&e.g_events("p", 3).await),
        vec![json!("t1"), json!("call"), json!("t2")]
    );
}

struct Echo;

#[async_trait::async_trait]
impl docket_engine::process::Processor for Echo {
    async fn process(
        &self,
        req: docket_core::process::ProcessorRequest,
    ) -> docket_core::process::ProcessorReply {
        use docket_core::process::{NewEvent, ProcessorReply, ProcessorResult};
        if req.args.get("fail").is_some() {
            return ProcessorReply::Error(json!("rust says no"));
        }
        ProcessorReply::Ok(ProcessorResult {
            events: vec![NewEvent {
                payload: json!({"task": req.task_type, "args": req.args}),
                metadata: json!({}),
            }],
            aux_state: Some(json!({"seen": req.process.last_event_id + 1})),
            metadata: None,
            response: json!(format!("{} handled in-process", req.task_type)),
            action: None,
        })
    }
}

async fn in_process_rust_processor(e: Env) {
    e.svc.register_processor("echo", Arc::new(Echo));
    let cfg: NamespaceConfig =
        serde_json::from_value(json!({"processor": {"url": "inproc:echo"}})).unwrap();
    e.svc.namespace_put("rust", cfg).await.unwrap();
    let req = |args: Value| Request {
        args,
        ..Default::default()
    };
    assert_eq!(
        e.svc
            .init("rust", "r1", req(json!({"n": 1})))
            .await
            .unwrap(),
        json!("init handled in-process")
    );
    assert_eq!(
        e.svc
            .call("rust", "r1", req(json!({"n": 2})))
            .await
            .unwrap(),
        json!("call handled in-process")
    );
    let err = e
        .svc
        .call("rust", "r1", req(json!({"fail": true})))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ProcessError::Processor(v) if v == "rust says no"),
        "{err:?}"
    );
    let (p, ev) = e
        .svc
        .get("rust", "r1", HistoryRange::default())
        .await
        .unwrap();
    assert_eq!(ev.len(), 2);
    assert_eq!(ev[1].payload, json!({"task": "call", "args": {"n": 2}}));
    assert_eq!(
        (p.status, p.aux_state.clone()),
        (ProcessStatus::Error, json!({"seen": 2}))
    );
    // A namespace naming an unregistered processor fails its steps with a clear error.
    let cfg: NamespaceConfig =
        serde_json::from_value(json!({"processor": {"url": "inproc:nobody"}})).unwrap();
    e.svc.namespace_put("ghost", cfg).await.unwrap();
    let err = e.svc.init("ghost", "g", req(json!({}))).await.unwrap_err();
    let ok = matches!(&err, ProcessError::Processor(v) if v.as_str().unwrap_or("").contains("no in-process processor"));
    assert!(ok, "{err:?}");
}

async fn max_timeout_stops_timer_retries(e: Env) {
    // 100 ms, then ×2 = 200 ms ≥ max_timeout 150 ms: progressor stops after the second attempt.
    e.ns(
        "ns",
        RetryPolicy {
            initial_timeout: Duration::from_millis(100),
            backoff_coefficient: 2.0,
            max_timeout: Some(Duration::from_millis(150)),
            max_attempts: 10,
            ..Default::default()
        },
    )
    .await;
    e.init(
        "m",
        json!({"timer": "0s", "aux_state": {"timeouts": [{"error": "down"}]}}),
    )
    .await
    .unwrap();
    let p = e.wait_status("m", ProcessStatus::Error).await;
    let timer = e
        .store
        .task_get(p.corrupted_by.unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(timer.attempt, 2, "{:?}", timer.errors);
}

async fn idempotent_repeat_waits_for_the_running_request(e: Env) {
    e.init("p", json!({})).await.unwrap();
    let req = || Request {
        args: json!({"events": ["slow"], "sleep": 1, "response": "done"}),
        idempotency_key: Some("k".into()),
        ..Default::default()
    };
    let svc = e.svc.clone();
    let first = tokio::spawn(async move { svc.call("ns", "p", req()).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The same key while the first still runs: waits for it and answers the same.
    assert_eq!(e.svc.call("ns", "p", req()).await.unwrap(), json!("done"));
    assert_eq!(first.await.unwrap().unwrap(), json!("done"));
    assert_eq!(e.payloads("p").await, vec![json!("slow")], "ran once");
}

/// A child killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// worker_pool_size (progressor): with no free worker on the node, a task of the namespace
/// stays waiting until one is free (issue 21 item 14).
async fn worker_pool_size_bounds_running_steps(e: Env) {
    let cfg: NamespaceConfig = serde_json::from_value(
        json!({"processor": {"url": "inproc:scripted"}, "worker_pool_size": 1}),
    )
    .unwrap();
    e.svc.namespace_put("one", cfg).await.unwrap();
    let req = |args: Value| Request {
        args,
        ..Default::default()
    };
    let svc = e.svc.clone();
    let first = tokio::spawn(async move { svc.init("one", "a", req(json!({"gate": "a"}))).await });
    e.gates.entered("a").await;
    let svc = e.svc.clone();
    let second = tokio::spawn(async move { svc.init("one", "b", req(json!({}))).await });
    let list = || async {
        e.store
            .task_list(TaskListParams {
                queue: Some("process:one".into()),
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while list().await.len() < 2 {
        assert!(Instant::now() < deadline, "b's init was not enqueued");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The one worker is held by a's init: b's waits, however long a takes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let tasks = list().await;
    let b = tasks
        .iter()
        .find(|t| t.process.as_ref().is_some_and(|p| p.id == "b"))
        .unwrap();
    assert_eq!(b.state, TaskState::Available, "no free worker: {b:?}");
    e.gates.release("a");
    first.await.unwrap().unwrap();
    second.await.unwrap().unwrap();
    let tasks = list().await;
    let (a, b) = (
        tasks
            .iter()
            .find(|t| t.process.as_ref().is_some_and(|p| p.id == "a"))
            .unwrap(),
        tasks
            .iter()
            .find(|t| t.process.as_ref().is_some_and(|p| p.id == "b"))
            .unwrap(),
    );
    assert!(
        b.attempted_at.unwrap() >= a.finished_at.unwrap(),
        "b ran only once a's worker was free: {a:?} {b:?}"
    );
}

/// call_scan_timeout (progressor's call scan): a node whose runner no wake-up reaches still
/// takes a call enqueued through another node within that bound, whatever its poll_interval
/// (issue 21 item 13). Node b is drained (its runner claims nothing); node a's poll_interval
/// is 60 s, and nothing wakes it on MySQL or SQLite (PostgreSQL's notification does).
async fn call_scan_timeout_bounds_an_unannounced_call(backend: &str) {
    let db = test_store(backend).await;
    let stop = CancellationToken::new();
    let engine = |store: Arc<dyn Store>, name: &str| {
        let mut cfg = EngineConfig::new(name, store.backend());
        cfg.poll_interval = Duration::from_secs(60);
        Engine::new(store, Arc::new(SystemClock), cfg)
    };
    let a = engine(db.store.clone(), "a");
    a.start(stop.clone()).await.unwrap();
    let runner = ProcessService::new(a, stop.clone());
    runner.register_processor("scripted", Arc::new(Scripted(Arc::default())));
    runner.start().await.unwrap();
    let cfg: NamespaceConfig = serde_json::from_value(
        json!({"processor": {"url": "inproc:scripted"}, "call_scan_timeout": "200ms"}),
    )
    .unwrap();
    runner.namespace_put("scan", cfg).await.unwrap();
    let b = engine(db.another_node().await, "b");
    b.start(stop.clone()).await.unwrap();
    // The drain needs b's row, which its first heartbeat writes.
    let deadline = Instant::now() + Duration::from_secs(20);
    while b
        .node_drain("test", "b", true, None)
        .await
        .unwrap()
        .is_none()
    {
        assert!(Instant::now() < deadline, "node b never registered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let caller = ProcessService::new(b, stop.clone());
    // Let a's runner settle into its idle wait before b enqueues.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for (i, kind) in ["init", "call", "call"].iter().enumerate() {
        let t0 = Instant::now();
        let req = Request {
            args: json!({"events": [i]}),
            ..Default::default()
        };
        let r = match *kind {
            "init" => caller.init("scan", "p", req).await,
            _ => caller.call("scan", "p", req).await,
        };
        assert!(r.is_ok(), "{kind}: {r:?}");
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{kind} waited {:?} (poll_interval 60 s, call_scan_timeout 200 ms)",
            t0.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_scan_timeout_on_sqlite() {
    call_scan_timeout_bounds_an_unannounced_call("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_scan_timeout_on_mysql() {
    call_scan_timeout_bounds_an_unannounced_call("mysql").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_scan_timeout_on_pg() {
    call_scan_timeout_bounds_an_unannounced_call("pg").await;
}

macro_rules! both {
    ($($name:ident),* $(,)?) => {
        mod pg { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name(super::env("pg").await).await; } )* }
        mod sqlite { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name(super::env("sqlite").await).await; } )* }
        mod mysql { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $name() { super::$name(super::env("mysql").await).await; } )* }
    };
}

both!(
    worker_pool_size_bounds_running_steps,
    timers_chained_from_init,
    call_blocks_due_timer,
    ten_concurrent_calls_run_one_by_one,
    processor_sees_requested_history_range,
    failing_call_breaks_and_repair_fixes,
    timer_retries_then_repair_reruns_it,
    idempotency_and_timers,
    remove_by_timer,
    put_imports_a_process,
    slow_processor_times_out,
    webhook_gets_every_notification_in_order,
    call_during_running_timeout_runs_before_next_timer,
    in_process_rust_processor,
    max_timeout_stops_timer_retries,
    idempotent_repeat_waits_for_the_running_request,
);

/// A call queued while another step of its process runs (one running task per process) starts
/// when that step ends, not at the runner's next poll: the node's poll interval and the
/// namespace's call_scan_timeout are 60 s here, and nothing else wakes the runner.
async fn call_queued_behind_a_step_starts_when_it_ends(backend: &str) {
    let db = test_store(backend).await;
    let stop = CancellationToken::new();
    let mut cfg = EngineConfig::new("a", db.store.backend());
    cfg.poll_interval = Duration::from_secs(60);
    let engine = Engine::new(db.store.clone(), Arc::new(SystemClock), cfg);
    engine.start(stop.clone()).await.unwrap();
    let svc = ProcessService::new(engine, stop.clone());
    let gates = Arc::new(Gates::default());
    svc.register_processor("scripted", Arc::new(Scripted(gates.clone())));
    svc.start().await.unwrap();
    let cfg: NamespaceConfig = serde_json::from_value(
        json!({"processor": {"url": "inproc:scripted"}, "call_scan_timeout": "60s"}),
    )
    .unwrap();
    svc.namespace_put("w", cfg).await.unwrap();
    let req = |args: Value| Request {
        args,
        ..Default::default()
    };
    svc.init("w", "p", req(json!({"events": ["i"]})))
        .await
        .unwrap();
    let s = svc.clone();
    let first = tokio::spawn(async move {
        s.call("w", "p", req(json!({"events": ["a"], "gate": "a"})))
            .await
    });
    gates.entered("a").await;
    let s = svc.clone();
    let second = tokio::spawn(async move { s.call("w", "p", req(json!({"events": ["b"]}))).await });
    // The second call's task waits in the queue behind the first.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let calls = db
            .store
            .task_list(TaskListParams {
                queue: Some("process:w".into()),
                kind: Some("call".into()),
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap();
        if calls.len() == 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the second call was never queued"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let t0 = Instant::now();
    gates.release("a");
    first.await.unwrap().unwrap();
    second.await.unwrap().unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "the queued call waited {:?} (poll interval and call_scan_timeout 60 s)",
        t0.elapsed()
    );
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_queued_behind_a_step_on_sqlite() {
    call_queued_behind_a_step_starts_when_it_ends("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_queued_behind_a_step_on_mysql() {
    call_queued_behind_a_step_starts_when_it_ends("mysql").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_queued_behind_a_step_on_pg() {
    call_queued_behind_a_step_starts_when_it_ends("pg").await;
}
