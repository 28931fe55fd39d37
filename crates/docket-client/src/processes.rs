//! Process namespaces and their processes (init, call, repair, read, list, trace).

use crate::{Client, Result};
use docket_core::api::{
    NamespaceList, NamespaceView, ProcessCallRequest, ProcessInitRequest, ProcessPage,
    ProcessRepaired, ProcessResponse, ProcessTrace, ProcessView, TraceTask,
};
use docket_core::process::{Direction, HistoryRange, NamespaceConfig, Process};
use serde_json::Value;
use std::time::Duration;

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
