//! SQLite: queues: settings, counts, pause.

use super::*;

#[async_trait]
impl crate::driver::QueueDriver for SqliteStore {
    async fn queue_settings_many(
        &self,
        names: &[String],
    ) -> Result<HashMap<String, QueueSettings>> {
        let names_json = serde_json::to_string(names).expect("names serialise");
        let rows = sqlx::query(
            "SELECT * FROM docket_queues WHERE name IN (SELECT value FROM json_each(?))",
        )
        .bind(names_json)
        .fetch_all(&self.reader)
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get::<String, _>("name")?, queue_settings(r)?)))
            .collect()
    }
}
