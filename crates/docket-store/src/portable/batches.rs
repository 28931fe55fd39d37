//! Batches and workflows, written once over [`Driver`](crate::driver::Driver).

use super::prelude::*;

/// Waiting tasks from rows of `waiting` / `waiting_on` (one per dependency, by task id).
fn waiting_tasks<R: Cols>(rows: &[R]) -> Result<Vec<WaitingTask>> {
    let mut out: Vec<WaitingTask> = vec![];
    for r in rows {
        let id = r.int("id")?;
        let state = match r.text_opt("dep_state")? {
            Some(s) => Some(decode::state(&format!("task {id}'s dependency"), &s)?),
            None => None,
        };
        let dep = (state, r.flag("ignore_failure")?);
        match out.last_mut() {
            Some(w) if w.id == id => w.deps.push(dep),
            _ => out.push(WaitingTask {
                id,
                queue: r.text("queue")?,
                deps: vec![dep],
            }),
        }
    }
    Ok(out)
}

/// Inserts `tasks` as members of batch `id` in `tx`, in order.
async fn insert_members<T: DriverTx>(
    tx: &mut T,
    id: i64,
    tasks: &[ResolvedTask],
    now: Timestamp,
) -> Result<Vec<Task>> {
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        let mut t = t.clone();
        t.batch_id = Some(id);
        let task = tx.insert_task(&t, now).await?.ok_or_else(|| {
            StoreError::Conflict("a batch member was turned away by its unique_key".into())
        })?;
        out.push(task);
    }
    Ok(out)
}

/// Writes the refs and dependency edges of a workflow's new `tasks` (inserted in `tx`, in the
/// order of `refs` and `deps`); `existing` allows edges to tasks already in the workflow.
async fn insert_graph<T: DriverTx>(
    tx: &mut T,
    batch: i64,
    tasks: &[Task],
    refs: &[String],
    deps: &[Vec<(docket_core::workflow::Target, bool)>],
    existing: bool,
) -> Result<()> {
    use docket_core::workflow::Target;
    for (t, r) in tasks.iter().zip(refs) {
        tx.execute(stmt!(batches, add_ref), args![t.id, batch, r.as_str()])
            .await?;
    }
    for (t, deps) in tasks.iter().zip(deps) {
        for (target, ignore) in deps {
            let dep = match *target {
                Target::New(j) => tasks.get(j).map(|d| d.id).ok_or_else(|| {
                    StoreError::Invalid(format!("a dependency on task {j} of {}", tasks.len()))
                })?,
                Target::Existing(id) if existing => id,
                Target::Existing(id) => {
                    return Err(StoreError::Invalid(format!(
                        "a new workflow's task depends on task {id}, which is not in it"
                    )))
                }
            };
            tx.execute(stmt!(batches, add_dep), args![t.id, dep, *ignore])
                .await?;
        }
    }
    Ok(())
}

/// The members of batch `id` by state.
fn batch_counts<R: Cols>(rows: Vec<R>) -> Result<docket_core::batch::StateCounts> {
    let mut counts = docket_core::batch::StateCounts::new();
    for r in &rows {
        let state = r.text("state")?;
        let s = decode::state(&format!("batch member state {state:?}"), &state)?;
        counts.insert(s, r.int("n")?);
    }
    Ok(counts)
}

#[async_trait]
impl<D: Driver> BatchStore for D {
    async fn batch_create(&self, p: BatchCreateParams) -> Result<(Batch, Vec<Task>)> {
        let callbacks = serde_json::to_value(&p.callbacks).expect("callbacks serialise");
        let (id, tasks) = again(|| async {
            let mut tx = self.begin().await?;
            tx.execute(
                stmt!(batches, create),
                args![p.name.as_deref(), !p.open, &callbacks, p.now],
            )
            .await?;
            let id = tx
                .fetch_one(stmt!(batches, last_id), args![])
                .await?
                .ok_or_else(|| StoreError::Corrupt("a new batch has no id".into()))?
                .int("id")?;
            let tasks = insert_members(&mut tx, id, &p.tasks, p.now).await?;
            insert_graph(&mut tx, id, &tasks, &p.refs, &p.deps, false).await?;
            tx.commit().await?;
            Ok((id, tasks))
        })
        .await?;
        let batch = self
            .batch_get(id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("batch {id}")))?;
        Ok((batch, tasks))
    }

    async fn batch_add(&self, p: BatchAddParams) -> Result<(Batch, Vec<Task>)> {
        let tasks = again(|| async {
            let mut tx = self.begin().await?;
            let b = match tx.fetch_one(stmt!(batches, lock), args![p.id]).await? {
                Some(r) => row::batch(&r)?,
                None => return Err(StoreError::NotFound(format!("batch {}", p.id))),
            };
            if b.settled_at.is_some() {
                return Err(StoreError::Conflict(format!(
                    "batch {} has settled (its callbacks were enqueued): it takes no more tasks",
                    p.id
                )));
            }
            if !p.refs.is_empty() {
                // Under the lock: a ref another addition wrote since the engine read the graph.
                let have: std::collections::HashSet<String> = tx
                    .fetch(stmt!(batches, refs), args![p.id])
                    .await?
                    .iter()
                    .map(|r| r.text("ref"))
                    .collect::<Result<_>>()?;
                if let Some(r) = p.refs.iter().find(|r| have.contains(*r)) {
                    return Err(StoreError::Conflict(format!(
                        "workflow {} already has a task with ref {r:?}",
                        p.id
                    )));
                }
            }
            let tasks = insert_members(&mut tx, p.id, &p.tasks, p.now).await?;
            insert_graph(&mut tx, p.id, &tasks, &p.refs, &p.deps, true).await?;
            if p.seal && b.open {
                tx.execute(stmt!(batches, seal), args![p.id]).await?;
            }
            tx.commit().await?;
            Ok(tasks)
        })
        .await?;
        let batch = self
            .batch_get(p.id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("batch {}", p.id)))?;
        Ok((batch, tasks))
    }

    async fn batch_get(&self, id: i64) -> Result<Option<Batch>> {
        let Some(r) = self.fetch_one(stmt!(batches, get), args![id]).await? else {
            return Ok(None);
        };
        let b = row::batch(&r)?;
        let counts = batch_counts(self.fetch(stmt!(batches, counts), args![id]).await?)?;
        Ok(Some(b.with_counts(counts)))
    }

    async fn batch_list(&self, p: BatchListParams) -> Result<Vec<Batch>> {
        let rows = self
            .fetch(stmt!(batches, list), args![p.before, p.limit])
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let b = row::batch(r)?;
            let counts = batch_counts(self.fetch(stmt!(batches, counts), args![b.id]).await?)?;
            out.push(b.with_counts(counts));
        }
        Ok(out)
    }

    async fn batch_unsettled(&self, after: i64, limit: i64) -> Result<Vec<i64>> {
        let rows = self
            .fetch(stmt!(batches, unsettled), args![after, limit])
            .await?;
        rows.iter().map(|r| r.int("id")).collect()
    }

    async fn batch_settle(&self, p: BatchSettleParams) -> Result<Option<Batch>> {
        // Looked at first without the lock (SQLite's transaction takes the writer): a batch
        // with an unfinished member, the sweep's usual case, costs one indexed read.
        if self
            .fetch_one(stmt!(batches, unfinished), args![p.id])
            .await?
            .is_some()
        {
            return Ok(None);
        }
        // The callbacks' queue settings, for the rule to resolve them with.
        let Some(r) = self.fetch_one(stmt!(batches, get), args![p.id]).await? else {
            return Ok(None);
        };
        let spec = row::batch(&r)?;
        if spec.open || spec.settled_at.is_some() {
            return Ok(None);
        }
        let mut names: Vec<String> = docket_core::batch::CALLBACKS
            .iter()
            .filter_map(|c| spec.callbacks.get(c))
            .map(|t| t.queue_name().to_string())
            .collect();
        names.sort();
        names.dedup();
        let settings = QueueStore::queue_settings_many(self, &names).await?;
        again(|| async {
            let mut tx = self.begin().await?;
            let b = match tx.fetch_one(stmt!(batches, lock), args![p.id]).await? {
                Some(r) => row::batch(&r)?,
                None => return Ok(None),
            };
            if b.open || b.settled_at.is_some() {
                return Ok(None);
            }
            // Under the lock: a member added since the look above counts.
            if tx
                .fetch_one(stmt!(batches, unfinished), args![p.id])
                .await?
                .is_some()
            {
                return Ok(None);
            }
            let counts = batch_counts(tx.fetch(stmt!(batches, counts), args![p.id]).await?)?;
            let b = b.with_counts(counts);
            let limit = docket_core::batch::MAX_FAILED_IDS as i64 + 1;
            let failed = tx
                .fetch(stmt!(batches, failed), args![p.id, limit])
                .await?
                .iter()
                .map(|r| r.int("id"))
                .collect::<Result<Vec<_>>>()?;
            let mut fired = std::collections::BTreeMap::new();
            for (name, t) in (p.rule)(&b, &failed, &settings)? {
                let task = tx.insert_task(&t, p.now).await?.ok_or_else(|| {
                    StoreError::Conflict(format!("callback {name} turned away by a unique key"))
                })?;
                fired.insert(name, task.id);
            }
            let fired_json = serde_json::to_value(&fired).expect("fired serialises");
            let n = tx
                .execute(stmt!(batches, settle), args![p.id, p.now, &fired_json])
                .await?;
            if n != 1 {
                return Ok(None);
            }
            tx.commit().await?;
            Ok(Some(Batch {
                settled_at: Some(p.now),
                fired,
                ..b
            }))
        })
        .await
    }

    async fn workflow_waiting(&self, batch_id: i64) -> Result<Vec<WaitingTask>> {
        let wait = docket_core::workflow::waiting_run_at();
        let rows = self
            .fetch(stmt!(batches, waiting), args![batch_id, wait])
            .await?;
        waiting_tasks(&rows)
    }

    async fn workflow_waiting_on(&self, finished: &[i64]) -> Result<Vec<WaitingTask>> {
        if finished.is_empty() {
            return Ok(vec![]);
        }
        let wait = docket_core::workflow::waiting_run_at();
        let ids = serde_json::Value::from(finished.to_vec());
        let rows = self
            .fetch(stmt!(batches, waiting_on), args![&ids, wait])
            .await?;
        waiting_tasks(&rows)
    }

    async fn workflow_apply(&self, p: WorkflowApplyParams) -> Result<WorkflowApplied> {
        let wait = docket_core::workflow::waiting_run_at();
        again(|| async {
            let mut tx = self.begin().await?;
            let mut out = WorkflowApplied::default();
            for id in &p.release {
                let n = tx
                    .execute(stmt!(batches, release), args![*id, p.now, wait])
                    .await?;
                if n == 1 {
                    out.released.push(*id);
                }
            }
            for id in &p.cancel {
                out.cancelled += tx
                    .execute(stmt!(batches, cancel_waiting), args![*id, p.now, wait])
                    .await?;
            }
            tx.commit().await?;
            Ok(out)
        })
        .await
    }

    async fn workflow_retry(&self, p: WorkflowRetryParams) -> Result<WorkflowRetried> {
        let wait = docket_core::workflow::waiting_run_at();
        again(|| async {
            let mut tx = self.begin().await?;
            if tx
                .fetch_one(stmt!(batches, lock), args![p.id])
                .await?
                .is_none()
            {
                return Err(StoreError::NotFound(format!("workflow {}", p.id)));
            }
            let mut out = WorkflowRetried::default();
            let all: Vec<i64> = p.run.iter().chain(&p.wait).copied().collect();
            tx.unarchive(&all).await?;
            for id in &p.run {
                let Some(q) = tx
                    .fetch_one(stmt!(batches, retry_queue), args![*id])
                    .await?
                else {
                    continue;
                };
                if tx
                    .execute(stmt!(batches, retry_run), args![*id, p.now])
                    .await?
                    == 1
                {
                    out.run.push((*id, q.text("queue")?));
                }
            }
            for id in &p.wait {
                out.waiting += tx
                    .execute(stmt!(batches, retry_wait), args![*id, p.now, wait])
                    .await?;
            }
            if !out.run.is_empty() || out.waiting > 0 {
                tx.execute(stmt!(batches, unsettle), args![p.id]).await?;
                let mut queues: Vec<String> = out.run.iter().map(|(_, q)| q.clone()).collect();
                queues.sort();
                queues.dedup();
                tx.wake(&queues).await?;
            }
            tx.commit().await?;
            Ok(out)
        })
        .await
    }

    async fn workflow_graph(
        &self,
        batch_id: i64,
    ) -> Result<Vec<docket_core::workflow::WorkflowNode>> {
        use docket_core::workflow::{Dependency, WorkflowNode};
        let wait = docket_core::workflow::waiting_run_at();
        let nodes = self.fetch(stmt!(batches, nodes), args![batch_id]).await?;
        let edges = self.fetch(stmt!(batches, edges), args![batch_id]).await?;
        let mut by_task: HashMap<i64, Vec<Dependency>> = HashMap::new();
        for e in &edges {
            let target = e.text("ref")?;
            by_task
                .entry(e.int("task_id")?)
                .or_default()
                .push(if e.flag("ignore_failure")? {
                    Dependency::Edge {
                        target,
                        ignore_failure: true,
                    }
                } else {
                    Dependency::Ref(target)
                });
        }
        nodes
            .iter()
            .map(|n| {
                let id = n.int("id")?;
                let state = decode::state(&format!("task {id}"), &n.text("state")?)?;
                Ok(WorkflowNode {
                    reference: n.text("ref")?,
                    id,
                    kind: n.text("kind")?,
                    waiting: state == TaskState::Scheduled && n.time("run_at")? == wait,
                    state,
                    depends_on: by_task.remove(&id).unwrap_or_default(),
                })
            })
            .collect()
    }

    async fn workflow_dep_results_many(
        &self,
        task_ids: &[i64],
    ) -> Result<Vec<(i64, String, Option<serde_json::Value>)>> {
        if task_ids.is_empty() {
            return Ok(vec![]);
        }
        let ids = serde_json::Value::from(task_ids.to_vec());
        let rows = self.fetch(stmt!(batches, dep_results), args![&ids]).await?;
        rows.iter()
            .map(|r| Ok((r.int("task_id")?, r.text("ref")?, r.json_opt("result")?)))
            .collect()
    }
}
