//! Task deletes, written once over [`Driver`](crate::driver::Driver).

use super::*;

/// [`TaskStore::task_delete`] on every backend: under the kept counts' lock, the finished
/// tasks among `ids` are locked, deleted and subtracted from the counts in one transaction.
///
/// # Errors
/// Database failure; nothing is deleted then.
pub(crate) async fn task_delete<D: Driver>(d: &D, ids: &[i64]) -> Result<u64> {
    if ids.is_empty() {
        return Ok(0);
    }
    let mut tx = d.begin().await?;
    let counted_to = counts_lock(&mut tx).await?;
    // MariaDB keeps finished tasks in docket_tasks_done (mysql 0004): back where the
    // statements look (a no-op elsewhere).
    tx.unarchive(ids).await?;
    let all = serde_json::Value::from(ids.to_vec());
    let rows = tx.fetch(stmt!(tasks, delete_lock), args![&all]).await?;
    let gone = pruned_rows(&rows)?;
    if !rows.is_empty() {
        let locked = rows
            .iter()
            .map(|r| r.int("id"))
            .collect::<Result<Vec<i64>>>()?;
        let locked = serde_json::Value::from(locked);
        tx.execute(stmt!(tasks, delete), args![&locked]).await?;
    }
    counts_forget(&mut tx, counted_to, &gone).await?;
    tx.commit().await?;
    Ok(gone.len() as u64)
}
