//! The process engine (progressor, seed 001) on top of the task engine.
//!
//! Each node runs one runner per namespace: it claims the namespace's tasks (queue
//! `process:<ns>`, one running task per process through the concurrency key), POSTs
//! [`ProcessorRequest`]s to the namespace's processor, and commits the result — events, aux
//! state, metadata, timers and the task's completion — in one transaction under the task's
//! lease. `init`, `call` and `repair` are synchronous for the caller: [`ProcessService::init`]
//! and friends wait for the task to finish and answer with the processor's response or error.

mod calls;
mod client;
mod runner;
mod sinks;
mod webhook;

pub use crate::sink::{check_sink_name, metric as sink_metric, Sink, SinkSpec, SinkStatus};
use client::ProcessorClient;
pub use client::{outbound_allowed, Processor};

use crate::metrics as M;
use crate::Engine;
use crate::EngineError;
use docket_core::process::{
    self, Action, HistoryRange, NamespaceConfig, Process, ProcessStatus, ProcessorProcess,
    ProcessorReply, ProcessorRequest, CALL_PRIORITY,
};
use docket_core::{NewTask, Task, TaskState};
use docket_store::{ProcessBreak, ProcessCommit, ProcessFail, TaskFail};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;

/// How long a node serves its copy of a namespace's settings before reading the store again
/// (an update made on another node is seen within this bound; a name not known here is read
/// at once).
pub const NAMESPACE_FRESH: Duration = Duration::from_secs(1);

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
    /// The store failed.
    #[error(transparent)]
    Store(#[from] EngineError),
}

impl From<docket_store::StoreError> for ProcessError {
    fn from(e: docket_store::StoreError) -> Self {
        ProcessError::Store(e.into())
    }
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
    client: ProcessorClient,
    namespaces: Arc<RwLock<HashMap<String, NamespaceConfig>>>,
    /// When this node last read every namespace from the store (None: never).
    loaded: Arc<RwLock<Option<std::time::Instant>>>,
    started: Arc<RwLock<std::collections::HashSet<String>>>,
    cancel: CancellationToken,
    sinks: Arc<Vec<SinkSpec>>,
    /// The sinks' delivery loops: awaited (≤ 2 s) when the service stops, so each hands its
    /// cursor over before the process exits.
    sink_loops: Arc<std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>>,
    #[allow(clippy::type_complexity)]
    sink_status: Arc<std::sync::Mutex<std::collections::BTreeMap<(String, String), SinkStatus>>>,
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
            client: ProcessorClient::new(),
            namespaces: Arc::default(),
            loaded: Arc::default(),
            started: Arc::default(),
            cancel,
            sinks: Arc::default(),
            sink_loops: Arc::default(),
            sink_status: Arc::default(),
        }
    }

    /// Limits processor and webhook URLs to `hosts` (see [`outbound_allowed`]): a namespace
    /// naming another host is refused (`url_not_allowed`), one stored before is not called,
    /// and redirects out of the list are not followed. Call before [`ProcessService::start`].
    #[must_use]
    pub fn with_outbound_hosts(mut self, hosts: Vec<String>) -> Self {
        self.client = self.client.limited_to(hosts);
        self
    }

    /// Loads every namespace from the store and starts their runners; then keeps looking for
    /// namespaces added on other nodes (every 5 s). The handle ends when the service stopped,
    /// after the event sinks handed their cursors over (at most 2 s).
    ///
    /// # Errors
    /// Store errors of the first load.
    pub async fn start(&self) -> Result<tokio::task::JoinHandle<()>, EngineError> {
        self.refresh().await?;
        self.start_task_sinks();
        let me = self.clone();
        Ok(tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = me.cancel.cancelled() => {
                        me.sinks_stopped().await;
                        return;
                    }
                    _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                }
                // A shutdown does not wait for a read stuck on an unreachable database.
                let r = tokio::select! {
                    _ = me.cancel.cancelled() => {
                        me.sinks_stopped().await;
                        return;
                    }
                    r = me.refresh() => r,
                };
                if let Err(e) = r {
                    tracing::warn!(error = %e, "reading namespaces failed");
                }
            }
        }))
    }

    async fn refresh(&self) -> Result<(), EngineError> {
        let at = std::time::Instant::now();
        for n in self.engine.store.namespace_list().await? {
            let name = n.name;
            match serde_json::from_value::<NamespaceConfig>(n.config) {
                Ok(cfg) => self.install(&name, cfg),
                Err(e) => tracing::warn!(namespace = %name, error = %e, "bad namespace config"),
            }
        }
        *self.loaded.write().expect("lock") = Some(at);
        Ok(())
    }

    /// Re-reads the namespaces when this node's copy is older than [`NAMESPACE_FRESH`], so a
    /// namespace put on another node is known here at once on a miss and an update is served
    /// stale for at most that long.
    async fn fresh(&self) -> Result<(), EngineError> {
        let stale = self
            .loaded
            .read()
            .expect("lock")
            .is_none_or(|at| at.elapsed() >= NAMESPACE_FRESH);
        if stale {
            self.refresh().await?;
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
            self.start_sinks(name);
        }
    }

    /// Registers an in-process processor; namespaces use it with processor URL `inproc:NAME`.
    /// Register it on every node that runs the namespace.
    pub fn register_processor(&self, name: &str, p: Arc<dyn Processor>) {
        self.client.register(name, p);
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
            self.client
                .check_outbound(url)
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

    /// Every namespace, as the store has it at most [`NAMESPACE_FRESH`] ago.
    ///
    /// # Errors
    /// Store errors of the re-read.
    pub async fn namespaces(&self) -> Result<Vec<(String, NamespaceConfig)>, ProcessError> {
        self.fresh().await?;
        Ok(self.cached_namespaces())
    }

    /// One namespace, as the store has it at most [`NAMESPACE_FRESH`] ago; a name this node has
    /// not seen is read from the store at once (a namespace put on another node is found).
    ///
    /// # Errors
    /// [`ProcessError::NamespaceNotFound`], store errors.
    pub async fn namespace(&self, ns: &str) -> Result<NamespaceConfig, ProcessError> {
        self.config(ns).await
    }

    fn cached_namespaces(&self) -> Vec<(String, NamespaceConfig)> {
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

    async fn config(&self, ns: &str) -> Result<NamespaceConfig, ProcessError> {
        let known = self.namespaces.read().expect("lock").contains_key(ns);
        if known {
            self.fresh().await?;
        } else {
            self.refresh().await?;
        }
        self.cached_config(ns)
    }

    /// [`ProcessService::config`], or this node's copy when the store cannot be read: a
    /// runner goes on with what it knows rather than stop on a database hiccup.
    async fn config_or_cached(&self, ns: &str) -> Result<NamespaceConfig, ProcessError> {
        match self.config(ns).await {
            Err(ProcessError::Store(e)) => {
                tracing::warn!(namespace = %ns, error = %e, "reading namespaces failed; using this node's copy");
                self.cached_config(ns)
            }
            r => r,
        }
    }

    /// This node's copy, without a read: for the runner's loop, which re-reads through
    /// [`ProcessService::config`] before each claim.
    fn cached_config(&self, ns: &str) -> Result<NamespaceConfig, ProcessError> {
        self.namespaces
            .read()
            .expect("lock")
            .get(ns)
            .cloned()
            .ok_or_else(|| ProcessError::NamespaceNotFound(ns.to_string()))
    }
}
