//! A typed client of docket's HTTP API ([`Client`]) and the pull worker that runs a command per
//! task ([`command_worker`]).

mod batches;
mod claims;
mod cluster;
pub mod command_worker;
pub mod control;
mod processes;
mod queues;
mod rate_limits;
mod raw;
mod schedules;
mod tasks;
mod tokens;
mod workflow_runs;
mod workflows;

use serde::de::DeserializeOwned;
use serde_json::Value;

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

pub use docket_core::api::{
    Finished, ItemOutcome, NamespaceView, NodeView, ProcessCallRequest, ProcessInitRequest,
    ProcessPage, ProcessView, TaskPage, TraceTask,
};
pub use docket_core::process::{Direction, HistoryRange, NamespaceConfig, Process};
pub use docket_core::{Schedule, ScheduleSpec};
pub use tasks::ListFilter;

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
}
