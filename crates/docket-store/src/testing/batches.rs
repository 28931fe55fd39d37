//! Conformance cases: batches.

use super::fixtures::*;
use docket_core::batch::{Batch, Callbacks, NewBatch};
use std::collections::BTreeMap;

/// The engine's rule, as `docket_engine` builds it: the due callbacks, resolved.
fn rule(now: Timestamp) -> BatchSettleRule {
    Arc::new(move |b: &Batch, failed: &[i64], _: &_| {
        Ok(docket_core::batch::callbacks_to_enqueue(b, failed)
            .into_iter()
            .map(|(name, t)| (name.to_string(), resolve(t, now)))
            .collect())
    })
}

fn member(kind: &str) -> ResolvedTask {
    resolve(nt(kind), t0())
}

/// Batches: members carry the batch id and are counted by state; the batch settles only when
/// sealed with every member finished, once (a second settle does nothing), enqueuing the due
/// callbacks with counts and failed ids; a settled batch takes no more tasks; an open batch
/// takes tasks until sealed; the sweep lists sealed unsettled batches.
pub(super) async fn batches_settle_once(b: Bundle) {
    let s = &b.store;
    let callbacks = Callbacks {
        completed: Some(NewTask::new("all_done", json!({"to": "ops"}))),
        succeeded: Some(NewTask::new("all_good", json!(null))),
        discarded: Some(NewTask::new("some_failed", json!({}))),
        ..Default::default()
    };
    let later = resolve(
        NewTask {
            run_at: Some(t0() + secs(60)),
            ..nt("m")
        },
        t0(),
    );
    let (batch, tasks) = s
        .batch_create(BatchCreateParams {
            name: Some("nightly".into()),
            open: false,
            callbacks: callbacks.clone(),
            tasks: vec![member("m"), member("m"), later],
            refs: vec![],
            deps: vec![],
            now: t0(),
        })
        .await
        .unwrap();
    assert_eq!(batch.name.as_deref(), Some("nightly"));
    assert!(!batch.open);
    assert_eq!((batch.total, batch.done), (3, 0));
    assert_eq!(batch.counts[&TaskState::Available], 2);
    assert_eq!(batch.counts[&TaskState::Scheduled], 1);
    assert_eq!(batch.callbacks, callbacks);
    assert!(batch.fired.is_empty() && batch.settled_at.is_none());
    assert!(tasks.iter().all(|t| t.batch_id == Some(batch.id)));
    let stored = s.task_get(tasks[0].id).await.unwrap().unwrap();
    assert_eq!(stored.batch_id, Some(batch.id));
    // A plain task is in no batch.
    let plain = insert(s.as_ref(), vec![nt("m")], t0()).await;
    assert_eq!(plain[0].batch_id, None);
    assert_eq!(
        s.task_get(plain[0].id).await.unwrap().unwrap().batch_id,
        None
    );

    let settle = |now| {
        s.batch_settle(BatchSettleParams {
            id: batch.id,
            rule: rule(now),
            now,
        })
    };
    assert_eq!(settle(t0()).await.unwrap(), None, "members unfinished");
    assert_eq!(s.batch_unsettled(0, 10).await.unwrap(), vec![batch.id]);
    assert!(s.batch_unsettled(batch.id, 10).await.unwrap().is_empty());

    // Two complete, one (the scheduled one, once due) fails for good.
    let got = claim(s.as_ref(), "default", 10, t0() + secs(61)).await;
    let mine: Vec<_> = got
        .iter()
        .filter(|t| t.batch_id == Some(batch.id))
        .collect();
    assert_eq!(
        mine.len(),
        2,
        "the scheduled member is not due yet: {got:?}"
    );
    s.task_complete_many(TaskCompleteManyParams {
        items: &[done(mine[0], json!(1)), done(mine[1], json!(2))],
        now: t0() + secs(61),
        fail_rule: docket_core::task::standard_fail_rule,
    })
    .await
    .unwrap();
    assert_eq!(settle(t0() + secs(61)).await.unwrap(), None);
    s.task_promote(TaskPromoteParams {
        now: t0() + secs(61),
        limit: 100,
    })
    .await
    .unwrap();
    let got = claim(s.as_ref(), "default", 10, t0() + secs(61)).await;
    let last = got
        .iter()
        .find(|t| t.batch_id == Some(batch.id))
        .expect("the scheduled member");
    s.task_fail_many(TaskFailManyParams {
        items: &[TaskFail {
            permanent: true,
            ..fail(last, "no")
        }],
        worker: None,
        now: t0() + secs(62),
        fail_rule: docket_core::task::standard_fail_rule,
    })
    .await
    .unwrap();

    let settled = settle(t0() + secs(63))
        .await
        .unwrap()
        .expect("every member finished");
    assert_eq!(settled.settled_at, Some(t0() + secs(63)));
    assert_eq!((settled.total, settled.done), (3, 3));
    assert_eq!(
        settled.fired.keys().cloned().collect::<Vec<_>>(),
        ["completed", "discarded"]
    );
    let cb = s
        .task_get(settled.fired["discarded"])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cb.kind, "some_failed");
    assert_eq!(cb.batch_id, None, "a callback is not a member");
    assert_eq!(cb.payload["batch"]["id"], batch.id);
    assert_eq!(cb.payload["batch"]["completed"], 2);
    assert_eq!(cb.payload["batch"]["discarded"], 1);
    assert_eq!(cb.payload["batch"]["failed_ids"], json!([last.id]));
    let cb = s
        .task_get(settled.fired["completed"])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cb.payload["to"], "ops");
    // Once only: a second settle does nothing, and the batch reads as settled.
    assert_eq!(settle(t0() + secs(64)).await.unwrap(), None);
    let read = s.batch_get(batch.id).await.unwrap().unwrap();
    assert_eq!(read.fired, settled.fired);
    assert_eq!(read.settled_at, settled.settled_at);
    assert!(s.batch_unsettled(0, 10).await.unwrap().is_empty());
    let n = s
        .task_list(TaskListParams {
            kind: Some("all_done".into()),
            limit: 10,
            ..TaskListParams::default()
        })
        .await
        .unwrap()
        .len();
    assert_eq!(n, 1);
    // A settled batch takes no more tasks; an unknown one is not found.
    let add = |id, tasks, seal| {
        s.batch_add(BatchAddParams {
            id,
            tasks,
            seal,
            refs: vec![],
            deps: vec![],
            now: t0() + secs(65),
        })
    };
    assert!(matches!(
        add(batch.id, vec![member("m")], false).await,
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        add(batch.id + 1000, vec![], true).await,
        Err(StoreError::NotFound(_))
    ));

    // An open batch: callbacks wait for the seal even when every member finished.
    let (open, none) = s
        .batch_create(BatchCreateParams {
            name: None,
            open: true,
            callbacks: Callbacks {
                succeeded: Some(NewTask::new("ok", json!(null))),
                ..Default::default()
            },
            tasks: vec![],
            refs: vec![],
            deps: vec![],
            now: t0(),
        })
        .await
        .unwrap();
    assert!(open.open && none.is_empty() && open.total == 0);
    let (b2, added) = add(open.id, vec![member("o")], false).await.unwrap();
    assert!(b2.open);
    assert_eq!((b2.total, added[0].batch_id), (1, Some(open.id)));
    let got = claim(s.as_ref(), "default", 10, t0() + secs(66)).await;
    let o = got.iter().find(|t| t.kind == "o").unwrap();
    s.task_complete_many(TaskCompleteManyParams {
        items: &[done(o, json!(null))],
        now: t0() + secs(66),
        fail_rule: docket_core::task::standard_fail_rule,
    })
    .await
    .unwrap();
    let settle_open = || {
        s.batch_settle(BatchSettleParams {
            id: open.id,
            rule: rule(t0() + secs(67)),
            now: t0() + secs(67),
        })
    };
    assert_eq!(settle_open().await.unwrap(), None, "still open");
    assert!(s.batch_unsettled(0, 10).await.unwrap().is_empty());
    let (sealed, _) = add(open.id, vec![], true).await.unwrap();
    assert!(!sealed.open);
    assert_eq!(s.batch_unsettled(0, 10).await.unwrap(), vec![open.id]);
    let done_open = settle_open().await.unwrap().unwrap();
    assert_eq!(
        done_open.fired.keys().cloned().collect::<Vec<_>>(),
        ["succeeded"]
    );

    // Newest first, paged by id.
    let all = s
        .batch_list(BatchListParams {
            before: None,
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(
        all.iter().map(|b| b.id).collect::<Vec<_>>(),
        [open.id, batch.id]
    );
    assert_eq!(all[1].counts[&TaskState::Completed], 2);
    let older = s
        .batch_list(BatchListParams {
            before: Some(open.id),
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(older.len(), 1);
    let _: BTreeMap<String, i64> = older[0].fired.clone();
    let _ = NewBatch::default();
}

/// Workflows: a batch whose tasks have refs and dependencies. Waiting tasks are listed with their
/// dependencies' states, and are neither promoted nor claimed; release makes a waiting task
/// available and cancel cancels it, each once (a second apply changes nothing); the graph shows
/// refs, states and edges; a task's dependencies' results are read by ref.
pub(super) async fn workflows_release_and_cancel(b: Bundle) {
    let s = &b.store;
    let wait = docket_core::workflow::waiting_run_at();
    let waiting = |kind: &str| {
        let mut t = member(kind);
        t.state = TaskState::Scheduled;
        t.run_at = wait;
        t
    };
    use docket_core::workflow::Target::{Existing, New};
    // a → b; a, b → c (c ignores b's failure); d alone.
    let (wf, tasks) = s
        .batch_create(BatchCreateParams {
            name: Some("dag".into()),
            open: false,
            callbacks: Callbacks::default(),
            tasks: vec![member("a"), waiting("b"), waiting("c"), member("d")],
            refs: ["a", "b", "c", "d"].map(String::from).to_vec(),
            deps: vec![
                vec![],
                vec![(New(0), false)],
                vec![(New(0), false), (New(1), true)],
                vec![],
            ],
            now: t0(),
        })
        .await
        .unwrap();
    let ids: Vec<i64> = tasks.iter().map(|t| t.id).collect();
    let graph = s.workflow_graph(wf.id).await.unwrap();
    assert_eq!(
        graph
            .iter()
            .map(|n| (n.reference.as_str(), n.waiting))
            .collect::<Vec<_>>(),
        [("a", false), ("b", true), ("c", true), ("d", false)]
    );
    assert_eq!(graph[2].depends_on.len(), 2);
    assert!(graph[2].depends_on[1].ignore_failure());
    assert_eq!(graph[2].depends_on[0].target(), "a");
    let w = s.workflow_waiting(wf.id).await.unwrap();
    assert_eq!(w.iter().map(|t| t.id).collect::<Vec<_>>(), [ids[1], ids[2]]);
    assert_eq!(w[0].deps, vec![(Some(TaskState::Available), false)]);
    assert_eq!(w[1].deps.len(), 2);
    // The waiting tasks are never promoted or claimed.
    s.task_promote(TaskPromoteParams {
        now: t0() + secs(3600),
        limit: 100,
    })
    .await
    .unwrap();
    let got = claim(s.as_ref(), "default", 10, t0() + secs(1)).await;
    let mut kinds: Vec<&str> = got.iter().map(|t| t.kind.as_str()).collect();
    kinds.sort_unstable();
    assert_eq!(kinds, ["a", "d"]);
    let a = got.iter().find(|t| t.kind == "a").unwrap();
    s.task_complete_many(TaskCompleteManyParams {
        items: &[done(a, json!({"rows": 3}))],
        now: t0() + secs(2),
        fail_rule: docket_core::task::standard_fail_rule,
    })
    .await
    .unwrap();
    let w = s.workflow_waiting(wf.id).await.unwrap();
    assert_eq!(w[0].deps, vec![(Some(TaskState::Completed), false)]);
    // What waits on a: b and c (with all their dependencies); on d: nothing.
    let on_a = s.workflow_waiting_on(&[a.id]).await.unwrap();
    assert_eq!(on_a, w);
    assert!(s.workflow_waiting_on(&[ids[3]]).await.unwrap().is_empty());
    assert!(s.workflow_waiting_on(&[]).await.unwrap().is_empty());
    assert_eq!(
        s.workflow_waiting_on(&[ids[1], ids[3]])
            .await
            .unwrap()
            .len(),
        1,
        "c waits on b"
    );
    // Release b, cancel c; again: nothing more changes.
    let apply = || {
        s.workflow_apply(WorkflowApplyParams {
            release: vec![ids[1]],
            cancel: vec![ids[2]],
            now: t0() + secs(3),
        })
    };
    assert_eq!(
        apply().await.unwrap(),
        WorkflowApplied {
            released: vec![ids[1]],
            cancelled: 1
        }
    );
    assert_eq!(apply().await.unwrap(), WorkflowApplied::default());
    let b_task = s.task_get(ids[1]).await.unwrap().unwrap();
    assert_eq!(
        (b_task.state, b_task.run_at),
        (TaskState::Available, t0() + secs(3))
    );
    let c_task = s.task_get(ids[2]).await.unwrap().unwrap();
    assert_eq!(c_task.state, TaskState::Cancelled);
    assert!(s.workflow_waiting(wf.id).await.unwrap().is_empty());
    let got = claim(s.as_ref(), "default", 10, t0() + secs(4)).await;
    assert_eq!(got.iter().map(|t| t.id).collect::<Vec<_>>(), [ids[1]]);
    assert_eq!(
        s.workflow_dep_results(ids[1]).await.unwrap(),
        vec![("a".to_string(), Some(json!({"rows": 3})))]
    );
    assert_eq!(
        s.workflow_dep_results(ids[2]).await.unwrap().len(),
        2,
        "a, and b without a result yet"
    );
    assert!(s.workflow_dep_results(ids[0]).await.unwrap().is_empty());
    // Many tasks at once (a claim's workflow tasks): the same rows, by task.
    let many = s
        .workflow_dep_results_many(&[ids[2], ids[0], ids[1]])
        .await
        .unwrap();
    let mut one_by_one = vec![];
    for id in [ids[1], ids[2]] {
        for (r, v) in s.workflow_dep_results(id).await.unwrap() {
            one_by_one.push((id, r, v));
        }
    }
    assert_eq!(many, one_by_one);
    assert!(s.workflow_dep_results_many(&[]).await.unwrap().is_empty());
    let graph = s.workflow_graph(wf.id).await.unwrap();
    assert!(graph.iter().all(|n| !n.waiting));
    assert_eq!(graph[2].state, TaskState::Cancelled);
    // Another batch has no graph.
    assert!(s.workflow_graph(wf.id + 1000).await.unwrap().is_empty());

    // Tasks added at run time: e waits on b (already there), f on e ignoring its failure.
    let add = |tasks, refs: &[&str], deps| {
        s.batch_add(BatchAddParams {
            id: wf.id,
            tasks,
            seal: false,
            refs: refs.iter().map(|r| r.to_string()).collect(),
            deps,
            now: t0() + secs(5),
        })
    };
    let (_, added) = add(
        vec![waiting("e"), waiting("f")],
        &["e", "f"],
        vec![vec![(Existing(ids[1]), false)], vec![(New(0), true)]],
    )
    .await
    .unwrap();
    let graph = s.workflow_graph(wf.id).await.unwrap();
    assert_eq!(graph.len(), 6);
    assert_eq!((graph[4].reference.as_str(), graph[4].waiting), ("e", true));
    assert_eq!(graph[4].depends_on[0].target(), "b");
    assert!(graph[5].depends_on[0].ignore_failure());
    assert_eq!(graph[5].depends_on[0].target(), "e");
    let on_b = s.workflow_waiting_on(&[ids[1]]).await.unwrap();
    assert_eq!(on_b.iter().map(|w| w.id).collect::<Vec<_>>(), [added[0].id]);
    // A ref the workflow has is refused, and nothing is written.
    assert!(matches!(
        add(vec![member("x")], &["a"], vec![vec![]]).await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(s.workflow_graph(wf.id).await.unwrap().len(), 6);
    // A new workflow's task cannot point outside it.
    assert!(s
        .batch_create(BatchCreateParams {
            name: None,
            open: false,
            callbacks: Callbacks::default(),
            tasks: vec![member("x")],
            refs: vec!["x".into()],
            deps: vec![vec![(Existing(ids[0]), false)]],
            now: t0(),
        })
        .await
        .is_err());

    // Retry: c (cancelled, with dependencies) waits again; a second retry finds nothing
    // failed; cancelled once more, c runs now; a (completed) is not run again.
    let retry = |run: Vec<i64>, wait: Vec<i64>| {
        s.workflow_retry(WorkflowRetryParams {
            id: wf.id,
            run,
            wait,
            now: t0() + secs(6),
        })
    };
    assert_eq!(
        retry(vec![], vec![ids[2]]).await.unwrap(),
        WorkflowRetried {
            run: vec![],
            waiting: 1
        }
    );
    let c = s.task_get(ids[2]).await.unwrap().unwrap();
    assert_eq!(
        (c.state, c.run_at, c.finished_at),
        (TaskState::Scheduled, wait, None)
    );
    assert_eq!(
        retry(vec![ids[2]], vec![ids[2]]).await.unwrap(),
        WorkflowRetried::default()
    );
    s.workflow_apply(WorkflowApplyParams {
        release: vec![],
        cancel: vec![ids[2]],
        now: t0() + secs(7),
    })
    .await
    .unwrap();
    let r = retry(vec![ids[2], ids[0]], vec![]).await.unwrap();
    assert_eq!(r.run, vec![(ids[2], "default".to_string())]);
    let c = s.task_get(ids[2]).await.unwrap().unwrap();
    assert_eq!(
        (c.state, c.run_at, c.finished_at),
        (TaskState::Available, t0() + secs(6), None)
    );
    assert!(matches!(
        s.workflow_retry(WorkflowRetryParams {
            id: wf.id + 1000,
            ..Default::default()
        })
        .await,
        Err(StoreError::NotFound(_))
    ));

    // A settled workflow retried is unsettled, and its callbacks fire again when it finishes
    // again: the succeeded callback this time.
    let solo = resolve(
        NewTask {
            queue: Some("solo".into()),
            ..nt("s")
        },
        t0(),
    );
    let (w2, solo) = s
        .batch_create(BatchCreateParams {
            name: None,
            open: false,
            callbacks: Callbacks {
                completed: Some(NewTask::new("again", json!(null))),
                succeeded: Some(NewTask::new("fine", json!(null))),
                ..Default::default()
            },
            tasks: vec![solo],
            refs: vec!["s".into()],
            deps: vec![vec![]],
            now: t0(),
        })
        .await
        .unwrap();
    let settle2 = |now| {
        s.batch_settle(BatchSettleParams {
            id: w2.id,
            rule: rule(now),
            now,
        })
    };
    let got = claim(s.as_ref(), "solo", 10, t0() + secs(8)).await;
    s.task_fail_many(TaskFailManyParams {
        items: &[TaskFail {
            permanent: true,
            ..fail(&got[0], "no")
        }],
        worker: None,
        now: t0() + secs(8),
        fail_rule: docket_core::task::standard_fail_rule,
    })
    .await
    .unwrap();
    let first = settle2(t0() + secs(9)).await.unwrap().unwrap();
    assert_eq!(
        first.fired.keys().cloned().collect::<Vec<_>>(),
        ["completed"]
    );
    let r = s
        .workflow_retry(WorkflowRetryParams {
            id: w2.id,
            run: vec![solo[0].id],
            wait: vec![],
            now: t0() + secs(10),
        })
        .await
        .unwrap();
    assert_eq!(r.run.len(), 1);
    let b = s.batch_get(w2.id).await.unwrap().unwrap();
    assert!(b.settled_at.is_none() && b.fired.is_empty());
    assert_eq!(s.batch_unsettled(w2.id - 1, 10).await.unwrap(), vec![w2.id]);
    let t = s.task_get(solo[0].id).await.unwrap().unwrap();
    assert!(t.max_attempts > t.attempt, "one more attempt allowed");
    let got = claim(s.as_ref(), "solo", 10, t0() + secs(11)).await;
    assert_eq!(got.len(), 1);
    s.task_complete_many(TaskCompleteManyParams {
        items: &[done(&got[0], json!(null))],
        now: t0() + secs(11),
        fail_rule: docket_core::task::standard_fail_rule,
    })
    .await
    .unwrap();
    let second = settle2(t0() + secs(12)).await.unwrap().unwrap();
    assert_eq!(
        second.fired.keys().cloned().collect::<Vec<_>>(),
        ["completed", "succeeded"]
    );
}
