//! The processor client: POSTs a step to the namespace's processor (or calls an in-process
//! one), and the outbound allow-list that bounds where processors and webhooks may be sent to.

use docket_core::process::{NamespaceConfig, ProcessorReply, ProcessorRequest};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

/// An in-process processor (docket used as a library): a namespace whose processor URL is
/// `inproc:NAME` calls the processor registered under NAME instead of POSTing over HTTP. Same
/// contract: a [`ProcessorRequest`] in, a result or an error out.
#[async_trait::async_trait]
pub trait Processor: Send + Sync {
    /// Handles one init/call/repair/timeout.
    async fn process(&self, req: ProcessorRequest) -> ProcessorReply;
}

/// How this node reaches processors and webhooks: one HTTP client (redirects kept inside the
/// allow-list), the in-process processors registered here, and the allow-list itself.
#[derive(Clone)]
pub(super) struct ProcessorClient {
    /// For processors and webhooks.
    pub(super) http: reqwest::Client,
    processors: Arc<RwLock<HashMap<String, Arc<dyn Processor>>>>,
    outbound: Option<Arc<Vec<String>>>,
}

impl ProcessorClient {
    /// A client that may send anywhere.
    pub(super) fn new() -> Self {
        ProcessorClient {
            http: outbound_client(None),
            processors: Arc::default(),
            outbound: None,
        }
    }

    /// This client limited to `hosts` (the registered processors kept).
    pub(super) fn limited_to(&self, hosts: Vec<String>) -> Self {
        let hosts = Arc::new(hosts);
        ProcessorClient {
            http: outbound_client(Some(hosts.clone())),
            processors: self.processors.clone(),
            outbound: Some(hosts),
        }
    }

    /// Registers an in-process processor under `name`.
    pub(super) fn register(&self, name: &str, p: Arc<dyn Processor>) {
        self.processors
            .write()
            .expect("lock")
            .insert(name.to_string(), p);
    }

    pub(super) fn check_outbound(&self, url: &str) -> Result<(), String> {
        match &self.outbound {
            // An in-process processor sends nothing anywhere.
            Some(_) if url.starts_with("inproc:") => Ok(()),
            Some(a) => outbound_allowed(url, a),
            None => Ok(()),
        }
    }

    pub(super) async fn post(
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

pub(super) fn outbound_client(allowed: Option<Arc<Vec<String>>>) -> reqwest::Client {
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
