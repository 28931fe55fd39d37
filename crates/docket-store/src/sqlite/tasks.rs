//! SQLite: tasks: the insert and the list ([`crate::driver::TaskDriver`]); the rest is portable/tasks.rs.

use super::*;
use crate::{TaskInsertManyParams, TaskListParams};

#[async_trait]
impl crate::driver::TaskDriver for SqliteStore {
    async fn task_insert_many(&self, p: TaskInsertManyParams) -> Result<Vec<Task>> {
        // Row by row on the one writer: a statement is no round trip here.
        crate::portable::insert_each(self, p).await
    }

    async fn task_list_rows(&self, p: &TaskListParams, count: bool) -> Result<Vec<SqliteRow>> {
        let sql = crate::portable::list_sql(sql!(tasks, list), p, count, "");
        Ok(list_query(&sql, p).fetch_all(&self.reader).await?)
    }
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
