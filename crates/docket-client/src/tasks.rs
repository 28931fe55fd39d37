//! Tasks: add, read, list, change, cancel, retry, and bulk actions over a filter.

use crate::{Client, Result};
use docket_core::api::TaskPage;
use docket_core::{NewTask, Task};
use serde::Deserialize;
use serde_json::{json, Value};

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
    /// Only tasks with this tag.
    pub tag: Option<String>,
    /// Only tasks whose last attempt ran on this worker.
    pub worker: Option<String>,
}

impl Client {
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
            ("tag", &f.tag),
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
}
