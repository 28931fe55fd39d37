//! Schedules.

use crate::{Client, Result};
use docket_core::api::ScheduleList;
use docket_core::{Schedule, ScheduleSpec};
use serde_json::Value;

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
