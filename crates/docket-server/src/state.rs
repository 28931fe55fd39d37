//! What every handler shares: [`AppState`], the request limits, and the [`Disconnect`] signal
//! of a request whose client went away.

use crate::auth::limits::{AuthMode, Limiters, Limits};
use crate::events::Tail;
use docket_engine::process::ProcessService;
use docket_engine::Engine;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Largest request body (bytes): batches of tasks go in one request.
pub const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;
/// Largest payload/result/progress of one task (bytes of JSON).
pub const MAX_PAYLOAD_BYTES: usize = 1024 * 1024;
/// Most tasks in one claim or list answer, and in one batch request.
pub const MAX_BATCH: usize = 10_000;
/// Longest long-poll `wait` of a claim.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// Shared state of the handlers.
#[derive(Clone)]
pub struct AppState {
    /// The engine.
    pub engine: Engine,
    /// Fires when the server shuts down: long polls return at once.
    pub shutdown: CancellationToken,
    /// Durable processes.
    pub processes: ProcessService,
    /// Panels other crates add to the dashboard (docket-sql: the pg_task tables this node
    /// serves), shown on the schedules page by section.
    pub panels: Arc<Vec<Arc<dyn docket_engine::panels::Panel>>>,
    /// The shared tail of process notifications behind `/v1/events`.
    pub events: Arc<Tail>,
    /// Whether requests need a token (docs: operations/security.md).
    pub auth: AuthMode,
    /// Served over TLS (the session cookie is then `Secure`).
    pub tls: bool,
    /// Secret of this process behind the dashboard's CSRF tokens when auth is off.
    pub(crate) csrf_secret: Arc<str>,
    /// Host names (without port) requests may be addressed to; `None`: any. A server on a
    /// loopback address allows only loopback names, so a DNS-rebinding page cannot reach it.
    pub allowed_hosts: Option<Arc<Vec<String>>>,
    /// Origins (`https://app.example`) whose pages may call the API from a browser (CORS);
    /// empty: none, and cross-site writes are refused.
    pub cors_origins: Arc<Vec<String>>,
    /// Per-token request limits and their state.
    pub(crate) limiters: Arc<Limiters>,
    /// asyncflow's routes under `/api` are mounted (`docket serve --compat asyncflow`).
    pub compat_asyncflow: bool,
}

impl AppState {
    /// State for `engine`; process runners start when namespaces are added (call
    /// `processes.start()` to also load the stored ones).
    pub fn new(engine: Engine, shutdown: CancellationToken) -> Self {
        docket_engine::metrics::prometheus();
        let processes = ProcessService::new(engine.clone(), shutdown.clone());
        AppState {
            engine,
            shutdown,
            processes,
            panels: Arc::default(),
            events: Arc::default(),
            auth: AuthMode::Off,
            allowed_hosts: None,
            tls: false,
            csrf_secret: docket_core::auth::new_token().into(),
            cors_origins: Arc::default(),
            limiters: Arc::new(Limiters::new(Limits::default())),
            compat_asyncflow: false,
        }
    }

    /// Lets pages of these origins (`scheme://host[:port]`) call the API from a browser.
    pub fn with_cors_origins(mut self, origins: Vec<String>) -> Self {
        self.cors_origins = Arc::new(origins);
        self
    }

    /// Per-token request limits (see [`Limits`]; the default applies otherwise).
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limiters = Arc::new(Limiters::new(limits));
        self
    }

    /// Limits a namespace's processor and webhook URLs to these hosts (see
    /// [`ProcessService::with_outbound_hosts`]).
    pub fn with_outbound_hosts(mut self, hosts: Vec<String>) -> Self {
        self.processes = self.processes.with_outbound_hosts(hosts);
        self
    }

    /// Publishes namespaces' notifications to these event sinks (see
    /// [`ProcessService::with_sinks`]).
    pub fn with_sinks(mut self, sinks: Vec<docket_engine::process::SinkSpec>) -> Self {
        self.processes = self.processes.with_sinks(sinks);
        self
    }

    /// Accepts only requests whose `Host` is one of `hosts` (names or IPs, no port).
    pub fn with_allowed_hosts(mut self, hosts: Vec<String>) -> Self {
        self.allowed_hosts = Some(Arc::new(hosts));
        self
    }

    /// Requires a token on every request (see [`AuthMode`]).
    pub fn with_auth(mut self, mode: AuthMode) -> Self {
        self.auth = mode;
        self
    }

    /// Mounts asyncflow's routes under `/api` (see [`compat`]).
    pub fn with_compat_asyncflow(mut self, on: bool) -> Self {
        self.compat_asyncflow = on;
        self
    }

    /// Shows these panels on the dashboard.
    pub fn with_panels(mut self, panels: Vec<Arc<dyn docket_engine::panels::Panel>>) -> Self {
        self.panels = Arc::new(panels);
        self
    }
}

/// Fires when the client of a request went away (or the server shuts down): long polls stop
/// waiting. The handler itself runs to completion either way (see [`detach`]).
#[derive(Clone)]
pub(crate) struct Disconnect(pub CancellationToken);
