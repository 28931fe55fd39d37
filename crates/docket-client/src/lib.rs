//! A typed client of docket's HTTP API ([`Client`]) and the pull worker that runs a command per
//! task ([`command_worker`]).

pub mod command_worker;
pub mod control;

use docket_core::{NewTask, QueueSettings, QueueStats, Task};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use std::time::Duration;

/// Errors of the client.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The server answered with an error.
    #[error("{code}: {message} (HTTP {status})")]
    Api {
        /// HTTP status.
        status: u16,
        /// Stable error code (`lease_lost`, `not_found`, …).
        code: String,
        /// Message.
        message: String,
    },
    /// The server could not be reached or answered garbage.
    #[error("cannot reach the docket server: {0}")]
    Http(#[from] reqwest::Error),
    /// An answer did not have the expected shape.
    #[error("unexpected answer: {0}")]
    Decode(String),
    /// The client could not be set up (a CA file that does not load).
    #[error("{0}")]
    Config(String),
}

/// How a [`Client`] reaches its server.
#[derive(Debug, Default, Clone)]
pub struct ClientOptions {
    /// API token sent as `Authorization: Bearer …`.
    pub token: Option<String>,
    /// PEM file of CA certificates trusted for `https://` besides the system's (a private CA,
    /// a self-signed server certificate).
    pub ca_file: Option<std::path::PathBuf>,
}

/// TLS of the client: the system's roots and the optional CA file, rustls with ring.
fn tls_config(ca_file: Option<&std::path::Path>) -> Result<rustls::ClientConfig, ClientError> {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    // Unreadable system certificates are skipped: the CA file may be all that is needed.
    for c in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(c);
    }
    if let Some(p) = ca_file {
        let bad = |e: &dyn std::fmt::Display| {
            ClientError::Config(format!("cannot read the CA file {}: {e}", p.display()))
        };
        let certs = rustls_pki_types::CertificateDer::pem_file_iter(p)
            .map_err(|e| bad(&e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(&e))?;
        if certs.is_empty() {
            return Err(bad(&"no certificate in it"));
        }
        for c in certs {
            roots.add(c).map_err(|e| bad(&e))?;
        }
    }
    Ok(
        rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| ClientError::Config(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth(),
    )
}

impl ClientError {
    /// The API error code, if the server answered with one.
    pub fn code(&self) -> Option<&str> {
        match self {
            ClientError::Api { code, .. } => Some(code),
            _ => None,
        }
    }
}

/// Result alias of the client.
pub type Result<T, E = ClientError> = std::result::Result<T, E>;

use docket_core::api::{
    BatchRequest, BatchResponse, ClaimRequest, ClaimResponse, CompleteRequest, FailRequest,
    HeartbeatRequest, NamespaceList, NodeList, ProcessRepaired, ProcessResponse, ProcessTrace,
    ScheduleList,
};
pub use docket_core::api::{
    Finished, ItemOutcome, NamespaceView, NodeView, ProcessCallRequest, ProcessInitRequest,
    ProcessPage, ProcessView, TaskPage, TraceTask,
};
pub use docket_core::process::{Direction, HistoryRange, NamespaceConfig, Process};
pub use docket_core::{Schedule, ScheduleSpec};

/// Filters of [`Client::task_list`].
#[derive(Debug, Default, Clone)]
pub struct ListFilter {
    /// Queue.
    pub queue: Option<String>,
    /// State name.
    pub state: Option<String>,
    /// Kind.
    pub kind: Option<String>,
    /// Page size.
    pub limit: Option<i64>,
    /// Cursor.
    pub after: Option<i64>,
    /// Newest first.
    pub descending: bool,
    /// Text in the payload or errors.
    pub text: Option<String>,
    /// Only this user's tasks.
    pub user_id: Option<String>,
    /// Only tasks with this trace id.
    pub trace_id: Option<String>,
    /// Only tasks with this unique key.
    pub unique_key: Option<String>,
    /// Only tasks whose last attempt ran on this worker.
    pub worker: Option<String>,
}

/// A client of one docket server.
#[derive(Debug, Clone)]
pub struct Client {
    base: String,
    http: reqwest::Client,
}

impl Client {
    /// A client of the server at `base` (e.g. `http://127.0.0.1:7070`), without a token.
    pub fn new(base: impl Into<String>) -> Self {
        Self::with_token(base, None)
    }

    /// A client of the server at `base` that sends `token` as `Authorization: Bearer …` (a
    /// server with auth required answers 401 `unauthenticated` without one).
    pub fn with_token(base: impl Into<String>, token: Option<&str>) -> Self {
        Self::with_options(
            base,
            &ClientOptions {
                token: token.map(str::to_string),
                ca_file: None,
            },
        )
        .expect("a client without a CA file always builds")
    }

    /// A client of the server at `base` (`http://` or `https://`) with a token and extra trusted
    /// CA certificates.
    ///
    /// # Errors
    /// [`ClientError::Config`] when the CA file does not load.
    pub fn with_options(base: impl Into<String>, o: &ClientOptions) -> Result<Self> {
        let token = o.token.as_deref();
        // Actions taken through this client are recorded as `cli:USER` in the audit log (under
        // auth, as the token's name).
        let user = std::env::var("USER").unwrap_or_else(|_| "unknown".into());
        let mut headers = reqwest::header::HeaderMap::new();
        if let Ok(v) = reqwest::header::HeaderValue::from_str(&format!("cli:{user}")) {
            headers.insert("x-docket-actor", v);
        }
        if let Some(Ok(mut v)) =
            token.map(|t| reqwest::header::HeaderValue::from_str(&format!("Bearer {}", t.trim())))
        {
            v.set_sensitive(true);
            headers.insert(reqwest::header::AUTHORIZATION, v);
        }
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(64)
            .default_headers(headers)
            .use_preconfigured_tls(tls_config(o.ca_file.as_deref())?)
            .build()
            .map_err(|e| ClientError::Config(format!("cannot set up the HTTP client: {e}")))?;
        Ok(Client {
            base: base.into().trim_end_matches('/').to_string(),
            http,
        })
    }

    /// A name as one URL path segment: every byte but unreserved ones percent-encoded, so a
    /// queue named `a/b` or `x?y` reaches its own route.
    pub fn seg(name: &str) -> String {
        const SET: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
            .remove(b'-')
            .remove(b'_')
            .remove(b'.')
            .remove(b'~');
        percent_encoding::utf8_percent_encode(name, SET).to_string()
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    async fn send<T: DeserializeOwned>(&self, req: reqwest::RequestBuilder) -> Result<T> {
        let resp = req.send().await?;
        let status = resp.status();
        if status == reqwest::StatusCode::NO_CONTENT {
            return serde_json::from_value(Value::Null)
                .map_err(|e| ClientError::Decode(e.to_string()));
        }
        if status.is_success() {
            return Ok(resp.json().await?);
        }
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        let mut message = body["error"]["message"]
            .as_str()
            .unwrap_or("no message")
            .to_string();
        if let Some(d) = body["error"].get("details") {
            message = format!("{message}: {d}");
        }
        Err(ClientError::Api {
            status: status.as_u16(),
            code: body["error"]["code"]
                .as_str()
                .unwrap_or("unknown")
                .to_string(),
            message,
        })
    }

    /// `POST /v1/tasks` with many tasks (one transaction).
    ///
    /// # Errors
    /// API errors (`invalid_task`, …) and transport errors.
    pub async fn task_add_many(&self, tasks: &[NewTask]) -> Result<Vec<Task>> {
        #[derive(Deserialize)]
        struct R {
            tasks: Vec<Task>,
        }
        let r: R = self
            .send(
                self.http
                    .post(self.url("/v1/tasks"))
                    .json(&json!({"tasks": tasks})),
            )
            .await?;
        Ok(r.tasks)
    }

    /// `POST /v1/tasks` with one task.
    ///
    /// # Errors
    /// API and transport errors.
    pub async fn task_add(&self, task: &NewTask) -> Result<Task> {
        self.send(self.http.post(self.url("/v1/tasks")).json(task))
            .await
    }

    /// `GET /v1/tasks/{id}`.
    ///
    /// # Errors
    /// `not_found`, transport errors.
    pub async fn task_get(&self, id: i64) -> Result<Task> {
        self.send(self.http.get(self.url(&format!("/v1/tasks/{id}"))))
            .await
    }

    /// `PATCH /v1/tasks/{id}`: changes a waiting task (or a running one's payload/progress
    /// with its lease); `if_match` applies it only at that version (the task's `ETag`).
    ///
    /// # Errors
    /// `invalid_request`, `invalid_state`, `version_mismatch`, `not_found`, transport errors.
    pub async fn task_update(
        &self,
        id: i64,
        patch: &docket_core::patch::TaskPatch,
        if_match: Option<&str>,
    ) -> Result<Task> {
        let mut req = self
            .http
            .patch(self.url(&format!("/v1/tasks/{id}")))
            .json(patch);
        if let Some(v) = if_match {
            req = req.header(reqwest::header::IF_MATCH, format!("\"{v}\""));
        }
        self.send(req).await
    }

    /// `POST /v1/workers/{name}/report`.
    ///
    /// # Errors
    /// `invalid_request`, auth and transport errors.
    pub async fn worker_report(
        &self,
        name: &str,
        report: &docket_core::api::WorkerReport,
    ) -> Result<docket_core::api::WorkerView> {
        self.send(
            self.http
                .post(self.url(&format!("/v1/workers/{}/report", Self::seg(name))))
                .json(report),
        )
        .await
    }

    /// `GET /v1/workers`.
    ///
    /// # Errors
    /// API and transport errors.
    pub async fn worker_list(&self) -> Result<docket_core::api::WorkerList> {
        self.send(self.http.get(self.url("/v1/workers"))).await
    }

    /// `GET /v1/tasks`.
    ///
    /// # Errors
    /// API and transport errors.
    pub async fn task_list(&self, f: &ListFilter) -> Result<TaskPage> {
        let mut q: Vec<(&str, String)> = vec![];
        if let Some(v) = &f.queue {
            q.push(("queue", v.clone()));
        }
        if let Some(v) = &f.state {
            q.push(("state", v.clone()));
        }
        if let Some(v) = &f.kind {
            q.push(("kind", v.clone()));
        }
        if let Some(v) = f.limit {
            q.push(("limit", v.to_string()));
        }
        if let Some(v) = f.after {
            q.push(("after", v.to_string()));
        }
        if f.descending {
            q.push(("order", "desc".into()));
        }
        if let Some(v) = &f.text {
            q.push(("text", v.clone()));
        }
        for (k, v) in [
            ("user_id", &f.user_id),
            ("trace_id", &f.trace_id),
            ("unique_key", &f.unique_key),
            ("worker", &f.worker),
        ] {
            if let Some(v) = v {
                q.push((k, v.clone()));
            }
        }
        self.send(self.http.get(self.url("/v1/tasks")).query(&q))
            .await
    }

    /// `POST /v1/tasks/{id}/cancel`.
    ///
    /// # Errors
    /// `not_found`, `invalid_state`, transport errors.
    pub async fn task_cancel(&self, id: i64) -> Result<Task> {
        self.send(self.http.post(self.url(&format!("/v1/tasks/{id}/cancel"))))
            .await
    }

    /// `POST /v1/tasks/{id}/retry`.
    ///
    /// # Errors
    /// `not_found`, `invalid_state`, `conflict`, transport errors.
    pub async fn task_retry(&self, id: i64) -> Result<Task> {
        self.send(self.http.post(self.url(&format!("/v1/tasks/{id}/retry"))))
            .await
    }

    /// `POST /v1/tasks/bulk` with `dry_run`: how many tasks `action` would change over
    /// `filter` now, and whether more matched than counted (100,000 unless the filter is by
    /// queue and state only).
    ///
    /// # Errors
    /// `invalid_request` (a bad filter, or one naming no state the action changes), transport
    /// errors.
    pub async fn task_bulk_count(
        &self,
        action: docket_core::bulk::BulkAction,
        filter: &docket_core::bulk::BulkFilter,
    ) -> Result<(i64, bool)> {
        let v: Value = self
            .send(
                self.http.post(self.url("/v1/tasks/bulk")).json(
                    &serde_json::json!({"action": action, "filter": filter, "dry_run": true}),
                ),
            )
            .await?;
        Ok((
            v["total"].as_i64().unwrap_or(0),
            v["more"].as_bool().unwrap_or(false),
        ))
    }

    /// `POST /v1/tasks/bulk`: `action` over every task `filter` matches now, in the background
    /// (admin). Poll [`Client::task_bulk_get`].
    ///
    /// # Errors
    /// `invalid_request`, `forbidden` (not an admin token), transport errors.
    pub async fn task_bulk(
        &self,
        action: docket_core::bulk::BulkAction,
        filter: &docket_core::bulk::BulkFilter,
    ) -> Result<docket_core::bulk::BulkJob> {
        self.send(
            self.http
                .post(self.url("/v1/tasks/bulk"))
                .json(&serde_json::json!({"action": action, "filter": filter})),
        )
        .await
    }

    /// `GET /v1/tasks/bulk/{id}`: a bulk action's progress.
    ///
    /// # Errors
    /// `not_found`, transport errors.
    pub async fn task_bulk_get(&self, id: i64) -> Result<docket_core::bulk::BulkJob> {
        self.send(self.http.get(self.url(&format!("/v1/tasks/bulk/{id}"))))
            .await
    }

    /// `POST /v1/queues/{queue}/claim`: up to `limit` tasks (of `kinds` only, when not empty),
    /// long-polling up to `wait`.
    ///
    /// # Errors
    /// API and transport errors.
    pub async fn claim(
        &self,
        queue: &str,
        worker: &str,
        kinds: &[String],
        limit: usize,
        lease: Duration,
        wait: Duration,
    ) -> Result<Vec<Task>> {
        self.claim_stages(queue, worker, kinds, &[], limit, lease, wait)
            .await
    }

    /// [`Client::claim`] of only the tasks at one of `stages` (empty: any stage; asyncflow's
    /// task_stage).
    ///
    /// # Errors
    /// `unauthenticated`, `forbidden`, `invalid_request`, transport errors.
    #[allow(clippy::too_many_arguments)]
    pub async fn claim_stages(
        &self,
        queue: &str,
        worker: &str,
        kinds: &[String],
        stages: &[String],
        limit: usize,
        lease: Duration,
        wait: Duration,
    ) -> Result<Vec<Task>> {
        let body = ClaimRequest {
            kinds: (!kinds.is_empty()).then(|| kinds.to_vec()),
            stages: (!stages.is_empty()).then(|| stages.to_vec()),
            worker: worker.to_string(),
            limit: Some(i64::try_from(limit).unwrap_or(i64::MAX)),
            lease: Some(lease),
            wait: Some(wait),
            claim_id: None,
        };
        self.claim_with(queue, &body).await
    }

    /// `POST /v1/queues/{queue}/claim` with the whole request; give it a `claim_id` (a random
    /// UUID) to be able to [`Client::release_claim`] it should its answer never arrive.
    ///
    /// # Errors
    /// `unauthenticated`, `forbidden`, `invalid_request`, transport errors.
    pub async fn claim_with(&self, queue: &str, body: &ClaimRequest) -> Result<Vec<Task>> {
        let wait = body.wait.unwrap_or_default();
        let r: ClaimResponse = self
            .send(
                self.http
                    .post(self.url(&format!("/v1/queues/{}/claim", Self::seg(queue))))
                    .timeout(wait + Duration::from_secs(30))
                    .json(body),
            )
            .await?;
        Ok(r.tasks)
    }

    /// `POST /v1/queues/{queue}/claims/{claim_id}/release`: hands back what a claim sent with
    /// `claim_id` took (its answer never arrived): available at once, no attempt counted. The
    /// ids handed back.
    ///
    /// # Errors
    /// `invalid_request` (not a UUID), `forbidden`, transport errors.
    pub async fn release_claim(&self, queue: &str, claim_id: &str) -> Result<Vec<i64>> {
        let r: docket_core::api::ClaimReleased = self
            .send(self.http.post(self.url(&format!(
                "/v1/queues/{}/claims/{}/release",
                Self::seg(queue),
                Self::seg(claim_id)
            ))))
            .await?;
        Ok(r.released)
    }

    /// `POST /v1/tasks/release`: hands back tasks held but not started, `(id, lease)` pairs;
    /// one outcome per item (`ok` or `lease_lost`).
    ///
    /// # Errors
    /// `invalid_request`, transport errors.
    pub async fn release_many(&self, items: &[(i64, String)]) -> Result<Vec<ItemOutcome>> {
        let body = BatchRequest {
            items: items
                .iter()
                .map(|(id, lease)| docket_core::api::ReleaseItem {
                    id: *id,
                    lease: lease.clone(),
                })
                .collect(),
        };
        let r: BatchResponse = self
            .send(self.http.post(self.url("/v1/tasks/release")).json(&body))
            .await?;
        Ok(r.results)
    }

    /// `POST /v1/tasks/{id}/heartbeat`.
    ///
    /// # Errors
    /// `lease_lost`, `cancelled`, transport errors.
    pub async fn heartbeat(&self, id: i64, lease: &str, progress: Option<Value>) -> Result<Task> {
        let body = HeartbeatRequest {
            lease: lease.to_string(),
            progress,
            extend: None,
        };
        self.send(
            self.http
                .post(self.url(&format!("/v1/tasks/{id}/heartbeat")))
                .json(&body),
        )
        .await
    }

    /// `POST /v1/tasks/{id}/complete`.
    ///
    /// # Errors
    /// `lease_lost`, `cancelled`, transport errors.
    pub async fn complete(&self, id: i64, lease: &str, result: Value) -> Result<Finished> {
        let body = CompleteRequest {
            id: None,
            lease: lease.to_string(),
            result,
            ..Default::default()
        };
        self.complete_with(id, &body).await
    }

    /// `POST /v1/tasks/{id}/complete` with every field, e.g. `next_stage` to hand the task on
    /// to its next stage.
    ///
    /// # Errors
    /// `lease_lost`, `cancelled`, `invalid_request`, transport errors.
    pub async fn complete_with(&self, id: i64, body: &CompleteRequest) -> Result<Finished> {
        self.send(
            self.http
                .post(self.url(&format!("/v1/tasks/{id}/complete")))
                .json(&body),
        )
        .await
    }

    /// `POST /v1/tasks/complete`: many completions in one statement. Items: (id, lease,
    /// result). Returns the per-item results.
    ///
    /// # Errors
    /// API and transport errors.
    pub async fn complete_many(&self, items: &[(i64, String, Value)]) -> Result<Vec<ItemOutcome>> {
        let body = BatchRequest {
            items: items
                .iter()
                .map(|(id, lease, result)| CompleteRequest {
                    id: Some(*id),
                    lease: lease.clone(),
                    result: result.clone(),
                    ..Default::default()
                })
                .collect(),
        };
        let r: BatchResponse = self
            .send(self.http.post(self.url("/v1/tasks/complete")).json(&body))
            .await?;
        Ok(r.results)
    }

    /// `POST /v1/tasks/{id}/fail`.
    ///
    /// # Errors
    /// `lease_lost`, `cancelled`, transport errors.
    pub async fn fail(
        &self,
        id: i64,
        lease: &str,
        error: &str,
        worker: &str,
        retry_in: Option<Duration>,
        permanent: bool,
    ) -> Result<Finished> {
        let body = FailRequest {
            id: None,
            lease: lease.to_string(),
            error: error.to_string(),
            retry_in,
            permanent,
            worker: Some(worker.to_string()),
        };
        self.send(
            self.http
                .post(self.url(&format!("/v1/tasks/{id}/fail")))
                .json(&body),
        )
        .await
    }

    /// `GET /v1/queues`.
    ///
    /// # Errors
    /// Transport errors.
    pub async fn queue_list(&self) -> Result<Vec<QueueStats>> {
        #[derive(Deserialize)]
        struct R {
            queues: Vec<QueueStats>,
        }
        let r: R = self.send(self.http.get(self.url("/v1/queues"))).await?;
        Ok(r.queues)
    }

    /// `GET /v1/queues/{queue}`.
    ///
    /// # Errors
    /// Transport errors.
    pub async fn queue_get(&self, queue: &str) -> Result<QueueStats> {
        self.send(
            self.http
                .get(self.url(&format!("/v1/queues/{}", Self::seg(queue)))),
        )
        .await
    }

    /// `PUT /v1/queues/{queue}`.
    ///
    /// # Errors
    /// `invalid_request`, transport errors.
    pub async fn queue_put(&self, queue: &str, s: &QueueSettings) -> Result<QueueStats> {
        self.send(
            self.http
                .put(self.url(&format!("/v1/queues/{}", Self::seg(queue))))
                .json(s),
        )
        .await
    }

    /// `POST /v1/queues/{queue}/pause` or `/resume`.
    ///
    /// # Errors
    /// Transport errors.
    pub async fn queue_set_paused(&self, queue: &str, paused: bool) -> Result<QueueStats> {
        let verb = if paused { "pause" } else { "resume" };
        self.send(
            self.http
                .post(self.url(&format!("/v1/queues/{}/{verb}", Self::seg(queue)))),
        )
        .await
    }

    /// `GET /v1/nodes`.
    ///
    /// # Errors
    /// Transport errors.
    pub async fn node_list(&self) -> Result<Vec<NodeView>> {
        let r: NodeList = self.send(self.http.get(self.url("/v1/nodes"))).await?;
        Ok(r.nodes)
    }

    /// `POST /v1/nodes/{name}/drain`: `{"node", "draining", "moved"}`.
    ///
    /// # Errors
    /// `not_found`, transport errors.
    pub async fn node_drain(&self, name: &str, to: Option<&str>) -> Result<serde_json::Value> {
        self.send(
            self.http
                .post(self.url(&format!("/v1/nodes/{}/drain", Self::seg(name))))
                .json(&serde_json::json!({"to": to})),
        )
        .await
    }

    /// `POST /v1/nodes/{name}/resume`.
    ///
    /// # Errors
    /// `not_found`, transport errors.
    pub async fn node_resume(&self, name: &str) -> Result<serde_json::Value> {
        self.send(
            self.http
                .post(self.url(&format!("/v1/nodes/{}/resume", Self::seg(name)))),
        )
        .await
    }
}

impl Client {
    /// `PUT /v1/namespaces/{ns}`: create or replace a namespace.
    ///
    /// # Errors
    /// `invalid_request`, transport errors.
    pub async fn namespace_put(&self, ns: &str, config: &NamespaceConfig) -> Result<NamespaceView> {
        self.send(
            self.http
                .put(self.url(&format!("/v1/namespaces/{}", Self::seg(ns))))
                .json(config),
        )
        .await
    }

    /// `GET /v1/namespaces`.
    ///
    /// # Errors
    /// Transport errors.
    pub async fn namespace_list(&self) -> Result<Vec<NamespaceView>> {
        let l: NamespaceList = self.send(self.http.get(self.url("/v1/namespaces"))).await?;
        Ok(l.namespaces)
    }

    /// `POST /v1/namespaces/{ns}/processes` (progressor's init): creates process `req.id` and
    /// runs its init step; answers the processor's response. Synchronous: waits up to the
    /// namespace's step timeout.
    ///
    /// # Errors
    /// `processor_error`, `process_exists`, `namespace_not_found`, `timeout`, transport errors.
    pub async fn process_init(&self, ns: &str, req: &ProcessInitRequest) -> Result<Value> {
        let path = format!("/v1/namespaces/{}/processes", Self::seg(ns));
        let r: ProcessResponse = self
            .send(
                self.http
                    .post(self.url(&path))
                    .timeout(Duration::from_secs(3600))
                    .json(req),
            )
            .await?;
        Ok(r.response)
    }

    /// `POST /v1/namespaces/{ns}/processes/{id}/call`, or `…/repair` when `repair`; answers the
    /// processor's response.
    ///
    /// # Errors
    /// `processor_error`, `process_not_running` / `process_is_running`, `process_not_found`,
    /// `timeout`, transport errors.
    pub async fn process_call(
        &self,
        ns: &str,
        id: &str,
        req: &ProcessCallRequest,
        repair: bool,
    ) -> Result<Value> {
        let verb = if repair { "repair" } else { "call" };
        let path = format!(
            "/v1/namespaces/{}/processes/{}/{verb}",
            Self::seg(ns),
            Self::seg(id)
        );
        let r: ProcessResponse = self
            .send(
                self.http
                    .post(self.url(&path))
                    .timeout(Duration::from_secs(3600))
                    .json(req),
            )
            .await?;
        Ok(r.response)
    }

    /// `POST /v1/namespaces/{ns}/processes/{id}/simple-repair`: an `error` process back to
    /// `running` without calling the processor.
    ///
    /// # Errors
    /// `process_is_running`, `process_not_found`, transport errors.
    pub async fn process_simple_repair(&self, ns: &str, id: &str) -> Result<Process> {
        let path = format!(
            "/v1/namespaces/{}/processes/{}/simple-repair",
            Self::seg(ns),
            Self::seg(id)
        );
        let r: ProcessRepaired = self.send(self.http.post(self.url(&path))).await?;
        Ok(r.process)
    }

    /// `GET /v1/namespaces/{ns}/processes/{id}` with a history range.
    ///
    /// # Errors
    /// `process_not_found`, transport errors.
    pub async fn process_get(
        &self,
        ns: &str,
        id: &str,
        range: &HistoryRange,
    ) -> Result<ProcessView> {
        let mut q: Vec<(&str, String)> = vec![];
        if let Some(o) = range.offset {
            q.push(("offset", o.to_string()));
        }
        if let Some(l) = range.limit {
            q.push(("limit", l.to_string()));
        }
        if range.direction == Direction::Backward {
            q.push(("direction", "backward".into()));
        }
        self.send(
            self.http
                .get(self.url(&format!(
                    "/v1/namespaces/{}/processes/{}",
                    Self::seg(ns),
                    Self::seg(id)
                )))
                .query(&q),
        )
        .await
    }

    /// `GET /v1/namespaces/{ns}/processes`: a page of processes by id, optionally of one
    /// `status` (`init`, `running`, `error`), after the cursor `after`.
    ///
    /// # Errors
    /// `invalid_request`, transport errors.
    pub async fn process_list(
        &self,
        ns: &str,
        status: Option<&str>,
        after: Option<&str>,
        limit: i64,
    ) -> Result<ProcessPage> {
        let mut q = vec![("limit", limit.to_string())];
        if let Some(st) = status {
            q.push(("status", st.to_string()));
        }
        if let Some(a) = after {
            q.push(("after", a.to_string()));
        }
        self.send(
            self.http
                .get(self.url(&format!("/v1/namespaces/{}/processes", Self::seg(ns))))
                .query(&q),
        )
        .await
    }

    /// `GET /v1/namespaces/{ns}/processes/{id}/trace`: every task of the process, oldest first,
    /// with the events each produced.
    ///
    /// # Errors
    /// `process_not_found`, transport errors.
    pub async fn process_trace(&self, ns: &str, id: &str) -> Result<Vec<TraceTask>> {
        let path = format!(
            "/v1/namespaces/{}/processes/{}/trace",
            Self::seg(ns),
            Self::seg(id)
        );
        let t: ProcessTrace = self.send(self.http.get(self.url(&path))).await?;
        Ok(t.tasks)
    }
}

impl Client {
    /// `POST /v1/schedules`: creates or replaces a schedule.
    ///
    /// # Errors
    /// `invalid_schedule`, `invalid_request`, transport errors.
    pub async fn schedule_put(&self, spec: &ScheduleSpec) -> Result<Schedule> {
        self.send(self.http.post(self.url("/v1/schedules")).json(spec))
            .await
    }

    /// `GET /v1/schedules`.
    ///
    /// # Errors
    /// Transport errors.
    pub async fn schedule_list(&self) -> Result<Vec<Schedule>> {
        let l: ScheduleList = self.send(self.http.get(self.url("/v1/schedules"))).await?;
        Ok(l.schedules)
    }

    /// `GET /v1/schedules/{name}`.
    ///
    /// # Errors
    /// `not_found`, transport errors.
    pub async fn schedule_get(&self, name: &str) -> Result<Schedule> {
        self.send(
            self.http
                .get(self.url(&format!("/v1/schedules/{}", Self::seg(name)))),
        )
        .await
    }

    /// `POST /v1/schedules/{name}/pause` or `…/resume`.
    ///
    /// # Errors
    /// `not_found`, transport errors.
    pub async fn schedule_set_paused(&self, name: &str, paused: bool) -> Result<Schedule> {
        let verb = if paused { "pause" } else { "resume" };
        self.send(
            self.http
                .post(self.url(&format!("/v1/schedules/{}/{verb}", Self::seg(name)))),
        )
        .await
    }

    /// `DELETE /v1/schedules/{name}` (its tasks stay).
    ///
    /// # Errors
    /// `not_found`, transport errors.
    pub async fn schedule_delete(&self, name: &str) -> Result<()> {
        let _: Value = self
            .send(
                self.http
                    .delete(self.url(&format!("/v1/schedules/{}", Self::seg(name)))),
            )
            .await?;
        Ok(())
    }
}

impl Client {
    /// `POST /v1/batches`: a batch, its tasks and callbacks, in one transaction.
    ///
    /// # Errors
    /// `invalid_request`, `invalid_task`, `payload_too_large`, transport errors.
    pub async fn batch_create(
        &self,
        b: &docket_core::batch::NewBatch,
    ) -> Result<docket_core::batch::BatchCreated> {
        self.send(self.http.post(self.url("/v1/batches")).json(b))
            .await
    }

    /// `POST /v1/batches/{id}/tasks`: adds tasks to a batch that has not settled (and seals it
    /// with `seal`).
    ///
    /// # Errors
    /// `not_found`, `conflict` (it settled), `invalid_task`, transport errors.
    pub async fn batch_add(
        &self,
        id: i64,
        add: &docket_core::batch::BatchAdd,
    ) -> Result<docket_core::batch::BatchCreated> {
        self.send(
            self.http
                .post(self.url(&format!("/v1/batches/{id}/tasks")))
                .json(add),
        )
        .await
    }

    /// `POST /v1/batches/{id}/seal`.
    ///
    /// # Errors
    /// `not_found`, `conflict` (it settled), transport errors.
    pub async fn batch_seal(&self, id: i64) -> Result<docket_core::batch::Batch> {
        self.send(self.http.post(self.url(&format!("/v1/batches/{id}/seal"))))
            .await
    }

    /// `GET /v1/batches/{id}`: the batch and its progress.
    ///
    /// # Errors
    /// `not_found`, transport errors.
    pub async fn batch_get(&self, id: i64) -> Result<docket_core::batch::Batch> {
        self.send(self.http.get(self.url(&format!("/v1/batches/{id}"))))
            .await
    }

    /// `GET /v1/batches`: newest first, ids below `before`.
    ///
    /// # Errors
    /// `invalid_request`, transport errors.
    pub async fn batch_list(
        &self,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<docket_core::batch::Batch>> {
        let mut q = vec![("limit", limit.to_string())];
        if let Some(b) = before {
            q.push(("before", b.to_string()));
        }
        let l: docket_core::batch::BatchList = self
            .send(self.http.get(self.url("/v1/batches")).query(&q))
            .await?;
        Ok(l.batches)
    }
}

impl Client {
    /// `PUT /v1/rate-limits/{name}` (needs `admin`): creates or replaces a rate limit.
    ///
    /// # Errors
    /// `invalid_request` (a bad name, limit or period), `forbidden`, transport errors.
    pub async fn rate_limit_put(
        &self,
        name: &str,
        spec: &docket_core::rate_limit::RateLimitSpec,
    ) -> Result<docket_core::rate_limit::RateLimit> {
        self.send(
            self.http
                .put(self.url(&format!("/v1/rate-limits/{}", Self::seg(name))))
                .json(spec),
        )
        .await
    }

    /// `GET /v1/rate-limits/{name}`: the limit and its totals.
    ///
    /// # Errors
    /// `not_found`, transport errors.
    pub async fn rate_limit_get(&self, name: &str) -> Result<docket_core::rate_limit::RateLimit> {
        self.send(
            self.http
                .get(self.url(&format!("/v1/rate-limits/{}", Self::seg(name)))),
        )
        .await
    }

    /// `GET /v1/rate-limits`: every limit, by name.
    ///
    /// # Errors
    /// Transport errors.
    pub async fn rate_limit_list(&self) -> Result<Vec<docket_core::rate_limit::RateLimit>> {
        let l: docket_core::rate_limit::RateLimitList = self
            .send(self.http.get(self.url("/v1/rate-limits")))
            .await?;
        Ok(l.rate_limits)
    }

    /// `DELETE /v1/rate-limits/{name}` (needs `admin`): its tasks run unlimited.
    ///
    /// # Errors
    /// `not_found`, `forbidden`, transport errors.
    pub async fn rate_limit_delete(&self, name: &str) -> Result<()> {
        let _: Value = self
            .send(
                self.http
                    .delete(self.url(&format!("/v1/rate-limits/{}", Self::seg(name)))),
            )
            .await?;
        Ok(())
    }
}

impl Client {
    /// `POST /v1/workflows`: tasks with dependencies, in one transaction.
    ///
    /// # Errors
    /// `invalid_request` (a cycle, an unknown or duplicate ref, …), `invalid_task`, transport
    /// errors.
    pub async fn workflow_create(
        &self,
        w: &docket_core::workflow::NewWorkflow,
    ) -> Result<docket_core::workflow::WorkflowCreated> {
        self.send(self.http.post(self.url("/v1/workflows")).json(w))
            .await
    }

    /// `GET /v1/workflows/{id}`.
    ///
    /// # Errors
    /// `not_found`, transport errors.
    pub async fn workflow_get(&self, id: i64) -> Result<docket_core::workflow::Workflow> {
        self.send(self.http.get(self.url(&format!("/v1/workflows/{id}"))))
            .await
    }

    /// `POST /v1/workflows/{id}/cancel`.
    ///
    /// # Errors
    /// `not_found`, transport errors.
    pub async fn workflow_cancel(&self, id: i64) -> Result<docket_core::workflow::Workflow> {
        self.send(
            self.http
                .post(self.url(&format!("/v1/workflows/{id}/cancel"))),
        )
        .await
    }

    /// `POST /v1/workflows/{id}/retry`: failed tasks run again, what they cancelled after them.
    ///
    /// # Errors
    /// `not_found`, transport errors.
    pub async fn workflow_retry(&self, id: i64) -> Result<docket_core::workflow::Workflow> {
        self.send(
            self.http
                .post(self.url(&format!("/v1/workflows/{id}/retry"))),
        )
        .await
    }

    /// `POST /v1/workflows/{id}/tasks`: tasks (and sub-workflows) added at run time.
    ///
    /// # Errors
    /// `invalid_request` (a cycle, an unknown ref, a ref the workflow has), `conflict` (settled),
    /// `not_found`, `invalid_task`, transport errors.
    pub async fn workflow_add(
        &self,
        id: i64,
        add: &docket_core::workflow::WorkflowAddition,
    ) -> Result<docket_core::workflow::WorkflowCreated> {
        self.send(
            self.http
                .post(self.url(&format!("/v1/workflows/{id}/tasks")))
                .json(add),
        )
        .await
    }
}

impl Client {
    /// `POST /v1/tokens` (needs `admin`): the new token, shown this once.
    ///
    /// # Errors
    /// `invalid_request`, `conflict` (a live token has the name), `forbidden`, transport errors.
    pub async fn token_create(
        &self,
        req: &docket_core::api::TokenCreateRequest,
    ) -> Result<docket_core::api::TokenCreated> {
        self.send(self.http.post(self.url("/v1/tokens")).json(req))
            .await
    }

    /// `GET /v1/tokens` (needs `admin`): every token, revoked ones included, never the secrets.
    ///
    /// # Errors
    /// `forbidden`, transport errors.
    pub async fn token_list(&self) -> Result<docket_core::api::TokenList> {
        self.send(self.http.get(self.url("/v1/tokens"))).await
    }

    /// `DELETE /v1/tokens/{name}` (needs `admin`): stops working at once on every node.
    ///
    /// # Errors
    /// `not_found` (no live token has the name), `forbidden`, transport errors.
    pub async fn token_revoke(&self, name: &str) -> Result<()> {
        let _: Value = self
            .send(
                self.http
                    .delete(self.url(&format!("/v1/tokens/{}", Self::seg(name)))),
            )
            .await?;
        Ok(())
    }
}

impl Client {
    /// `GET` a path of the API as JSON (for the CLI's read-only commands).
    ///
    /// # Errors
    /// API and transport errors.
    pub async fn get_json(&self, path: &str, query: &[(&str, String)]) -> Result<Value> {
        self.send(self.http.get(self.url(path)).query(query)).await
    }

    /// `POST` a JSON body to a path of the API.
    ///
    /// # Errors
    /// API and transport errors.
    pub async fn post_json(&self, path: &str, body: &Value) -> Result<Value> {
        self.send(self.http.post(self.url(path)).json(body)).await
    }

    /// `GET /v1/changes`: a stream that yields once per burst of task changes on the server.
    ///
    /// # Errors
    /// Transport errors and API errors opening the stream.
    pub async fn changes(
        &self,
    ) -> Result<impl futures::Stream<Item = ()> + Unpin + Send + 'static> {
        use futures::StreamExt;
        let resp = self.http.get(self.url("/v1/changes")).send().await?;
        if !resp.status().is_success() {
            return Err(ClientError::Decode(format!(
                "changes: HTTP {}",
                resp.status()
            )));
        }
        // Each `event: changed` block is one tick; keep-alive comments are skipped.
        Ok(Box::pin(resp.bytes_stream().filter_map(
            |chunk| async move {
                match chunk {
                    Ok(b) if b.windows(7).any(|w| w == b"changed") => Some(()),
                    _ => None,
                }
            },
        )))
    }

    /// `DELETE` a path of the API.
    ///
    /// # Errors
    /// API and transport errors.
    pub async fn delete(&self, path: &str) -> Result<Value> {
        self.send(self.http.delete(self.url(path))).await
    }

    /// `POST` to a path of the API without a body.
    ///
    /// # Errors
    /// API and transport errors.
    pub async fn post_empty(&self, path: &str) -> Result<Value> {
        self.send(self.http.post(self.url(path))).await
    }
}
