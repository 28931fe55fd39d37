//! The runner of a namespace on this node: claims the namespace's tasks, calls the processor,
//! and commits or fails each step (progressor's rules: timers, breaking on a failed call).

use super::*;

impl ProcessService {
    /// The runner of one namespace on this node.
    pub(super) async fn run(self, ns: String) {
        let queue = process::queue_of(&ns);
        let worker = format!("{}/process", self.engine.config.node);
        let Ok(size) = self.cached_config(&ns).map(|c| c.worker_pool_size) else {
            return;
        };
        let sem = Arc::new(Semaphore::new(size));
        while !self.cancel.is_cancelled() {
            let first = tokio::select! {
                p = sem.clone().acquire_owned() => p.expect("semaphore open"),
                _ = self.cancel.cancelled() => return,
            };
            let (lease, call_scan) = match self.config_or_cached(&ns).await {
                Ok(c) => (c.lease(), c.call_scan_timeout),
                Err(_) => return,
            };
            let free = sem.available_permits() + 1;
            let scan = std::time::Instant::now();
            // Woken at once by this node's enqueues and PostgreSQL's notifications; without a
            // wake (another node on MySQL or SQLite) the claim looks again every
            // call_scan_timeout (progressor's call scan), or sooner at the queue's poll interval.
            let claimed = self
                .engine
                .claim(
                    &crate::Claim {
                        queue: queue.clone(),
                        worker: worker.clone(),
                        limit: free as i64,
                        lease: Some(lease),
                        wait: Duration::from_secs(30),
                        poll: Some(call_scan),
                        ..Default::default()
                    },
                    &self.cancel,
                )
                .await;
            if matches!(&claimed, Ok(t) if !t.is_empty()) {
                // Only scans that found work: an idle long poll is not a scan's cost.
                ::metrics::histogram!(M::CALLS_SCANNING, "namespace" => ns.clone())
                    .record(M::ms_since(scan));
            }
            let tasks = match claimed {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!(namespace = %ns, error = %e, "claim failed; retrying in 1s");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            let mut first = Some(first);
            for t in tasks {
                let permit = match first.take() {
                    Some(p) => p,
                    None => sem.clone().acquire_owned().await.expect("semaphore open"),
                };
                let me = self.clone();
                let ns = ns.clone();
                // Every log line of the step carries the process and the task.
                let span = tracing::info_span!(
                    "process_task",
                    namespace = %ns,
                    process_id = t.process.as_ref().map_or("", |p| p.id.as_str()),
                    task_id = t.id,
                    kind = %t.kind,
                    attempt = t.attempt,
                    trace_id = t.trace_id.as_deref().unwrap_or("")
                );
                docket_core::trace::link_span(&span, t.trace_id.as_deref());
                tokio::spawn(tracing::Instrument::instrument(
                    async move {
                        let id = t.id;
                        if let Err(e) = me.step(&ns, t).await {
                            tracing::warn!(error = %e, "process step failed");
                        }
                        let t0 = std::time::Instant::now();
                        me.engine.waker.task_done(id);
                        ::metrics::histogram!(M::NOTIFICATION, "namespace" => ns.clone(), "notification_type" => "done")
                        .record(M::ms_since(t0));
                        drop(permit);
                    },
                    span,
                ));
            }
        }
    }

    /// Runs one task of a process.
    pub(super) async fn step(&self, ns: &str, t: Task) -> Result<(), EngineError> {
        let cfg = match self.config_or_cached(ns).await {
            Ok(c) => c,
            Err(_) => return Ok(()),
        };
        let token = t
            .lease
            .as_ref()
            .map(|l| l.token.clone())
            .unwrap_or_default();
        let pid = t.process.as_ref().map(|p| p.id.clone()).unwrap_or_default();
        let now = || self.engine.clock.now();
        if t.kind == "remove" {
            let t0 = std::time::Instant::now();
            let r = self
                .engine
                .store
                .process_remove(docket_store::ProcessRemoveParams {
                    task_id: t.id,
                    token: &token,
                    namespace: ns,
                    id: &pid,
                    now: now(),
                })
                .await;
            ::metrics::histogram!(M::PROCESS_REMOVING, "namespace" => ns.to_string())
                .record(M::ms_since(t0));
            return r.map_err(EngineError::from);
        }
        let prep = std::time::Instant::now();
        let range: HistoryRange =
            serde_json::from_value(t.payload["range"].clone()).unwrap_or_default();
        let Some(docket_store::ProcessWithHistory {
            process: p,
            history,
        }) = self
            .engine
            .store
            .process_get(docket_store::ProcessGetParams {
                namespace: ns,
                id: &pid,
                range,
            })
            .await?
        else {
            // The process is gone (removed): nothing to do.
            let _ = self
                .engine
                .store
                .task_complete_many(docket_store::TaskCompleteManyParams {
                    fail_rule: self.engine.config.fail_rule,
                    items: &[docket_store::TaskComplete {
                        id: t.id,
                        token,
                        result: Value::Null,
                        next: None,
                    }],
                    now: now(),
                })
                .await?;
            return Ok(());
        };
        let corrupted_by = p.corrupted_by;
        let req = ProcessorRequest {
            task_type: t.kind.clone(),
            args: t.payload["args"].clone(),
            context: t.payload["context"].clone(),
            process: ProcessorProcess {
                id: p.id.clone(),
                namespace: p.namespace.clone(),
                status: p.status,
                previous_status: p.previous_status,
                detail: p.detail.clone(),
                aux_state: p.aux_state.clone(),
                metadata: p.metadata.clone(),
                history,
                last_event_id: p.last_event_id,
                corrupted_by,
            },
        };
        let labels = [("namespace", ns.to_string()), ("task_type", t.kind.clone())];
        ::metrics::histogram!(M::REQUEST_PREPARING, &labels).record(M::ms_since(prep));
        let work = std::time::Instant::now();
        let reply = self.client.post(&cfg, &req).await;
        ::metrics::histogram!(M::TASK_PROCESSING, &labels).record(M::ms_since(work));
        let done = std::time::Instant::now();
        let ok = matches!(reply, Ok(ProcessorReply::Ok(_)));
        let r = self
            .finish(
                Held {
                    ns,
                    pid,
                    t,
                    token,
                    corrupted_by,
                },
                reply,
                &cfg,
            )
            .await;
        let completion = if ok && r.is_ok() { "complete" } else { "error" };
        ::metrics::histogram!(M::TASK_COMPLETION, "namespace" => ns.to_string(), "completion_type" => completion)
            .record(M::ms_since(done));
        r
    }

    /// Stores what the processor answered about `held`.
    async fn finish(
        &self,
        held: Held<'_>,
        reply: Result<ProcessorReply, String>,
        cfg: &NamespaceConfig,
    ) -> Result<(), EngineError> {
        let Held {
            ns,
            pid,
            t,
            token,
            corrupted_by,
        } = held;
        let cfg = cfg.clone();
        let now = || self.engine.clock.now();
        match reply {
            Ok(ProcessorReply::Ok(r)) => {
                // Setting or unsetting the timer replaces the process's waiting timers.
                let timer = match &r.action {
                    None => None,
                    Some(Action::Unset(_)) => Some(None),
                    Some(Action::Set(s)) => match process::timer_at(s, now()) {
                        Ok(at) => {
                            let kind = if s.remove { "remove" } else { "timeout" };
                            Some(Some(Box::new(self.timer_task(ns, &pid, kind, at, &cfg)?)))
                        }
                        // A malformed action is the processor's error: nothing of the result is kept.
                        Err(msg) => return self.fail(ns, &pid, &t, token, json!(msg), &cfg).await,
                    },
                };
                let cancel_kinds = match timer {
                    Some(_) => process::TIMER_KINDS.map(String::from).to_vec(),
                    None => vec![],
                };
                // A repaired process that a timer broke gets that timer again (progressor).
                let mut also = vec![];
                if t.kind == "repair" && timer.is_none() {
                    if let Some(bad) = corrupted_by {
                        if let Some(bt) = self.engine.store.task_get(bad).await? {
                            if bt.kind == "timeout" {
                                also.push(self.timer_task(ns, &pid, "timeout", now(), &cfg)?);
                            }
                        }
                    }
                }
                let c = ProcessCommit {
                    task_id: t.id,
                    token,
                    namespace: ns.to_string(),
                    id: pid,
                    events: r.events,
                    aux_state: r.aux_state,
                    metadata: r.metadata,
                    response: r.response,
                    cancel_kinds,
                    timer: timer.flatten(),
                    also,
                    now: now(),
                };
                Ok(self.engine.store.process_commit(c).await?)
            }
            Ok(ProcessorReply::Error(v)) => self.fail(ns, &pid, &t, token, v, &cfg).await,
            Err(text) => self.fail(ns, &pid, &t, token, json!(text), &cfg).await,
        }
    }

    pub(super) fn timer_task(
        &self,
        ns: &str,
        pid: &str,
        kind: &str,
        at: docket_core::Timestamp,
        cfg: &NamespaceConfig,
    ) -> Result<docket_core::task::ResolvedTask, EngineError> {
        let t = NewTask {
            queue: Some(process::queue_of(ns)),
            priority: Some(0),
            run_at: Some(at),
            max_attempts: Some(cfg.retry_policy.max_attempts),
            backoff: Some(cfg.retry_policy.backoff()),
            timeout: Some(cfg.lease()),
            ..NewTask::new(kind, json!({"process_id": pid}))
        };
        let mut t = t
            .resolve(None, &self.engine.config.defaults, self.engine.clock.now())
            .map_err(EngineError::Invalid)?;
        process::own_task(&mut t, ns, pid, None);
        Ok(t)
    }

    pub(super) async fn fail(
        &self,
        ns: &str,
        pid: &str,
        t: &Task,
        token: String,
        err: Value,
        cfg: &NamespaceConfig,
    ) -> Result<(), EngineError> {
        let text = detail_of(&err);
        let (permanent, on_give_up) = match t.kind.as_str() {
            "timeout" => (
                cfg.retry_policy.is_non_retryable(&text),
                ProcessBreak::Break { corrupted: true },
            ),
            "repair" => (true, ProcessBreak::Keep),
            _ => (true, ProcessBreak::Break { corrupted: false }),
        };
        let max_timeout = cfg.retry_policy.max_timeout;
        // progressor stops retrying a timer once the interval would pass max_timeout.
        let permanent = permanent
            || max_timeout.is_some_and(|m| t.backoff.base_delay(t.attempt) >= m && t.attempt > 1);
        self.engine
            .store
            .process_fail(ProcessFail {
                fail_rule: self.engine.config.fail_rule,
                fail: TaskFail {
                    id: t.id,
                    token,
                    error: text,
                    retry_in: None,
                    permanent,
                },
                namespace: ns.to_string(),
                id: pid.to_string(),
                on_give_up,
                error_value: err,
                now: self.engine.clock.now(),
            })
            .await?;
        Ok(())
    }
}

/// A process step held by this runner, as `finish` stores its answer.
struct Held<'a> {
    /// The process's namespace.
    ns: &'a str,
    /// The process's id.
    pid: String,
    /// The step's task.
    t: Task,
    /// The step's lease token.
    token: String,
    /// The event that corrupted the process (a repair re-arms that timer).
    corrupted_by: Option<i64>,
}
