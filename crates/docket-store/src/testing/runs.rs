//! Conformance cases: durable functions' runs (issue 41).

use super::fixtures::*;
use crate::{
    NewRun, RunFinishParams, RunLease, RunRecordParams, RunReport, RunReported, RunSendParams,
    RunStartParams, RunSuspendParams,
};
use docket_core::durable::{
    self, ChildSpec, EntryKind, EntryState, NewEntry, RunListParams, RunState, SuspendOutcome, Wait,
};

fn new_run(id: &str, workflow: &str, parent: Option<&str>, now: Timestamp) -> NewRun {
    let input = json!({"n": id});
    let mut t = NewTask::new(workflow, durable::task_payload(id, &input));
    t.queue = Some(durable::DEFAULT_QUEUE.into());
    t.max_attempts = Some(durable::DEFAULT_MAX_ATTEMPTS);
    NewRun {
        id: id.into(),
        workflow: workflow.into(),
        input,
        parent_id: parent.map(str::to_string),
        task: resolve(t, now),
    }
}

fn lease(id: &str, t: &docket_core::Task, now: Timestamp) -> RunLease {
    RunLease {
        id: id.into(),
        token: t.lease.as_ref().unwrap().token.clone(),
        now,
        fail_rule: docket_core::task::standard_fail_rule,
    }
}

fn step(seq: i64, name: &str, out: serde_json::Value) -> NewEntry {
    NewEntry {
        seq,
        kind: EntryKind::Step,
        name: name.into(),
        output: Some(out),
        error: None,
        attempts: None,
        started_at: None,
        child: None,
    }
}

fn record(l: RunLease, entries: Vec<NewEntry>) -> RunRecordParams {
    RunRecordParams {
        lease: l,
        entries,
        children: vec![],
    }
}

fn wait(seq: i64, kind: EntryKind, name: &str) -> Wait {
    Wait {
        seq,
        kind,
        name: name.into(),
        until: None,
        timeout: None,
        child_id: None,
    }
}

async fn claim_one(s: &dyn Store, now: Timestamp) -> docket_core::Task {
    let mut got = claim(s, durable::DEFAULT_QUEUE, 1, now).await;
    assert_eq!(got.len(), 1, "one run's task to claim");
    got.remove(0)
}

/// Runs: start (idempotent by id), record under the lease (a request sent again is harmless,
/// another call at a seq is a non-determinism error), sleep (the task handed back, then
/// resumed), events (sent before and after the wait starts, a timeout), a child and its end
/// reaching the parent, finish (completed, failed), cancel, reopen, list, prune; a stale lease
/// is refused.
pub(super) async fn durable_runs(b: Bundle) {
    let s = &*b.store;
    let now = t0();
    // Start, twice.
    let (r, created) = s
        .run_start(RunStartParams {
            run: new_run("r1", "checkout", None, now),
            now,
        })
        .await
        .unwrap();
    assert!(created);
    assert_eq!(
        (r.state, r.steps, r.queue.as_str()),
        (RunState::Running, 0, "workflows")
    );
    let (again, created) = s
        .run_start(RunStartParams {
            run: new_run("r1", "checkout", None, now),
            now,
        })
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(again, r);
    assert_eq!(s.run_get("r1").await.unwrap().unwrap(), r);
    assert!(s.run_get("nope").await.unwrap().is_none());

    // Claimed: its payload names the run.
    let t = claim_one(s, now).await;
    assert_eq!(t.id, r.task_id);
    assert_eq!(t.kind, "checkout");
    assert_eq!(t.payload["workflow_run"], "r1");
    let n = s
        .run_record(record(
            lease("r1", &t, now),
            vec![step(0, "a", json!(1)), step(1, "b", json!(2))],
        ))
        .await
        .unwrap();
    assert_eq!(n, 2);
    // Sent again: nothing more; another call at seq 1: non-determinism, nothing written.
    let n = s
        .run_record(record(lease("r1", &t, now), vec![step(1, "b", json!(2))]))
        .await
        .unwrap();
    assert_eq!(n, 0);
    let e = s
        .run_record(record(
            lease("r1", &t, now),
            vec![step(1, "x", json!(0)), step(2, "c", json!(3))],
        ))
        .await
        .unwrap_err();
    assert!(
        matches!(&e, StoreError::Nondeterministic(m) if m.contains("journal entry 1 is step \"b\"")),
        "{e:?}"
    );
    assert_eq!(s.run_entries("r1").await.unwrap().len(), 2);
    // A stale token is refused.
    let mut stale = lease("r1", &t, now);
    stale.token = docket_core::lease::token_string(Some(7), t.id).unwrap();
    assert!(matches!(
        s.run_record(record(stale, vec![step(2, "c", json!(3))]))
            .await,
        Err(StoreError::LeaseLost)
    ));

    // A sleep of 10 s: handed back.
    let mut w = wait(2, EntryKind::Sleep, "sleep");
    w.until = Some(now + secs(10));
    let out = s
        .run_suspend(RunSuspendParams {
            record: record(lease("r1", &t, now), vec![]),
            wait: w.clone(),
        })
        .await
        .unwrap();
    assert_eq!(out.outcome, SuspendOutcome::Suspended);
    assert_eq!(out.entry.state, EntryState::Waiting);
    let run = s.run_get("r1").await.unwrap().unwrap();
    assert_eq!(
        (run.state, run.wake_at, run.steps),
        (RunState::Sleeping, Some(now + secs(10)), 3)
    );
    let task = s.task_get(t.id).await.unwrap().unwrap();
    assert_eq!(task.state, TaskState::Scheduled);
    assert_eq!(task.run_at, now + secs(10));
    assert_eq!(task.stage.as_deref(), Some(durable::RESUME_STAGE));
    // The old lease is void now.
    assert!(s
        .run_record(record(lease("r1", &t, now), vec![]))
        .await
        .is_err());
    assert!(claim(s, durable::DEFAULT_QUEUE, 1, now + secs(5))
        .await
        .is_empty());
    let later = now + secs(11);
    s.task_promote(TaskPromoteParams {
        now: later,
        limit: 100,
    })
    .await
    .unwrap();
    let t = claim_one(s, later).await;
    let resumed = s.run_resume(lease("r1", &t, later)).await.unwrap();
    assert_eq!(resumed.run.state, RunState::Running);
    assert_eq!(resumed.now, later);
    assert_eq!(resumed.steps.len(), 3);
    assert_eq!(
        resumed.steps[2].state,
        EntryState::Completed,
        "the sleep is over"
    );
    // The replay asks for the sleep again: due.
    let out = s
        .run_suspend(RunSuspendParams {
            record: record(lease("r1", &t, later), vec![]),
            wait: w,
        })
        .await
        .unwrap();
    assert_eq!(out.outcome, SuspendOutcome::Due);

    // An event sent before the wait starts is taken at once.
    let sent = s
        .run_send(RunSendParams {
            id: "r1".into(),
            name: "early".into(),
            payload: json!({"e": 1}),
            now: later,
        })
        .await
        .unwrap();
    assert!(!sent.delivered);
    let out = s
        .run_suspend(RunSuspendParams {
            record: record(lease("r1", &t, later), vec![]),
            wait: wait(3, EntryKind::Event, "early"),
        })
        .await
        .unwrap();
    assert_eq!(
        (out.outcome, out.payload),
        (SuspendOutcome::Event, Some(json!({"e": 1})))
    );
    // One sent after the wait starts wakes the run.
    let mut w = wait(4, EntryKind::Event, "late");
    w.timeout = Some(Duration::from_secs(3600));
    let out = s
        .run_suspend(RunSuspendParams {
            record: record(lease("r1", &t, later), vec![]),
            wait: w.clone(),
        })
        .await
        .unwrap();
    assert_eq!(out.outcome, SuspendOutcome::Suspended);
    let run = s.run_get("r1").await.unwrap().unwrap();
    assert_eq!(
        (run.state, run.waiting_for.as_deref()),
        (RunState::Waiting, Some("late"))
    );
    let sent = s
        .run_send(RunSendParams {
            id: "r1".into(),
            name: "late".into(),
            payload: json!("hi"),
            now: later,
        })
        .await
        .unwrap();
    assert!(sent.delivered);
    assert_eq!(
        s.run_get("r1").await.unwrap().unwrap().state,
        RunState::Running
    );
    let t = claim_one(s, later).await;
    s.run_resume(lease("r1", &t, later)).await.unwrap();
    let out = s
        .run_suspend(RunSuspendParams {
            record: record(lease("r1", &t, later), vec![]),
            wait: w,
        })
        .await
        .unwrap();
    assert_eq!(
        (out.outcome, out.payload),
        (SuspendOutcome::Event, Some(json!("hi")))
    );

    // A wait of 1 s that times out.
    let mut w = wait(5, EntryKind::Event, "never");
    w.timeout = Some(Duration::from_secs(1));
    let out = s
        .run_suspend(RunSuspendParams {
            record: record(lease("r1", &t, later), vec![]),
            wait: w.clone(),
        })
        .await
        .unwrap();
    assert_eq!(out.outcome, SuspendOutcome::Suspended);
    let later = later + secs(2);
    s.task_promote(TaskPromoteParams {
        now: later,
        limit: 100,
    })
    .await
    .unwrap();
    let t = claim_one(s, later).await;
    s.run_resume(lease("r1", &t, later)).await.unwrap();
    let out = s
        .run_suspend(RunSuspendParams {
            record: record(lease("r1", &t, later), vec![]),
            wait: w,
        })
        .await
        .unwrap();
    assert_eq!(out.outcome, SuspendOutcome::TimedOut);
    assert_eq!(out.entry.state, EntryState::TimedOut);

    // A child, started with an entry; its end reaches the parent's wait.
    let child_id = durable::child_id("r1", 6);
    let mut start = step(6, "refund", json!(null));
    start.kind = EntryKind::Child;
    start.output = None;
    start.child = Some(ChildSpec::default());
    let mut p = record(lease("r1", &t, later), vec![start]);
    p.children = vec![(6, new_run(&child_id, "refund", Some("r1"), later))];
    s.run_record(p).await.unwrap();
    let entries = s.run_entries("r1").await.unwrap();
    assert_eq!(entries[6].child_id.as_deref(), Some(child_id.as_str()));
    let child = s.run_get(&child_id).await.unwrap().unwrap();
    assert_eq!(child.parent_id.as_deref(), Some("r1"));
    let mut cw = wait(7, EntryKind::ChildWait, "refund");
    cw.child_id = Some(child_id.clone());
    let out = s
        .run_suspend(RunSuspendParams {
            record: record(lease("r1", &t, later), vec![]),
            wait: cw.clone(),
        })
        .await
        .unwrap();
    assert_eq!(out.outcome, SuspendOutcome::Suspended);
    let ct = claim_one(s, later).await;
    assert_eq!(ct.id, child.task_id);
    let ended = s
        .run_finish(RunFinishParams {
            record: record(lease(&child_id, &ct, later), vec![step(0, "x", json!(1))]),
            outcome: Ok(json!({"refunded": true})),
        })
        .await
        .unwrap();
    assert_eq!(ended.state, RunState::Completed);
    assert_eq!(
        s.task_get(ct.id).await.unwrap().unwrap().state,
        TaskState::Completed
    );
    assert_eq!(
        s.run_get("r1").await.unwrap().unwrap().state,
        RunState::Running,
        "woken"
    );
    let t = claim_one(s, later).await;
    s.run_resume(lease("r1", &t, later)).await.unwrap();
    let out = s
        .run_suspend(RunSuspendParams {
            record: record(lease("r1", &t, later), vec![]),
            wait: cw,
        })
        .await
        .unwrap();
    assert_eq!(out.outcome, SuspendOutcome::Event);
    assert_eq!(
        out.payload.unwrap(),
        json!({"state": "completed", "result": {"refunded": true}, "error": null})
    );

    // Finish: completed, its task completed; an event to a finished run is refused.
    let done = s
        .run_finish(RunFinishParams {
            record: record(lease("r1", &t, later), vec![step(8, "last", json!("z"))]),
            outcome: Ok(json!({"total": 3})),
        })
        .await
        .unwrap();
    assert_eq!(
        (done.state, done.result.clone()),
        (RunState::Completed, Some(json!({"total": 3})))
    );
    assert_eq!(done.steps, 9);
    assert_eq!(
        s.task_get(t.id).await.unwrap().unwrap().state,
        TaskState::Completed
    );
    assert!(matches!(
        s.run_send(RunSendParams {
            id: "r1".into(),
            name: "late".into(),
            payload: json!(1),
            now: later,
        })
        .await,
        Err(StoreError::InvalidState(_))
    ));
    assert!(matches!(
        s.run_send(RunSendParams {
            id: "nope".into(),
            name: "a".into(),
            payload: json!(1),
            now: later,
        })
        .await,
        Err(StoreError::NotFound(_))
    ));

    // A run that fails: its task is discarded; reopened, it runs again.
    s.run_start(RunStartParams {
        run: new_run("r2", "checkout", None, later),
        now: later,
    })
    .await
    .unwrap();
    let t2 = claim_one(s, later).await;
    let failed = s
        .run_finish(RunFinishParams {
            record: record(lease("r2", &t2, later), vec![]),
            outcome: Err("boom".into()),
        })
        .await
        .unwrap();
    assert_eq!(
        (failed.state, failed.error.as_deref()),
        (RunState::Failed, Some("boom"))
    );
    assert_eq!(
        s.task_get(t2.id).await.unwrap().unwrap().state,
        TaskState::Discarded
    );
    let reopened = s.run_reopen("r2", later).await.unwrap();
    assert_eq!((reopened.state, reopened.error), (RunState::Running, None));
    assert!(matches!(
        s.run_reopen("r1", later).await,
        Err(StoreError::InvalidState(_))
    ));

    // Cancel: once; a finished run stays as it is.
    let c = s.run_cancel("r2", later).await.unwrap();
    assert!(c.cancelled);
    assert_eq!(c.run.state, RunState::Cancelled);
    assert!(!s.run_cancel("r1", later).await.unwrap().cancelled);

    // Lists.
    let all = s.run_list(RunListParams::default()).await.unwrap();
    assert_eq!(all.len(), 3);
    let by =
        |workflow: Option<&str>, state: Option<RunState>, parent: Option<&str>| RunListParams {
            workflow: workflow.map(str::to_string),
            state,
            parent_id: parent.map(str::to_string),
            ..RunListParams::default()
        };
    assert_eq!(
        s.run_list(by(Some("checkout"), None, None))
            .await
            .unwrap()
            .len(),
        2
    );
    let cancelled = s
        .run_list(by(None, Some(RunState::Cancelled), None))
        .await
        .unwrap();
    assert_eq!(
        cancelled.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["r2"]
    );
    let kids = s.run_list(by(None, None, Some("r1"))).await.unwrap();
    assert_eq!(kids.len(), 1);
    let newer = RunListParams {
        created_after: Some(later),
        limit: Some(1),
        ..RunListParams::default()
    };
    assert_eq!(s.run_list(newer).await.unwrap().len(), 1);

    // The runs tasks drive (an event sink's messages name them); other tasks are left out.
    let r1 = s.run_get("r1").await.unwrap().unwrap();
    let mut of = s.run_of_tasks(&[r1.task_id, -5]).await.unwrap();
    assert_eq!(of.len(), 1);
    let one = of.remove(0);
    assert_eq!(
        (one.task_id, one.run_id.as_str(), one.workflow.as_str()),
        (r1.task_id, "r1", r1.workflow.as_str())
    );
    assert!(s.run_of_tasks(&[]).await.unwrap().is_empty());

    // Prune: finished before a time, with journals.
    assert_eq!(s.run_prune(later + secs(1), 10).await.unwrap(), 3);
    assert!(s.run_get("r1").await.unwrap().is_none());
    assert!(s.run_entries("r1").await.unwrap().is_empty());
}

/// Starts of many runs written together (`run_start_many`: an id twice, a run there), then
/// reports of many runs written together (`run_report_many`): records and finishes (completed,
/// failed) of distinct runs and two reports of one run in one call, answered in order; a
/// refused report (a stale lease, non-determinism) is answered as alone and costs the others
/// nothing.
pub(super) async fn run_reports_together(b: Bundle) {
    let s = &*b.store;
    let now = t0();
    let start = |id: &str| RunStartParams {
        run: new_run(id, "checkout", None, now),
        now,
    };
    let (d, _) = s.run_start(start("d")).await.unwrap();
    // Starts together: one of an id twice, one of a run there.
    let started = s
        .run_start_many(vec![
            start("a"),
            start("b"),
            start("a"),
            start("c"),
            start("d"),
        ])
        .await
        .unwrap()
        .into_iter()
        .map(Result::unwrap)
        .collect::<Vec<_>>();
    assert_eq!(
        started
            .iter()
            .map(|(r, created)| (r.id.as_str(), *created))
            .collect::<Vec<_>>(),
        [
            ("a", true),
            ("b", true),
            ("a", false),
            ("c", true),
            ("d", false)
        ]
    );
    assert_eq!(started[0].0, started[2].0);
    assert_eq!(started[4].0, d);
    assert_eq!(Some(&started[1].0), s.run_get("b").await.unwrap().as_ref());
    assert!(s.run_start_many(vec![]).await.unwrap().is_empty());
    let tasks = claim(s, durable::DEFAULT_QUEUE, 4, now).await;
    assert_eq!(tasks.len(), 4);
    let task = |id: &str| {
        tasks
            .iter()
            .find(|t| t.payload["workflow_run"] == id)
            .unwrap()
            .clone()
    };
    let report = |id: &str, entries: Vec<NewEntry>, finish| RunReport {
        record: record(lease(id, &task(id), now), entries),
        finish,
    };
    let out = s
        .run_report_many(vec![
            report("a", vec![step(0, "one", json!(1))], None),
            report(
                "b",
                vec![step(0, "one", json!(1))],
                Some(Ok(json!({"b": 2}))),
            ),
            report("c", vec![], Some(Err("boom".into()))),
            report("a", vec![step(1, "two", json!(2))], None),
        ])
        .await
        .unwrap();
    assert_eq!(out.len(), 4);
    assert!(
        matches!(out[0], Ok(RunReported::Recorded(1))),
        "{:?}",
        out[0]
    );
    match &out[1] {
        Ok(RunReported::Finished(r)) => {
            assert_eq!(
                (r.id.as_str(), r.state, r.result.clone(), r.steps),
                ("b", RunState::Completed, Some(json!({"b": 2})), 1)
            );
            assert_eq!(Some(&**r), s.run_get("b").await.unwrap().as_ref());
        }
        other => panic!("{other:?}"),
    }
    match &out[2] {
        Ok(RunReported::Finished(r)) => assert_eq!(
            (r.state, r.error.as_deref()),
            (RunState::Failed, Some("boom"))
        ),
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(out[3], Ok(RunReported::Recorded(1))),
        "{:?}",
        out[3]
    );
    let a = s.run_entries("a").await.unwrap();
    assert_eq!(
        a.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
        ["one", "two"]
    );
    assert_eq!(s.run_get("a").await.unwrap().unwrap().steps, 2);
    assert_eq!(
        s.task_get(task("b").id).await.unwrap().unwrap().state,
        TaskState::Completed
    );
    assert_eq!(
        s.task_get(task("c").id).await.unwrap().unwrap().state,
        TaskState::Discarded
    );

    // A stale lease and a non-determinism among good reports: each answered as alone.
    let mut stale = lease("d", &task("d"), now);
    stale.token = docket_core::lease::token_string(Some(7), task("d").id).unwrap();
    let out = s
        .run_report_many(vec![
            RunReport {
                record: record(stale, vec![step(0, "x", json!(0))]),
                finish: None,
            },
            report("a", vec![step(2, "three", json!(3))], None),
            report("a", vec![step(0, "other", json!(0))], None),
            report("d", vec![step(0, "d0", json!(0))], Some(Ok(json!("d")))),
        ])
        .await
        .unwrap();
    assert!(matches!(out[0], Err(StoreError::LeaseLost)), "{:?}", out[0]);
    assert!(
        matches!(out[1], Ok(RunReported::Recorded(1))),
        "{:?}",
        out[1]
    );
    assert!(
        matches!(&out[2], Err(StoreError::Nondeterministic(m)) if m.contains("\"one\"")),
        "{:?}",
        out[2]
    );
    assert!(
        matches!(&out[3], Ok(RunReported::Finished(r)) if r.state == RunState::Completed),
        "{:?}",
        out[3]
    );
    assert_eq!(s.run_entries("a").await.unwrap().len(), 3);
    assert_eq!(s.run_entries("d").await.unwrap().len(), 1);
    assert!(s.run_report_many(vec![]).await.unwrap().is_empty());
}
