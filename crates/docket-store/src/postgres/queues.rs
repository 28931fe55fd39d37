//! PostgreSQL: queues: settings, counts, pause.

use super::*;

#[async_trait]
impl crate::driver::QueueDriver for PgStore {
    async fn queue_settings_many(
        &self,
        names: &[String],
    ) -> Result<HashMap<String, QueueSettings>> {
        let rows = sqlx::query("SELECT * FROM docket_queues WHERE name = ANY($1)")
            .bind(names)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| Ok((r.try_get::<String, _>("name")?, queue_settings(r)?)))
            .collect()
    }
}
