//! What callers ask of processes: init, call, repair (each a task the caller waits for),
//! simple-repair, import, read, list, trace.

use super::*;

impl ProcessService {
    pub(super) fn task_for(
        &self,
        ns: &str,
        id: &str,
        kind: &str,
        req: &Request,
        cfg: &NamespaceConfig,
    ) -> Result<docket_core::task::ResolvedTask, ProcessError> {
        let mut payload = json!({"process_id": id, "args": req.args, "context": req.context});
        if req.range != HistoryRange::default() {
            payload["range"] = serde_json::to_value(req.range).expect("range serialises");
        }
        let t = NewTask {
            queue: Some(process::queue_of(ns)),
            priority: Some(CALL_PRIORITY),
            max_attempts: Some(1),
            timeout: Some(cfg.lease()),
            ..NewTask::new(kind, payload)
        };
        let mut t = t
            .resolve(None, &self.engine.config.defaults, self.engine.clock.now())
            .map_err(ProcessError::Invalid)?;
        process::own_task(&mut t, ns, id, req.idempotency_key.as_deref());
        Ok(t)
    }

    /// A repeated idempotency key: the earlier task, if any.
    pub(super) async fn earlier(
        &self,
        ns: &str,
        id: &str,
        req: &Request,
    ) -> Result<Option<Task>, ProcessError> {
        match &req.idempotency_key {
            Some(k) => Ok(self
                .engine
                .store
                .task_find_by_unique_key(&process::idempotency_unique_key(ns, id, k))
                .await?),
            None => Ok(None),
        }
    }

    /// Creates a process and runs its init; answers with the processor's response.
    ///
    /// # Errors
    /// See [`ProcessError`].
    pub async fn init(&self, ns: &str, id: &str, req: Request) -> Result<Value, ProcessError> {
        let cfg = self.config(ns).await?;
        process::check_process_id(id).map_err(ProcessError::Invalid)?;
        if let Some(t) = self.earlier(ns, id, &req).await? {
            return self.answer(ns, t.id, &cfg).await;
        }
        let task = self.task_for(ns, id, "init", &req, &cfg)?;
        let t = match self
            .engine
            .store
            .process_create(docket_store::ProcessCreateParams {
                namespace: ns,
                id,
                init: task,
                now: self.engine.clock.now(),
            })
            .await
            .map_err(EngineError::from)
        {
            Ok(t) => t,
            Err(EngineError::Conflict(_)) => return Err(ProcessError::Exists),
            Err(e) => return Err(e.into()),
        };
        self.engine.waker.wake(&t.queue);
        self.answer(ns, t.id, &cfg).await
    }

    /// Queues a call (FIFO behind running/queued tasks of the process) and answers with the
    /// processor's response.
    ///
    /// # Errors
    /// See [`ProcessError`].
    pub async fn call(&self, ns: &str, id: &str, req: Request) -> Result<Value, ProcessError> {
        self.enqueue(ns, id, "call", ProcessStatus::Running, req)
            .await
    }

    /// Repairs a process in `error` through the processor.
    ///
    /// # Errors
    /// See [`ProcessError`].
    pub async fn repair(&self, ns: &str, id: &str, req: Request) -> Result<Value, ProcessError> {
        self.enqueue(ns, id, "repair", ProcessStatus::Error, req)
            .await
    }

    pub(super) async fn enqueue(
        &self,
        ns: &str,
        id: &str,
        kind: &str,
        require: ProcessStatus,
        req: Request,
    ) -> Result<Value, ProcessError> {
        let cfg = self.config(ns).await?;
        if let Some(t) = self.earlier(ns, id, &req).await? {
            return self.answer(ns, t.id, &cfg).await;
        }
        let task = self.task_for(ns, id, kind, &req, &cfg)?;
        let t = match self
            .engine
            .store
            .process_enqueue(docket_store::ProcessEnqueueParams {
                namespace: ns,
                id,
                task,
                require,
                now: self.engine.clock.now(),
            })
            .await
            .map_err(EngineError::from)
        {
            Ok(t) => t,
            Err(EngineError::NotFound(_)) => return Err(ProcessError::NotFound),
            Err(EngineError::InvalidState(m)) if require == ProcessStatus::Error => {
                return Err(ProcessError::IsRunning(m))
            }
            Err(EngineError::InvalidState(m)) => return Err(ProcessError::NotRunning(m)),
            Err(e) => return Err(e.into()),
        };
        self.engine.waker.wake(&t.queue);
        self.answer(ns, t.id, &cfg).await
    }

    /// The process and a range of its history.
    ///
    /// # Errors
    /// [`ProcessError::NotFound`], store errors.
    pub async fn get(
        &self,
        ns: &str,
        id: &str,
        range: HistoryRange,
    ) -> Result<(Process, Vec<process::Event>), ProcessError> {
        self.engine
            .store
            .process_get(docket_store::ProcessGetParams {
                namespace: ns,
                id,
                range,
            })
            .await?
            .map(|p| (p.process, p.history))
            .ok_or(ProcessError::NotFound)
    }

    /// simple-repair: an `error` process back to `running` without the processor (progressor).
    ///
    /// # Errors
    /// [`ProcessError::NotFound`], [`ProcessError::IsRunning`].
    pub async fn simple_repair(&self, ns: &str, id: &str) -> Result<(), ProcessError> {
        match self
            .engine
            .store
            .process_simple_repair(docket_store::ProcessSimpleRepairParams {
                namespace: ns,
                id,
                now: self.engine.clock.now(),
            })
            .await
            .map_err(EngineError::from)
        {
            Ok(()) => Ok(()),
            Err(EngineError::NotFound(_)) => Err(ProcessError::NotFound),
            Err(EngineError::InvalidState(m)) => Err(ProcessError::IsRunning(m)),
            Err(e) => Err(e.into()),
        }
    }

    /// Imports a whole process (progressor's put): status, history, aux state, metadata and an
    /// optional timer.
    ///
    /// # Errors
    /// [`ProcessError::Exists`], [`ProcessError::Invalid`], store errors.
    pub async fn put(
        &self,
        ns: &str,
        id: &str,
        spec: process::ProcessImportSpec,
    ) -> Result<Process, ProcessError> {
        let cfg = self.config(ns).await?;
        process::check_process_id(id).map_err(ProcessError::Invalid)?;
        let now = chrono::SubsecRound::trunc_subsecs(self.engine.clock.now(), 6);
        let timer = match &spec.timer {
            None => None,
            Some(t) => {
                let at = process::timer_at(t, now).map_err(ProcessError::Invalid)?;
                Some(self.timer_task(
                    ns,
                    id,
                    if t.remove { "remove" } else { "timeout" },
                    at,
                    &cfg,
                )?)
            }
        };
        let history: Vec<process::Event> = spec
            .history
            .into_iter()
            .enumerate()
            .map(|(i, e)| process::Event {
                event_id: i as i64 + 1,
                task_id: None,
                timestamp: e
                    .timestamp
                    .map(|t| chrono::SubsecRound::trunc_subsecs(t, 6))
                    .unwrap_or(now),
                metadata: e.metadata,
                payload: e.payload,
            })
            .collect();
        let p = Process {
            namespace: ns.to_string(),
            id: id.to_string(),
            status: spec.status,
            previous_status: None,
            status_changed_at: now,
            detail: spec.detail,
            aux_state: spec.aux_state,
            metadata: spec.metadata,
            corrupted_by: None,
            created_at: now,
            last_event_id: history.len() as i64,
        };
        let import = docket_store::ProcessImport {
            process: p.clone(),
            history,
            timer,
            now,
        };
        match self
            .engine
            .store
            .process_import(import)
            .await
            .map_err(EngineError::from)
        {
            Ok(()) => {
                self.engine.waker.wake_scheduler();
                self.engine.waker.wake(&process::queue_of(ns));
                Ok(p)
            }
            Err(EngineError::Conflict(_)) => Err(ProcessError::Exists),
            Err(e) => Err(e.into()),
        }
    }

    /// Processes of a namespace (keyset paging by id).
    ///
    /// # Errors
    /// Store errors.
    pub async fn list(
        &self,
        ns: &str,
        status: Option<ProcessStatus>,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<Process>, ProcessError> {
        Ok(self
            .engine
            .store
            .process_list(docket_store::ProcessListParams {
                namespace: ns,
                status,
                after,
                limit,
            })
            .await?)
    }

    /// Every task of a process, oldest first, each with the events it produced.
    ///
    /// # Errors
    /// [`ProcessError::NotFound`], store errors.
    pub async fn trace(
        &self,
        ns: &str,
        id: &str,
    ) -> Result<Vec<docket_core::api::TraceTask>, ProcessError> {
        let (_, events) = self.get(ns, id, HistoryRange::default()).await?;
        let tasks = self
            .engine
            .store
            .task_list(docket_store::TaskListParams {
                concurrency_key: Some(process::key_of(ns, id)),
                limit: 10_000,
                ..Default::default()
            })
            .await?;
        Ok(tasks
            .into_iter()
            .map(|task| docket_core::api::TraceTask {
                events: events
                    .iter()
                    .filter(|e| e.task_id == Some(task.id))
                    .cloned()
                    .collect(),
                task,
            })
            .collect())
    }

    /// Waits for task `id` to finish (up to the step timeout) and maps its end to an answer.
    pub(super) async fn answer(
        &self,
        ns: &str,
        id: i64,
        cfg: &NamespaceConfig,
    ) -> Result<Value, ProcessError> {
        let _ = ns;
        let deadline = tokio::time::Instant::now() + cfg.process_step_timeout;
        // Only this task's end wakes us: the local runner directly, another node's through
        // the `docket_done` notification (PostgreSQL); polling is the fallback.
        let mine = self.engine.waker.task(id);
        let r = self.answer_loop(id, deadline, &mine).await;
        self.engine.waker.forget_task(id, mine);
        r
    }

    pub(super) async fn answer_loop(
        &self,
        id: i64,
        deadline: tokio::time::Instant,
        mine: &Notify,
    ) -> Result<Value, ProcessError> {
        loop {
            let notified = mine.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let t = self
                .engine
                .store
                .task_get(id)
                .await?
                .ok_or(ProcessError::NotFound)?;
            match t.state {
                TaskState::Completed => return Ok(t.result.unwrap_or(Value::Null)),
                TaskState::Discarded => {
                    let err = t.result.as_ref().and_then(|r| r.get("error")).cloned();
                    return Err(ProcessError::Processor(err.unwrap_or_else(|| {
                        json!(t
                            .errors
                            .last()
                            .map(|e| e.message.clone())
                            .unwrap_or_default())
                    })));
                }
                TaskState::Cancelled => {
                    return Err(ProcessError::Cancelled(
                        "the process failed before this request ran".into(),
                    ))
                }
                _ => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ProcessError::Timeout);
            }
            tokio::select! {
                _ = notified => {}
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                _ = tokio::time::sleep_until(deadline) => {}
            }
        }
    }
}
