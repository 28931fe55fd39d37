//! PostgreSQL: tasks: the insert and the list ([`crate::driver::TaskDriver`]); the rest is portable/tasks.rs.

use super::*;
use crate::TaskInsertManyParams;
use std::collections::HashMap;

#[async_trait]
impl crate::driver::TaskDriver for PgStore {
    async fn task_insert_many(&self, p: TaskInsertManyParams) -> Result<Vec<Task>> {
        let n = p.tasks.len();
        if n == 0 {
            return Ok(vec![]);
        }
        let mut tasks = p.tasks;
        // Payloads are moved out for binding and back afterwards: no deep copies.
        let payloads: Vec<Value> = tasks
            .iter_mut()
            .map(|t| std::mem::take(&mut t.payload))
            .collect();
        let mut conn = self.pool.acquire().await?;
        let rows = Self::insert_rows(&mut conn, &self.schema, &tasks, &payloads, p.now).await?;
        for (t, payload) in tasks.iter_mut().zip(payloads) {
            t.payload = payload;
        }
        // Identity values are taken in insertion (ordinality) order.
        let mut rows = rows;
        rows.sort_by_key(|r| r.0);
        if rows.len() == n {
            return Ok(tasks
                .into_iter()
                .zip(rows)
                .map(|(t, (id, _))| t.into_task(id, p.now))
                .collect());
        }
        // Some unique keys matched: the inserted rows are, in order, the inputs without a key
        // plus the first input of each new key; the rest answer with the existing task.
        let inserted_keys: std::collections::HashSet<String> =
            rows.iter().filter_map(|r| r.1.clone()).collect();
        let mut ids = rows.into_iter().map(|r| r.0);
        let mut first_of_key: HashMap<String, Task> = HashMap::new();
        let mut out = Vec::with_capacity(n);
        for t in tasks {
            match t.unique_key.clone() {
                None => {
                    let id = ids.next().ok_or_else(|| {
                        StoreError::Invalid("insert returned fewer rows than expected".into())
                    })?;
                    out.push(t.into_task(id, p.now));
                }
                Some(k) if inserted_keys.contains(&k) && !first_of_key.contains_key(&k) => {
                    let id = ids.next().ok_or_else(|| {
                        StoreError::Invalid("insert returned fewer rows than expected".into())
                    })?;
                    let task = t.into_task(id, p.now);
                    first_of_key.insert(k, task.clone());
                    out.push(task);
                }
                Some(k) => {
                    let mut existing = match first_of_key.get(&k) {
                        Some(t) => t.clone(),
                        None => {
                            let sql = sql!(tasks, unfinished_by_unique_key);
                            let row = sqlx::query(sql)
                                .bind(&k)
                                .fetch_optional(&self.pool)
                                .await?
                                .ok_or_else(|| {
                                    StoreError::Conflict(format!(
                                        "unique_key {k:?} changed while inserting; try again"
                                    ))
                                })?;
                            decode(&row)?
                        }
                    };
                    existing.inserted = Some(false);
                    out.push(existing);
                }
            }
        }
        Ok(out)
    }
}
