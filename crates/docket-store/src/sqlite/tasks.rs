//! SQLite: tasks: the insert and the list ([`crate::driver::TaskDriver`]); the rest is portable/tasks.rs.

use super::*;
use crate::TaskInsertManyParams;

#[async_trait]
impl crate::driver::TaskDriver for SqliteStore {
    async fn task_insert_many(&self, p: TaskInsertManyParams) -> Result<Vec<Task>> {
        // Row by row on the one writer: a statement is no round trip here.
        crate::portable::insert_each(self, p).await
    }
}
