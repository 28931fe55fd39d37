//! SQLite: tasks: the insert and the list ([`crate::driver::TaskDriver`]); the rest is portable/tasks.rs.

use super::*;

#[async_trait]
impl crate::driver::TaskDriver for SqliteStore {
    async fn task_insert_many(&self, p: TaskInsertManyParams) -> Result<Vec<Task>> {
        // Row by row on the one writer: a statement is no round trip here.
        crate::portable::insert_each(self, p).await
    }

    async fn task_list(&self, p: TaskListParams) -> Result<Vec<Task>> {
        let rows = list_query(&list_sql(&p), &p)
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(decode).collect()
    }

    async fn task_count(&self, p: TaskListParams) -> Result<i64> {
        let sql = format!("SELECT count(*) FROM ({}) x", list_sql(&p));
        let row = list_query(&sql, &p).fetch_one(&self.reader).await?;
        Ok(row.try_get::<i64, _>(0)?)
    }
}

/// The list statement for `p`'s order.
fn list_sql(p: &TaskListParams) -> String {
    crate::sql::fill(sql!(tasks, list), &crate::portable::list_order(p))
}

/// `sql` (the list statement, or one wrapping it) with `p`'s filters bound.
fn list_query<'q>(
    sql: &'q str,
    p: &'q TaskListParams,
) -> sqlx::query::Query<'q, sqlx::Sqlite, sqlx::sqlite::SqliteArguments<'q>> {
    sqlx::query(sql)
        .bind(&p.queue)
        .bind((!p.states.is_empty()).then(|| {
            serde_json::json!(p.states.iter().map(|s| s.as_str()).collect::<Vec<_>>()).to_string()
        }))
        .bind(&p.kind)
        .bind(p.after)
        .bind(p.limit)
        .bind(&p.concurrency_key)
        .bind(&p.text)
        .bind(&p.user_id)
        .bind(&p.trace_id)
        .bind(&p.unique_key)
        .bind(&p.worker)
        .bind(p.min_id)
        .bind(p.max_id)
}
