//! MySQL: tasks: the insert and the list ([`crate::driver::TaskDriver`]); the rest is portable/tasks.rs.

use super::*;
use crate::TaskInsertManyParams;
use std::collections::HashMap;

#[async_trait]
impl crate::driver::TaskDriver for MySqlStore {
    async fn task_insert_many(&self, p: TaskInsertManyParams) -> Result<Vec<Task>> {
        if p.tasks.is_empty() {
            return Ok(vec![]);
        }
        // A deadlock or (Galera) a certification conflict or silent abort rolls the
        // transaction back whole: going again is safe and keeps them from reaching clients.
        let now = p.now;
        let (ids, mut held) = crate::driver::again(|| self.insert_once(&p)).await?;
        // What was stored is what was given: times are already whole microseconds.
        let out: Vec<Task> = p
            .tasks
            .into_iter()
            .zip(ids)
            .enumerate()
            .map(|(i, (t, id))| match id {
                Some(id) => Ok(t.into_task(id, now)),
                None => held
                    .remove(&i)
                    .ok_or_else(|| StoreError::Conflict("insert refused".into())),
            })
            .collect::<Result<_>>()?;
        self.wake_queues(
            out.iter()
                .filter(|t| t.inserted != Some(false) && t.state == TaskState::Available)
                .map(|t| &t.queue),
        );
        Ok(out)
    }
}

impl MySqlStore {
    /// One try of [`crate::driver::TaskDriver::task_insert_many`]: each task's id (`None` where
    /// its unique key was held) and the tasks that held them, by position.
    async fn insert_once(
        &self,
        p: &TaskInsertManyParams,
    ) -> Result<(Vec<Option<i64>>, HashMap<usize, Task>)> {
        let now = p.now;
        let mut tx = self.begin().await?;
        let existing = sql!(tasks, unfinished_by_unique_key);
        let mut ids: Vec<Option<i64>> = Vec::with_capacity(p.tasks.len());
        let mut held: HashMap<usize, Task> = HashMap::new();
        // Runs of tasks without a unique key go in multi-row statements (at most 1,000 rows
        // or ~4 MB of payload each); a task with a key goes alone, as it may be refused.
        let mut run: Vec<&ResolvedTask> = vec![];
        let mut run_bytes = 0;
        for (i, t) in p.tasks.iter().enumerate() {
            let batchable = t.unique_key.is_none() && self.consecutive_ids.is_some();
            if batchable {
                run_bytes += t.payload.to_string().len();
                run.push(t);
                if run.len() < 1000 && run_bytes < 4 << 20 && i + 1 < p.tasks.len() {
                    continue;
                }
            }
            if !run.is_empty() {
                let inc = self.consecutive_ids.unwrap_or(1);
                let got = Self::insert_batch(&mut tx, &run, now, inc).await?;
                ids.extend(got.into_iter().map(Some));
                run.clear();
                run_bytes = 0;
            }
            if batchable {
                continue;
            }
            match Self::insert_row(&mut tx, t, now).await? {
                Some(id) => ids.push(Some(id)),
                None => {
                    let r = sqlx::query(existing)
                        .bind(&t.unique_key)
                        .fetch_optional(&mut *tx)
                        .await?
                        .ok_or_else(|| StoreError::Conflict("insert refused".into()))?;
                    let mut t = decode(&r)?;
                    t.inserted = Some(false);
                    held.insert(i, t);
                    ids.push(None);
                }
            }
        }
        let tagged = ids
            .iter()
            .zip(&p.tasks)
            .filter_map(|(id, t)| id.map(|id| (id, t.tags.as_slice())));
        Self::tag(&mut tx, tagged).await?;
        self.commit(tx).await?;
        Ok((ids, held))
    }
}
