//! The process engine (progressor, seed 001) on top of the task engine.
//!
//! Each node runs one runner per namespace: it claims the namespace's tasks (queue
//! `process:<ns>`, one running task per process through the concurrency key), POSTs
//! [`ProcessorRequest`]s to the namespace's processor, and commits the result — events, aux
//! state, metadata, timers and the task's completion — in one transaction under the task's
//! lease. `init`, `call` and `repair` are synchronous for the caller: [`ProcessService::init`]
//! and friends wait for the task to finish and answer with the processor's response or error.

use crate::metrics as M;
use crate::Engine;
use docket_core::process::{
    self, Action, HistoryRange, NamespaceConfig, Process, ProcessStatus, ProcessorProcess,
    ProcessorReply, ProcessorRequest, CALL_PRIORITY,
};
use docket_core::{NewTask, Task, TaskState};
use docket_store::{ProcessBreak, ProcessCommit, ProcessFail, StoreError, TaskFail, TimerChange};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

/// Errors of process operations (each has a stable API code).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProcessError {
    /// 404 `namespace_not_found`.
    #[error("namespace {0} not found")]
    NamespaceNotFound(String),
    /// 404 `process_not_found`.
    #[error("process not found")]
    NotFound,
    /// 409 `process_exists`.
    #[error("process exists")]
    Exists,
    /// 409 `process_not_running` (`process is error`, `process is init`).
    #[error("{0}")]
    NotRunning(String),
    /// 409 `process_is_running`: repair asked of a process that is not in error.
    #[error("{0}")]
    IsRunning(String),
    /// 422 `processor_error`: the processor's error.
    #[error("processor error")]
    Processor(Value),
    /// 504 `timeout`: no answer within process_step_timeout.
    #[error("no answer within process_step_timeout")]
    Timeout,
    /// The task was cancelled before it ran (its process broke meanwhile).
    #[error("the request was cancelled: {0}")]
    Cancelled(String),
    /// Bad input.
    #[error("{0}")]
    Invalid(String),
    /// 400 `url_not_allowed`: a processor or webhook URL outside the outbound allow-list.
    #[error("{0}")]
    UrlNotAllowed(String),
    /// Store failure.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An in-process processor (docket used as a library): a namespace whose processor URL is
/// `inproc:NAME` calls the processor registered under NAME instead of POSTing over HTTP. Same
/// contract: a [`ProcessorRequest`] in, a result or an error out.
#[async_trait::async_trait]
pub trait Processor: Send + Sync {
    /// Handles one init/call/repair/timeout.
    async fn process(&self, req: ProcessorRequest) -> ProcessorReply;
}

/// A caller's request: args, context, idempotency key, history range for the processor.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// Args for the processor.
    pub args: Value,
    /// Context for the processor.
    pub context: Value,
    /// Idempotency key: a repeated key answers with the stored response and runs nothing.
    pub idempotency_key: Option<String>,
    /// History the processor receives (default: all).
    pub range: HistoryRange,
}

/// Namespaces and their runners on this node.
#[derive(Clone)]
pub struct ProcessService {
    engine: Engine,
    http: reqwest::Client,
    namespaces: Arc<RwLock<HashMap<String, NamespaceConfig>>>,
    processors: Arc<RwLock<HashMap<String, Arc<dyn Processor>>>>,
    started: Arc<RwLock<std::collections::HashSet<String>>>,
    cancel: CancellationToken,
    outbound: Option<Arc<Vec<String>>>,
}

/// Whether `url`'s host is in `allowed`: each entry a host name or IP (any case), or
/// `*.example.com` for every name under `example.com`.
///
/// # Errors
/// A message naming the URL and what is allowed.
pub fn outbound_allowed(url: &str, allowed: &[String]) -> Result<(), String> {
    let u = reqwest::Url::parse(url).map_err(|e| format!("invalid URL {url:?}: {e}"))?;
    let host = u
        .host_str()
        .unwrap_or("")
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    let ok = !host.is_empty()
        && allowed.iter().any(|a| {
            let a = a.trim().to_ascii_lowercase();
            match a.strip_prefix("*.") {
                Some(domain) => host
                    .strip_suffix(domain)
                    .is_some_and(|sub| sub.ends_with('.') && sub.len() > 1),
                None => a.trim_start_matches('[').trim_end_matches(']') == host,
            }
        });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "host {host:?} of {url:?} is not in the outbound allow-list ({})",
            allowed.join(", ")
        ))
    }
}

fn outbound_client(allowed: Option<Arc<Vec<String>>>) -> reqwest::Client {
    let policy = match allowed {
        None => reqwest::redirect::Policy::default(),
        // A redirect must not lead a request out of the allow-list.
        Some(a) => reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() >= 10 {
                attempt.error("too many redirects")
            } else if outbound_allowed(attempt.url().as_str(), &a).is_ok() {
                attempt.follow()
            } else {
                attempt.stop()
            }
        }),
    };
    reqwest::Client::builder()
        .redirect(policy)
        .build()
        .unwrap_or_default()
}

fn detail_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl ProcessService {
    /// A service on `engine`; runners stop when `cancel` fires.
    pub fn new(engine: Engine, cancel: CancellationToken) -> Self {
        ProcessService {
            engine,
            http: outbound_client(None),
            namespaces: Arc::default(),
            processors: Arc::default(),
            started: Arc::default(),
            cancel,
            outbound: None,
        }
    }

    /// Limits processor and webhook URLs to `hosts` (see [`outbound_allowed`]): a namespace
    /// naming another host is refused (`url_not_allowed`), one stored before is not called,
    /// and redirects out of the list are not followed. Call before [`ProcessService::start`].
    #[must_use]
    pub fn with_outbound_hosts(mut self, hosts: Vec<String>) -> Self {
        let hosts = Arc::new(hosts);
        self.http = outbound_client(Some(hosts.clone()));
        self.outbound = Some(hosts);
        self
    }

    fn check_outbound(&self, url: &str) -> Result<(), String> {
        match &self.outbound {
            // An in-process processor sends nothing anywhere.
            Some(_) if url.starts_with("inproc:") => Ok(()),
            Some(a) => outbound_allowed(url, a),
            None => Ok(()),
        }
    }

    /// Loads every namespace from the store and starts their runners; then keeps looking for
    /// namespaces added on other nodes (every 5 s).
    ///
    /// # Errors
    /// Store errors of the first load.
    pub async fn start(&self) -> Result<tokio::task::JoinHandle<()>, StoreError> {
        self.refresh().await?;
        let me = self.clone();
        Ok(tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = me.cancel.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                }
                if let Err(e) = me.refresh().await {
                    tracing::warn!(error = %e, "reading namespaces failed");
                }
            }
        }))
    }

    async fn refresh(&self) -> Result<(), StoreError> {
        for n in self.engine.store.namespace_list().await? {
            let name = n.name;
            match serde_json::from_value::<NamespaceConfig>(n.config) {
                Ok(cfg) => self.install(&name, cfg),
                Err(e) => tracing::warn!(namespace = %name, error = %e, "bad namespace config"),
            }
        }
        Ok(())
    }

    fn install(&self, name: &str, cfg: NamespaceConfig) {
        self.namespaces
            .write()
            .expect("lock")
            .insert(name.to_string(), cfg);
        if self.started.write().expect("lock").insert(name.to_string()) {
            tokio::spawn(self.clone().run(name.to_string()));
            // The delivery loop idles while the namespace has no webhook.
            tokio::spawn(self.clone().deliver(name.to_string()));
        }
    }

    /// Registers an in-process processor; namespaces use it with processor URL `inproc:NAME`.
    /// Register it on every node that runs the namespace.
    pub fn register_processor(&self, name: &str, p: Arc<dyn Processor>) {
        self.processors
            .write()
            .expect("lock")
            .insert(name.to_string(), p);
    }

    /// Creates or replaces a namespace and starts its runner here.
    ///
    /// # Errors
    /// [`ProcessError::Invalid`], store errors.
    pub async fn namespace_put(
        &self,
        name: &str,
        cfg: NamespaceConfig,
    ) -> Result<(), ProcessError> {
        process::check_namespace(name).map_err(ProcessError::Invalid)?;
        cfg.validate().map_err(ProcessError::Invalid)?;
        for url in std::iter::once(&cfg.processor.url).chain(cfg.webhook.as_ref().map(|w| &w.url)) {
            self.check_outbound(url)
                .map_err(ProcessError::UrlNotAllowed)?;
        }
        let v = serde_json::to_value(&cfg).expect("config serialises");
        self.engine
            .store
            .namespace_put(docket_store::NamespacePutParams {
                name,
                config: &v,
                now: self.engine.clock.now(),
            })
            .await?;
        self.install(name, cfg);
        Ok(())
    }

    /// Every namespace known here.
    pub fn namespaces(&self) -> Vec<(String, NamespaceConfig)> {
        let mut v: Vec<_> = self
            .namespaces
            .read()
            .expect("lock")
            .clone()
            .into_iter()
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    fn config(&self, ns: &str) -> Result<NamespaceConfig, ProcessError> {
        self.namespaces
            .read()
            .expect("lock")
            .get(ns)
            .cloned()
            .ok_or_else(|| ProcessError::NamespaceNotFound(ns.to_string()))
    }

    fn task_for(
        &self,
        ns: &str,
        id: &str,
        kind: &str,
        req: &Request,
        cfg: &NamespaceConfig,
    ) -> Result<docket_core::task::ResolvedTask, ProcessError> {
        let mut payload = json!({"process_id": id, "args": req.args, "context": req.context});
        if req.range != HistoryRange::default() {
            payload["range"] = serde_json::to_value(req.range).expect("range serialises");
        }
        let t = NewTask {
            queue: Some(process::queue_of(ns)),
            priority: Some(CALL_PRIORITY),
            max_attempts: Some(1),
            timeout: Some(cfg.lease()),
            concurrency_key: Some(process::key_of(ns, id)),
            concurrency_limit: Some(1),
            unique_key: req
                .idempotency_key
                .as_ref()
                .map(|k| process::idempotency_unique_key(ns, id, k)),
            ..NewTask::new(kind, payload)
        };
        t.resolve(None, &self.engine.config.defaults, self.engine.clock.now())
            .map_err(ProcessError::Invalid)
    }

    /// A repeated idempotency key: the earlier task, if any.
    async fn earlier(
        &self,
        ns: &str,
        id: &str,
        req: &Request,
    ) -> Result<Option<Task>, ProcessError> {
        match &req.idempotency_key {
            Some(k) => Ok(self
                .engine
                .store
                .task_find_by_unique_key(&process::idempotency_unique_key(ns, id, k))
                .await?),
            None => Ok(None),
        }
    }

    /// Creates a process and runs its init; answers with the processor's response.
    ///
    /// # Errors
    /// See [`ProcessError`].
    pub async fn init(&self, ns: &str, id: &str, req: Request) -> Result<Value, ProcessError> {
        let cfg = self.config(ns)?;
        process::check_process_id(id).map_err(ProcessError::Invalid)?;
        if let Some(t) = self.earlier(ns, id, &req).await? {
            return self.answer(ns, t.id, &cfg).await;
        }
        let task = self.task_for(ns, id, "init", &req, &cfg)?;
        let t = match self
            .engine
            .store
            .process_create(docket_store::ProcessCreateParams {
                namespace: ns,
                id,
                init: task,
                now: self.engine.clock.now(),
            })
            .await
        {
            Ok(t) => t,
            Err(StoreError::Conflict(_)) => return Err(ProcessError::Exists),
            Err(e) => return Err(e.into()),
        };
        self.engine.waker.wake(&t.queue);
        self.answer(ns, t.id, &cfg).await
    }

    /// Queues a call (FIFO behind running/queued tasks of the process) and answers with the
    /// processor's response.
    ///
    /// # Errors
    /// See [`ProcessError`].
    pub async fn call(&self, ns: &str, id: &str, req: Request) -> Result<Value, ProcessError> {
        self.enqueue(ns, id, "call", ProcessStatus::Running, req)
            .await
    }

    /// Repairs a process in `error` through the processor.
    ///
    /// # Errors
    /// See [`ProcessError`].
    pub async fn repair(&self, ns: &str, id: &str, req: Request) -> Result<Value, ProcessError> {
        self.enqueue(ns, id, "repair", ProcessStatus::Error, req)
            .await
    }

    async fn enqueue(
        &self,
        ns: &str,
        id: &str,
        kind: &str,
        require: ProcessStatus,
        req: Request,
    ) -> Result<Value, ProcessError> {
        let cfg = self.config(ns)?;
        if let Some(t) = self.earlier(ns, id, &req).await? {
            return self.answer(ns, t.id, &cfg).await;
        }
        let task = self.task_for(ns, id, kind, &req, &cfg)?;
        let t = match self
            .engine
            .store
            .process_enqueue(docket_store::ProcessEnqueueParams {
                namespace: ns,
                id,
                task,
                require,
                now: self.engine.clock.now(),
            })
            .await
        {
            Ok(t) => t,
            Err(StoreError::NotFound(_)) => return Err(ProcessError::NotFound),
            Err(StoreError::InvalidState(m)) if require == ProcessStatus::Error => {
                return Err(ProcessError::IsRunning(m))
            }
            Err(StoreError::InvalidState(m)) => return Err(ProcessError::NotRunning(m)),
            Err(e) => return Err(e.into()),
        };
        self.engine.waker.wake(&t.queue);
        self.answer(ns, t.id, &cfg).await
    }

    /// The process and a range of its history.
    ///
    /// # Errors
    /// [`ProcessError::NotFound`], store errors.
    pub async fn get(
        &self,
        ns: &str,
        id: &str,
        range: HistoryRange,
    ) -> Result<(Process, Vec<process::Event>), ProcessError> {
        self.engine
            .store
            .process_get(docket_store::ProcessGetParams {
                namespace: ns,
                id,
                range,
            })
            .await?
            .map(|p| (p.process, p.history))
            .ok_or(ProcessError::NotFound)
    }

    /// simple-repair: an `error` process back to `running` without the processor (progressor).
    ///
    /// # Errors
    /// [`ProcessError::NotFound`], [`ProcessError::IsRunning`].
    pub async fn simple_repair(&self, ns: &str, id: &str) -> Result<(), ProcessError> {
        match self
            .engine
            .store
            .process_simple_repair(docket_store::ProcessSimpleRepairParams {
                namespace: ns,
                id,
                now: self.engine.clock.now(),
            })
            .await
        {
            Ok(()) => Ok(()),
            Err(StoreError::NotFound(_)) => Err(ProcessError::NotFound),
            Err(StoreError::InvalidState(m)) => Err(ProcessError::IsRunning(m)),
            Err(e) => Err(e.into()),
        }
    }

    /// Imports a whole process (progressor's put): status, history, aux state, metadata and an
    /// optional timer.
    ///
    /// # Errors
    /// [`ProcessError::Exists`], [`ProcessError::Invalid`], store errors.
    pub async fn put(
        &self,
        ns: &str,
        id: &str,
        spec: process::ProcessImportSpec,
    ) -> Result<Process, ProcessError> {
        let cfg = self.config(ns)?;
        process::check_process_id(id).map_err(ProcessError::Invalid)?;
        let now = chrono::SubsecRound::trunc_subsecs(self.engine.clock.now(), 6);
        let timer = match &spec.timer {
            None => None,
            Some(t) => {
                let at = process::timer_at(t, now).map_err(ProcessError::Invalid)?;
                Some(self.timer_task(
                    ns,
                    id,
                    if t.remove { "remove" } else { "timeout" },
                    at,
                    &cfg,
                )?)
            }
        };
        let history: Vec<process::Event> = spec
            .history
            .into_iter()
            .enumerate()
            .map(|(i, e)| process::Event {
                event_id: i as i64 + 1,
                task_id: None,
                timestamp: e
                    .timestamp
                    .map(|t| chrono::SubsecRound::trunc_subsecs(t, 6))
                    .unwrap_or(now),
                metadata: e.metadata,
                payload: e.payload,
            })
            .collect();
        let p = Process {
            namespace: ns.to_string(),
            id: id.to_string(),
            status: spec.status,
            previous_status: None,
            status_changed_at: now,
            detail: spec.detail,
            aux_state: spec.aux_state,
            metadata: spec.metadata,
            corrupted_by: None,
            created_at: now,
            last_event_id: history.len() as i64,
        };
        let import = docket_store::ProcessImport {
            process: p.clone(),
            history,
            timer,
            now,
        };
        match self.engine.store.process_import(import).await {
            Ok(()) => {
                self.engine.waker.wake_scheduler();
                self.engine.waker.wake(&process::queue_of(ns));
                Ok(p)
            }
            Err(StoreError::Conflict(_)) => Err(ProcessError::Exists),
            Err(e) => Err(e.into()),
        }
    }

    /// Processes of a namespace (keyset paging by id).
    ///
    /// # Errors
    /// Store errors.
    pub async fn list(
        &self,
        ns: &str,
        status: Option<ProcessStatus>,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<Process>, ProcessError> {
        Ok(self
            .engine
            .store
            .process_list(docket_store::ProcessListParams {
                namespace: ns,
                status,
                after,
                limit,
            })
            .await?)
    }

    /// Every task of a process, oldest first, each with the events it produced.
    ///
    /// # Errors
    /// [`ProcessError::NotFound`], store errors.
    pub async fn trace(
        &self,
        ns: &str,
        id: &str,
    ) -> Result<Vec<docket_core::api::TraceTask>, ProcessError> {
        let (_, events) = self.get(ns, id, HistoryRange::default()).await?;
        let tasks = self
            .engine
            .store
            .task_list(docket_store::TaskListParams {
                concurrency_key: Some(process::key_of(ns, id)),
                limit: 10_000,
                ..Default::default()
            })
            .await?;
        Ok(tasks
            .into_iter()
            .map(|task| docket_core::api::TraceTask {
                events: events
                    .iter()
                    .filter(|e| e.task_id == Some(task.id))
                    .cloned()
                    .collect(),
                task,
            })
            .collect())
    }

    /// Waits for task `id` to finish (up to the step timeout) and maps its end to an answer.
    async fn answer(
        &self,
        ns: &str,
        id: i64,
        cfg: &NamespaceConfig,
    ) -> Result<Value, ProcessError> {
        let _ = ns;
        let deadline = tokio::time::Instant::now() + cfg.process_step_timeout;
        // Only this task's end wakes us: the local runner directly, another node's through
        // the `docket_done` notification (PostgreSQL); polling is the fallback.
        let mine = self.engine.waker.task(id);
        let r = self.answer_loop(id, deadline, &mine).await;
        self.engine.waker.forget_task(id, mine);
        r
    }

    async fn answer_loop(
        &self,
        id: i64,
        deadline: tokio::time::Instant,
        mine: &Notify,
    ) -> Result<Value, ProcessError> {
        loop {
            let notified = mine.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let t = self
                .engine
                .store
                .task_get(id)
                .await?
                .ok_or(ProcessError::NotFound)?;
            match t.state {
                TaskState::Completed => return Ok(t.result.unwrap_or(Value::Null)),
                TaskState::Discarded => {
                    let err = t.result.as_ref().and_then(|r| r.get("error")).cloned();
                    return Err(ProcessError::Processor(err.unwrap_or_else(|| {
                        json!(t
                            .errors
                            .last()
                            .map(|e| e.message.clone())
                            .unwrap_or_default())
                    })));
                }
                TaskState::Cancelled => {
                    return Err(ProcessError::Cancelled(
                        "the process failed before this request ran".into(),
                    ))
                }
                _ => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ProcessError::Timeout);
            }
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                _ = tokio::time::sleep_until(deadline) => {}
            }
        }
    }

    /// Delivers the namespace's notifications to its webhook: whichever node holds the sink's
    /// lease POSTs batches in seq order and advances the cursor after a 2xx (at-least-once).
    async fn deliver(self, ns: String) {
        let sink = format!("webhook:{ns}");
        let owner = self.engine.config.node.clone();
        let mut backoff = Duration::from_millis(200);
        loop {
            let url = self.config(&ns).ok().and_then(|c| c.webhook.map(|w| w.url));
            let pause = match url {
                None => Duration::from_secs(1),
                Some(url) => match self.deliver_once(&ns, &sink, &owner, &url).await {
                    Ok(true) => {
                        backoff = Duration::from_millis(200);
                        Duration::ZERO
                    }
                    Ok(false) => Duration::from_millis(200),
                    Err(e) => {
                        tracing::warn!(namespace = %ns, error = %e, "webhook delivery failed; retrying in {backoff:?}");
                        let b = backoff;
                        backoff = (backoff * 2).min(Duration::from_secs(30));
                        b
                    }
                },
            };
            tokio::select! {
                _ = self.cancel.cancelled() => return,
                _ = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// One batch: Ok(true) when something was delivered, Ok(false) when idle or not our lease.
    async fn deliver_once(
        &self,
        ns: &str,
        sink: &str,
        owner: &str,
        url: &str,
    ) -> Result<bool, String> {
        self.check_outbound(url)?;
        let now = self.engine.clock.now();
        let until = docket_core::time::add(now, std::time::Duration::from_secs(30));
        let store = &self.engine.store;
        let Some(cursor) = store
            .sink_lease(docket_store::SinkLeaseParams {
                name: sink,
                owner,
                until,
                now,
            })
            .await
            .map_err(|e| e.to_string())?
        else {
            return Ok(false);
        };
        let batch = store
            .notification_list(docket_store::NotificationListParams {
                namespace: Some(ns),
                after: cursor,
                limit: 100,
            })
            .await
            .map_err(|e| e.to_string())?;
        let Some(last) = batch.last().map(|n| n.seq) else {
            return Ok(false);
        };
        let t0 = std::time::Instant::now();
        let resp = self
            .http
            .post(url)
            .timeout(Duration::from_secs(10))
            .json(&json!({"notifications": batch}))
            .send()
            .await
            .map_err(|e| format!("webhook unreachable: {e}"))?;
        ::metrics::histogram!(M::NOTIFICATION, "namespace" => ns.to_string(), "notification_type" => "webhook")
            .record(M::ms_since(t0));
        if !resp.status().is_success() {
            return Err(format!("webhook answered HTTP {}", resp.status()));
        }
        store
            .sink_advance(docket_store::SinkAdvanceParams {
                name: sink,
                owner,
                seq: last,
            })
            .await
            .map_err(|e| e.to_string())?;
        Ok(true)
    }

    /// The runner of one namespace on this node.
    async fn run(self, ns: String) {
        let queue = process::queue_of(&ns);
        let worker = format!("{}/process", self.engine.config.node);
        let Ok(size) = self.config(&ns).map(|c| c.worker_pool_size) else {
            return;
        };
        let sem = Arc::new(Semaphore::new(size));
        while !self.cancel.is_cancelled() {
            let first = tokio::select! {
                p = sem.clone().acquire_owned() => p.expect("semaphore open"),
                _ = self.cancel.cancelled() => return,
            };
            let lease = match self.config(&ns) {
                Ok(c) => c.lease(),
                Err(_) => return,
            };
            let free = sem.available_permits() + 1;
            let scan = std::time::Instant::now();
            let claimed = self
                .engine
                .claim(
                    &queue,
                    &worker,
                    free as i64,
                    Some(lease),
                    Duration::from_secs(30),
                    &self.cancel,
                )
                .await;
            if matches!(&claimed, Ok(t) if !t.is_empty()) {
                // Only scans that found work: an idle long poll is not a scan's cost.
                ::metrics::histogram!(M::CALLS_SCANNING, "namespace" => ns.clone())
                    .record(M::ms_since(scan));
            }
            let tasks = match claimed {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!(namespace = %ns, error = %e, "claim failed; retrying in 1s");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            let mut first = Some(first);
            for t in tasks {
                let permit = match first.take() {
                    Some(p) => p,
                    None => sem.clone().acquire_owned().await.expect("semaphore open"),
                };
                let me = self.clone();
                let ns = ns.clone();
                // Every log line of the step carries the process and the task.
                let span = tracing::info_span!(
                    "process_task",
                    namespace = %ns,
                    process_id = t.payload["process_id"].as_str().unwrap_or_default(),
                    task_id = t.id,
                    kind = %t.kind,
                    attempt = t.attempt,
                    trace_id = t.trace_id.as_deref().unwrap_or("")
                );
                docket_core::trace::link_span(&span, t.trace_id.as_deref());
                tokio::spawn(tracing::Instrument::instrument(
                    async move {
                        let id = t.id;
                        if let Err(e) = me.step(&ns, t).await {
                            tracing::warn!(error = %e, "process step failed");
                        }
                        let t0 = std::time::Instant::now();
                        me.engine.waker.task_done(id);
                        ::metrics::histogram!(M::NOTIFICATION, "namespace" => ns.clone(), "notification_type" => "done")
                        .record(M::ms_since(t0));
                        drop(permit);
                    },
                    span,
                ));
            }
        }
    }

    /// Runs one task of a process.
    async fn step(&self, ns: &str, t: Task) -> Result<(), StoreError> {
        let cfg = match self.config(ns) {
            Ok(c) => c,
            Err(_) => return Ok(()),
        };
        let token = t
            .lease
            .as_ref()
            .map(|l| l.token.clone())
            .unwrap_or_default();
        let pid = t.payload["process_id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let now = || self.engine.clock.now();
        if t.kind == "remove" {
            let t0 = std::time::Instant::now();
            let r = self
                .engine
                .store
                .process_remove(docket_store::ProcessRemoveParams {
                    task_id: t.id,
                    token: &token,
                    namespace: ns,
                    id: &pid,
                    now: now(),
                })
                .await;
            ::metrics::histogram!(M::PROCESS_REMOVING, "namespace" => ns.to_string())
                .record(M::ms_since(t0));
            return r;
        }
        let prep = std::time::Instant::now();
        let range: HistoryRange =
            serde_json::from_value(t.payload["range"].clone()).unwrap_or_default();
        let Some(docket_store::ProcessWithHistory {
            process: p,
            history,
        }) = self
            .engine
            .store
            .process_get(docket_store::ProcessGetParams {
                namespace: ns,
                id: &pid,
                range,
            })
            .await?
        else {
            // The process is gone (removed): nothing to do.
            let _ = self
                .engine
                .store
                .task_complete_many(docket_store::TaskCompleteManyParams {
                    items: &[docket_store::TaskComplete {
                        id: t.id,
                        token,
                        result: Value::Null,
                    }],
                    now: now(),
                })
                .await?;
            return Ok(());
        };
        let corrupted_by = p.corrupted_by;
        let req = ProcessorRequest {
            task_type: t.kind.clone(),
            args: t.payload["args"].clone(),
            context: t.payload["context"].clone(),
            process: ProcessorProcess {
                id: p.id.clone(),
                namespace: p.namespace.clone(),
                status: p.status,
                previous_status: p.previous_status,
                detail: p.detail.clone(),
                aux_state: p.aux_state.clone(),
                metadata: p.metadata.clone(),
                history,
                last_event_id: p.last_event_id,
                corrupted_by,
            },
        };
        let labels = [("namespace", ns.to_string()), ("task_type", t.kind.clone())];
        ::metrics::histogram!(M::REQUEST_PREPARING, &labels).record(M::ms_since(prep));
        let work = std::time::Instant::now();
        let reply = self.post(&cfg, &req).await;
        ::metrics::histogram!(M::TASK_PROCESSING, &labels).record(M::ms_since(work));
        let done = std::time::Instant::now();
        let ok = matches!(reply, Ok(ProcessorReply::Ok(_)));
        let r = self
            .finish(ns, pid, t, token, reply, corrupted_by, &cfg)
            .await;
        let completion = if ok && r.is_ok() { "complete" } else { "error" };
        ::metrics::histogram!(M::TASK_COMPLETION, "namespace" => ns.to_string(), "completion_type" => completion)
            .record(M::ms_since(done));
        r
    }

    /// Stores what the processor answered.
    #[allow(clippy::too_many_arguments)]
    async fn finish(
        &self,
        ns: &str,
        pid: String,
        t: Task,
        token: String,
        reply: Result<ProcessorReply, String>,
        corrupted_by: Option<i64>,
        cfg: &NamespaceConfig,
    ) -> Result<(), StoreError> {
        let cfg = cfg.clone();
        let now = || self.engine.clock.now();
        match reply {
            Ok(ProcessorReply::Ok(r)) => {
                let timer = match &r.action {
                    None => TimerChange::Keep,
                    Some(Action::Unset(_)) => TimerChange::Unset,
                    Some(Action::Set(s)) => match process::timer_at(s, now()) {
                        Ok(at) => {
                            let kind = if s.remove { "remove" } else { "timeout" };
                            TimerChange::Set(Box::new(self.timer_task(ns, &pid, kind, at, &cfg)?))
                        }
                        // A malformed action is the processor's error: nothing of the result is kept.
                        Err(msg) => return self.fail(ns, &pid, &t, token, json!(msg), &cfg).await,
                    },
                };
                // A repaired process that a timer broke gets that timer again (progressor).
                let mut also = vec![];
                if t.kind == "repair" && matches!(timer, TimerChange::Keep) {
                    if let Some(bad) = corrupted_by {
                        if let Some(bt) = self.engine.store.task_get(bad).await? {
                            if bt.kind == "timeout" {
                                also.push(self.timer_task(ns, &pid, "timeout", now(), &cfg)?);
                            }
                        }
                    }
                }
                let c = ProcessCommit {
                    task_id: t.id,
                    token,
                    namespace: ns.to_string(),
                    id: pid,
                    events: r.events,
                    aux_state: r.aux_state,
                    metadata: r.metadata,
                    response: r.response,
                    timer,
                    also,
                    now: now(),
                };
                self.engine.store.process_commit(c).await
            }
            Ok(ProcessorReply::Error(v)) => self.fail(ns, &pid, &t, token, v, &cfg).await,
            Err(text) => self.fail(ns, &pid, &t, token, json!(text), &cfg).await,
        }
    }

    fn timer_task(
        &self,
        ns: &str,
        pid: &str,
        kind: &str,
        at: docket_core::Timestamp,
        cfg: &NamespaceConfig,
    ) -> Result<docket_core::task::ResolvedTask, StoreError> {
        let t = NewTask {
            queue: Some(process::queue_of(ns)),
            priority: Some(0),
            run_at: Some(at),
            max_attempts: Some(cfg.retry_policy.max_attempts),
            backoff: Some(cfg.retry_policy.backoff()),
            timeout: Some(cfg.lease()),
            concurrency_key: Some(process::key_of(ns, pid)),
            concurrency_limit: Some(1),
            ..NewTask::new(kind, json!({"process_id": pid}))
        };
        t.resolve(None, &self.engine.config.defaults, self.engine.clock.now())
            .map_err(StoreError::Invalid)
    }

    async fn fail(
        &self,
        ns: &str,
        pid: &str,
        t: &Task,
        token: String,
        err: Value,
        cfg: &NamespaceConfig,
    ) -> Result<(), StoreError> {
        let text = detail_of(&err);
        let (permanent, on_give_up) = match t.kind.as_str() {
            "timeout" => (
                cfg.retry_policy.is_non_retryable(&text),
                ProcessBreak::Break { corrupted: true },
            ),
            "repair" => (true, ProcessBreak::Keep),
            _ => (true, ProcessBreak::Break { corrupted: false }),
        };
        let max_timeout = cfg.retry_policy.max_timeout;
        // progressor stops retrying a timer once the interval would pass max_timeout.
        let permanent = permanent
            || max_timeout.is_some_and(|m| t.backoff.base_delay(t.attempt) >= m && t.attempt > 1);
        self.engine
            .store
            .process_fail(ProcessFail {
                fail: TaskFail {
                    id: t.id,
                    token,
                    error: text,
                    retry_in: None,
                    permanent,
                },
                namespace: ns.to_string(),
                id: pid.to_string(),
                on_give_up,
                error_value: err,
                now: self.engine.clock.now(),
            })
            .await
            .map(|_| ())
    }

    async fn post(
        &self,
        cfg: &NamespaceConfig,
        req: &ProcessorRequest,
    ) -> Result<ProcessorReply, String> {
        if let Some(name) = cfg.processor.url.strip_prefix("inproc:") {
            let p = self.processors.read().expect("lock").get(name).cloned();
            let Some(p) = p else {
                return Err(format!(
                    "no in-process processor registered as {name:?} on this node"
                ));
            };
            return tokio::time::timeout(cfg.process_step_timeout, p.process(req.clone()))
                .await
                .map_err(|_| "processor timeout".to_string());
        }
        self.check_outbound(&cfg.processor.url)?;
        let resp = self
            .http
            .post(&cfg.processor.url)
            .timeout(cfg.process_step_timeout)
            .json(req)
            .send()
            .await
            .map_err(|e| {
                if e.is_timeout() {
                    "processor timeout".to_string()
                } else {
                    format!("processor unreachable: {e}")
                }
            })?;
        let status = resp.status();
        let body: Value = resp
            .json()
            .await
            .map_err(|e| format!("processor answered HTTP {status} without JSON: {e}"))?;
        ProcessorReply::parse(body)
    }
}

#[cfg(test)]
mod tests {
    use super::outbound_allowed;

    #[test]
    fn outbound_hosts_by_name_and_suffix() {
        let allowed = vec![
            "127.0.0.1".to_string(),
            "*.example.com".into(),
            "Proc.Internal".into(),
            "[::1]".into(),
        ];
        for ok in [
            "http://127.0.0.1:8080/p",
            "https://a.example.com/",
            "https://a.b.example.com/x?y",
            "http://proc.internal/",
            "http://PROC.INTERNAL:9/",
            "http://[::1]:80/",
        ] {
            assert_eq!(outbound_allowed(ok, &allowed), Ok(()), "{ok}");
        }
        for bad in [
            "http://example.com/",
            "http://evilexample.com/",
            "http://example.com.evil.net/",
            "http://127.0.0.2/",
            "http://proc.internal.evil/",
            "http://user@evil.net/",
            "not a url",
            "file:///etc/passwd",
            "inproc:x",
        ] {
            assert!(outbound_allowed(bad, &allowed).is_err(), "{bad}");
        }
    }
}
