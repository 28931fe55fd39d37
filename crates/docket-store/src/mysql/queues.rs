//! MySQL: queues: settings, counts, pause.

use super::*;

#[async_trait]
impl crate::driver::QueueDriver for MySqlStore {
    async fn queue_settings_many(
        &self,
        names: &[String],
    ) -> Result<HashMap<String, QueueSettings>> {
        if names.is_empty() {
            return Ok(HashMap::new());
        }
        let sql = format!(
            "SELECT * FROM docket_queues WHERE name IN ({})",
            marks(names.len())
        );
        let mut q = sqlx::query(&sql);
        for n in names {
            q = q.bind(n);
        }
        let rows = q.fetch_all(&self.pool).await?;
        rows.iter()
            .map(|r| Ok((text(r, "name")?, queue_settings(r)?)))
            .collect()
    }
}
