//! Workflows (issue 26 item 1): a batch whose tasks have refs and dependencies (rules:
//! [`docket_core::workflow`]). The engine releases a waiting task once its dependencies have
//! finished, or cancels it, in the same pass that settles batches ([`crate::batches`]): right
//! after this node completes, fails or cancels a task, and every second in any case.

use crate::{Engine, EngineError};
use docket_core::workflow::{decide, Decision, NewWorkflow, Workflow, WorkflowCreated};
use docket_core::{NewTask, TaskState};
use docket_store::{BatchCreateParams, WorkflowApplyParams};

/// Most release rounds in one pass over a workflow: each round lets a cancellation reach the
/// next level of dependants; what is left waits for the next pass.
const MAX_ROUNDS: usize = 64;

impl Engine {
    /// Creates a workflow: its tasks and their dependencies in one transaction (nothing is
    /// written when the graph or a task is bad). Tasks without dependencies start as any task;
    /// the others wait.
    ///
    /// # Errors
    /// [`EngineError::Invalid`] for a bad graph ([`docket_core::workflow::check`]) or callback,
    /// [`EngineError::InvalidTask`] / [`EngineError::Refused`] for a bad task (its index), store
    /// errors.
    pub async fn workflow_create(&self, w: NewWorkflow) -> Result<WorkflowCreated, EngineError> {
        let plan = docket_core::workflow::check(&w).map_err(EngineError::Invalid)?;
        let as_batch = docket_core::batch::NewBatch {
            name: w.name.clone(),
            tasks: vec![],
            callbacks: w.callbacks.clone(),
            open: true,
        };
        docket_core::batch::check(&as_batch).map_err(EngineError::Invalid)?;
        let now = self.clock.now();
        self.check_callbacks(&as_batch, now).await?;
        let (refs, tasks) = self.resolve_plan(plan.tasks, &plan.deps, now).await?;
        let deps = plan.deps;
        let (batch, out) = self
            .store
            .batch_create(BatchCreateParams {
                name: w.name,
                open: false,
                callbacks: w.callbacks,
                tasks,
                refs,
                deps,
                now,
            })
            .await?;
        self.inserted(&out);
        self.batches_known();
        let tasks = self.store.workflow_graph(batch.id).await?;
        Ok(WorkflowCreated {
            workflow: Workflow { batch, tasks },
            tasks: out,
        })
    }

    /// Resolves a plan's tasks (as `POST /v1/tasks` would) and makes those with dependencies
    /// wait; answers their refs too.
    async fn resolve_plan(
        &self,
        tasks: Vec<docket_core::workflow::WorkflowTask>,
        deps: &[Vec<(docket_core::workflow::Target, bool)>],
        now: docket_core::Timestamp,
    ) -> Result<(Vec<String>, Vec<docket_core::task::ResolvedTask>), EngineError> {
        let refs: Vec<String> = tasks.iter().map(|t| t.reference.clone()).collect();
        let specs: Vec<NewTask> = tasks.into_iter().map(|t| t.task).collect();
        let mut resolved = self.resolve_all(specs, now).await?;
        for (t, d) in resolved.iter_mut().zip(deps) {
            if !d.is_empty() {
                t.state = TaskState::Scheduled;
                t.run_at = docket_core::workflow::waiting_run_at();
            }
        }
        Ok((refs, resolved))
    }

    /// Adds tasks (and sub-workflows) to a workflow that has not settled — fan-out decided at
    /// run time, typically by one of its own tasks ([`docket_core::workflow::check_addition`]).
    /// Their dependencies may name the workflow's refs; one that already finished counts at
    /// once (the new task is released or cancelled before this returns). Audited as
    /// `workflow.add`.
    ///
    /// # Errors
    /// [`EngineError::NotFound`]; [`EngineError::Invalid`] for a bad graph or a ref the
    /// workflow has; [`EngineError::Conflict`] when the workflow has settled (every task
    /// finished and its callbacks fired: retry it first) or another addition took a ref;
    /// [`EngineError::InvalidTask`] for a bad task; store errors. Nothing is written then.
    pub async fn workflow_add(
        &self,
        actor: &str,
        id: i64,
        add: docket_core::workflow::WorkflowAddition,
    ) -> Result<WorkflowCreated, EngineError> {
        let graph = self.store.workflow_graph(id).await?;
        if graph.is_empty() {
            return Err(EngineError::NotFound(format!("workflow {id}")));
        }
        let existing: std::collections::HashMap<String, i64> =
            graph.into_iter().map(|n| (n.reference, n.id)).collect();
        let plan =
            docket_core::workflow::check_addition(&add, &existing).map_err(EngineError::Invalid)?;
        let now = self.clock.now();
        let (refs, tasks) = self.resolve_plan(plan.tasks, &plan.deps, now).await?;
        let n = tasks.len();
        let (_, out) = self
            .store
            .batch_add(docket_store::BatchAddParams {
                id,
                tasks,
                seal: false,
                refs,
                deps: plan.deps,
                now,
            })
            .await?;
        self.inserted(&out);
        self.batches_known();
        // A dependency that finished before the addition decides now, not at the sweep.
        self.workflow_step(id).await?;
        self.audit(
            actor,
            "workflow.add",
            &format!("workflow:{id}"),
            Some(serde_json::json!({"tasks": n})),
        )
        .await;
        let workflow = self
            .workflow_get(id)
            .await?
            .ok_or_else(|| EngineError::NotFound(format!("workflow {id}")))?;
        Ok(WorkflowCreated {
            workflow,
            tasks: out,
        })
    }

    /// Retries a workflow: its failed tasks (discarded, cancelled) run again — those without
    /// dependencies now, the others once their dependencies complete
    /// ([`docket_core::workflow::retry_plan`]) — so what a failure cancelled runs after what
    /// failed. Completed tasks are not run again. A settled workflow is unsettled: its
    /// callbacks fire again when it next finishes. Audited as `workflow.retry`.
    ///
    /// # Errors
    /// [`EngineError::NotFound`], store errors.
    pub async fn workflow_retry(&self, actor: &str, id: i64) -> Result<Workflow, EngineError> {
        let Some(w) = self.workflow_get(id).await? else {
            return Err(EngineError::NotFound(format!("workflow {id}")));
        };
        let plan = docket_core::workflow::retry_plan(&w.tasks);
        let done = self
            .store
            .workflow_retry(docket_store::WorkflowRetryParams {
                id,
                run: plan.run,
                wait: plan.wait,
                now: self.clock.now(),
            })
            .await?;
        for (_, q) in &done.run {
            self.waker.wake(q);
        }
        self.waker.changed();
        self.batches_known();
        // What waits again on tasks that completed is released now.
        self.workflow_step(id).await?;
        self.audit(
            actor,
            "workflow.retry",
            &format!("workflow:{id}"),
            Some(serde_json::json!({"run": done.run.len(), "waiting": done.waiting})),
        )
        .await;
        self.workflow_get(id)
            .await?
            .ok_or_else(|| EngineError::NotFound(format!("workflow {id}")))
    }

    /// A workflow: its batch and its graph; `None` for an unknown id (or a batch without refs).
    ///
    /// # Errors
    /// Store errors.
    pub async fn workflow_get(&self, id: i64) -> Result<Option<Workflow>, EngineError> {
        let Some(batch) = self.store.batch_get(id).await? else {
            return Ok(None);
        };
        let tasks = self.store.workflow_graph(id).await?;
        if tasks.is_empty() {
            return Ok(None);
        }
        Ok(Some(Workflow { batch, tasks }))
    }

    /// Cancels every unfinished task of a workflow (a running one is asked to stop, as a task
    /// cancel does); audited once as `workflow.cancel`.
    ///
    /// # Errors
    /// [`EngineError::NotFound`], store errors.
    pub async fn workflow_cancel(&self, actor: &str, id: i64) -> Result<Workflow, EngineError> {
        let Some(w) = self.workflow_get(id).await? else {
            return Err(EngineError::NotFound(format!("workflow {id}")));
        };
        let now = self.clock.now();
        let mut n = 0;
        let mut done = vec![];
        for node in w.tasks.iter().filter(|t| !t.state.is_finished()) {
            match self
                .store
                .task_cancel(docket_store::TaskCancelParams { id: node.id, now })
                .await
            {
                Ok(_) => {
                    n += 1;
                    done.push(node.id);
                }
                // Finished meanwhile: nothing to cancel.
                Err(docket_store::StoreError::InvalidState(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        self.waker.changed();
        self.tasks_finished(done);
        self.batches_poke();
        self.audit(
            actor,
            "workflow.cancel",
            &format!("workflow:{id}"),
            Some(serde_json::json!({"cancelled": n})),
        )
        .await;
        self.workflow_get(id)
            .await?
            .ok_or_else(|| EngineError::NotFound(format!("workflow {id}")))
    }

    /// Releases or cancels the waiting tasks of batch `id` whose dependencies decide it
    /// ([`decide`]; a pruned dependency counts as failed), round after round while
    /// cancellations reach further dependants. Returns how many tasks changed.
    ///
    /// # Errors
    /// Store errors.
    pub async fn workflow_step(&self, id: i64) -> Result<u64, EngineError> {
        let mut changed = 0;
        for _ in 0..MAX_ROUNDS {
            let waiting = self.store.workflow_waiting(id).await?;
            let (n, cancelled) = self.decide_waiting(&waiting).await?;
            changed += n;
            if cancelled.is_empty() {
                break;
            }
        }
        Ok(changed)
    }

    /// As [`Engine::workflow_step`], for the waiting tasks that depend on `finished` (tasks
    /// that just finished), then on what that cancelled, and so on.
    ///
    /// # Errors
    /// Store errors.
    pub async fn workflow_after(&self, finished: &[i64]) -> Result<u64, EngineError> {
        let mut changed = 0;
        let mut ids = finished.to_vec();
        for _ in 0..MAX_ROUNDS {
            if ids.is_empty() {
                break;
            }
            let waiting = self.store.workflow_waiting_on(&ids).await?;
            let (n, cancelled) = self.decide_waiting(&waiting).await?;
            changed += n;
            ids = cancelled;
        }
        Ok(changed)
    }

    /// Decides each waiting task and applies the releases and cancels; returns how many changed
    /// and the ids cancelled (their dependants are next).
    async fn decide_waiting(
        &self,
        waiting: &[docket_store::WaitingTask],
    ) -> Result<(u64, Vec<i64>), EngineError> {
        {
            let mut p = WorkflowApplyParams {
                now: self.clock.now(),
                ..Default::default()
            };
            let mut queues = vec![];
            for w in waiting {
                let deps: Vec<(TaskState, bool)> = w
                    .deps
                    .iter()
                    .map(|(s, i)| (s.unwrap_or(TaskState::Cancelled), *i))
                    .collect();
                match decide(&deps) {
                    Decision::Wait => {}
                    Decision::Release => {
                        p.release.push(w.id);
                        queues.push(w.queue.as_str());
                    }
                    Decision::Cancel => p.cancel.push(w.id),
                }
            }
            if p.release.is_empty() && p.cancel.is_empty() {
                return Ok((0, vec![]));
            }
            let cancelled = p.cancel.clone();
            let done = self.store.workflow_apply(p).await?;
            queues.sort_unstable();
            queues.dedup();
            for q in queues {
                self.waker.wake(q);
            }
            self.waker.changed();
            let cancelled = if done.cancelled > 0 {
                cancelled
            } else {
                vec![]
            };
            Ok((done.released.len() as u64 + done.cancelled, cancelled))
        }
    }

    /// Fills `deps` of claimed workflow tasks with their dependencies' results, read in one
    /// query for the whole claim.
    ///
    /// # Errors
    /// Store errors.
    pub(crate) async fn attach_deps(
        &self,
        tasks: &mut [docket_core::Task],
    ) -> Result<(), EngineError> {
        let ids: Vec<i64> = tasks
            .iter()
            .filter(|t| t.batch_id.is_some())
            .map(|t| t.id)
            .collect();
        let rows = self.store.workflow_dep_results_many(&ids).await?;
        let at: std::collections::HashMap<i64, usize> =
            tasks.iter().enumerate().map(|(i, t)| (t.id, i)).collect();
        for (id, r, v) in rows {
            if let Some(t) = at.get(&id).map(|&i| &mut tasks[i]) {
                t.deps
                    .get_or_insert_with(Default::default)
                    .insert(r, v.unwrap_or(serde_json::Value::Null));
            }
        }
        Ok(())
    }
}
