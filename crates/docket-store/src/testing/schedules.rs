//! Conformance cases: schedules.

use super::fixtures::*;
use docket_core::ScheduleSpec;

fn spec(name: &str, every: u64) -> ScheduleSpec {
    serde_json::from_value(json!({
        "name": name,
        "every": format!("{every}s"),
        "task": {"kind": "tick", "queue": "sched"},
    }))
    .expect("a schedule spec")
}

/// Schedules: create and replace (keeping paused and last run), get and list by name, due and
/// next due (paused ones are neither), fire exactly once per occurrence, unique keys, pause and
/// resume, delete (the tasks stay).
pub(super) async fn schedules_put_fire_pause_and_delete(b: Bundle) {
    let s = &*b.store;
    assert_eq!(s.schedule_next_due().await.unwrap(), None);
    let a = s
        .schedule_put(SchedulePutParams {
            spec: &spec("a", 60),
            next_run_at: t0() + secs(60),
            now: t0(),
        })
        .await
        .unwrap();
    assert_eq!(
        (a.paused, a.next_run_at, a.last_run_at),
        (false, t0() + secs(60), None)
    );
    s.schedule_put(SchedulePutParams {
        spec: &spec("b", 30),
        next_run_at: t0() + secs(30),
        now: t0(),
    })
    .await
    .unwrap();
    assert_eq!(
        s.schedule_list()
            .await
            .unwrap()
            .iter()
            .map(|x| x.spec.name.clone())
            .collect::<Vec<_>>(),
        vec!["a", "b"]
    );
    assert_eq!(s.schedule_next_due().await.unwrap(), Some(t0() + secs(30)));
    // Defer: only from the occurrence read; fires nothing; a paused schedule does not move.
    let defer = |from: i64, to: i64| ScheduleDeferParams {
        name: "b",
        occurrence: t0() + secs(from),
        next_run_at: t0() + secs(to),
        now: t0(),
    };
    assert!(
        !s.schedule_defer(defer(31, 45)).await.unwrap(),
        "stale occurrence"
    );
    assert!(s.schedule_defer(defer(30, 45)).await.unwrap());
    assert_eq!(
        s.schedule_get("b").await.unwrap().unwrap().next_run_at,
        t0() + secs(45)
    );
    assert!(s.schedule_defer(defer(45, 30)).await.unwrap(), "and back");
    assert!(!s
        .schedule_defer(ScheduleDeferParams {
            name: "nope",
            ..defer(30, 40)
        })
        .await
        .unwrap());
    assert!(s
        .schedule_due(ScheduleDueParams {
            now: t0() + secs(29),
            limit: 10
        })
        .await
        .unwrap()
        .is_empty());
    let due = s
        .schedule_due(ScheduleDueParams {
            now: t0() + secs(60),
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(
        due.iter().map(|x| x.spec.name.clone()).collect::<Vec<_>>(),
        vec!["b", "a"],
        "soonest first"
    );
    assert_eq!(
        s.schedule_due(ScheduleDueParams {
            now: t0() + secs(60),
            limit: 1
        })
        .await
        .unwrap()
        .len(),
        1,
        "limit"
    );

    // Fire b's occurrence at +30 s: one task, the schedule moves on; a second fire of the
    // same occurrence (another node) does nothing.
    let task = |key: Option<&str>| {
        resolve(
            NewTask {
                queue: Some("sched".into()),
                unique_key: key.map(String::from),
                ..NewTask::new("tick", json!({}))
            },
            t0() + secs(30),
        )
    };
    let fire = |occurrence: i64, next: i64, key: Option<&str>| ScheduleFireParams {
        name: "b".into(),
        occurrence: t0() + secs(occurrence),
        next_run_at: t0() + secs(next),
        task: task(key),
        now: t0() + secs(occurrence),
    };
    let fired = s
        .schedule_fire(fire(30, 60, Some("schedule:b:1")))
        .await
        .unwrap();
    let ScheduleFired::Enqueued(t) = fired else {
        panic!("fired with a task: {fired:?}")
    };
    assert_eq!((t.kind.as_str(), t.queue.as_str()), ("tick", "sched"));
    assert_eq!(
        s.schedule_fire(fire(30, 60, Some("schedule:b:1")))
            .await
            .unwrap(),
        ScheduleFired::NotDue
    );
    let b1 = s.schedule_get("b").await.unwrap().unwrap();
    assert_eq!(
        (b1.next_run_at, b1.last_run_at, b1.last_task_id),
        (t0() + secs(60), Some(t0() + secs(30)), Some(t.id))
    );
    assert_eq!(
        s.task_find_by_unique_key("schedule:b:1")
            .await
            .unwrap()
            .map(|t| t.id),
        Some(t.id)
    );
    assert_eq!(
        s.task_find_by_unique_key("schedule:b:0").await.unwrap(),
        None
    );
    // The next occurrence whose unique key is held by an unfinished task: fired, no task.
    let again = s
        .schedule_fire(fire(60, 90, Some("schedule:b:1")))
        .await
        .unwrap();
    assert_eq!(again, ScheduleFired::KeyHeld);
    assert_eq!(
        s.schedule_get("b").await.unwrap().unwrap().next_run_at,
        t0() + secs(90)
    );

    // Replacing keeps paused and last run; pause hides it from due and next due.
    let paused = s
        .schedule_pause(SchedulePauseParams {
            name: "a",
            paused: true,
            next_run_at: None,
            now: t0(),
        })
        .await
        .unwrap()
        .unwrap();
    assert!(paused.paused);
    let a2 = s
        .schedule_put(SchedulePutParams {
            spec: &spec("a", 120),
            next_run_at: t0() + secs(120),
            now: t0(),
        })
        .await
        .unwrap();
    assert!(a2.paused, "replacing keeps paused");
    assert!(
        !s.schedule_defer(ScheduleDeferParams {
            name: "a",
            occurrence: a2.next_run_at,
            next_run_at: t0() + secs(500),
            now: t0(),
        })
        .await
        .unwrap(),
        "a paused schedule is not deferred"
    );
    assert_eq!(a2.spec.every, Some(Duration::from_secs(120)));
    assert!(s
        .schedule_due(ScheduleDueParams {
            now: t0() + secs(1000),
            limit: 10
        })
        .await
        .unwrap()
        .iter()
        .all(|x| x.spec.name != "a"));
    assert_eq!(s.schedule_next_due().await.unwrap(), Some(t0() + secs(90)));
    // A paused schedule does not fire.
    let fire_a = ScheduleFireParams {
        name: "a".into(),
        occurrence: t0() + secs(120),
        next_run_at: t0() + secs(240),
        task: task(None),
        now: t0() + secs(120),
    };
    assert_eq!(
        s.schedule_fire(fire_a).await.unwrap(),
        ScheduleFired::NotDue
    );
    let resumed = s
        .schedule_pause(SchedulePauseParams {
            name: "a",
            paused: false,
            next_run_at: Some(t0() + secs(500)),
            now: t0(),
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (resumed.paused, resumed.next_run_at),
        (false, t0() + secs(500))
    );
    assert_eq!(
        s.schedule_pause(SchedulePauseParams {
            name: "nope",
            paused: true,
            next_run_at: None,
            now: t0()
        })
        .await
        .unwrap(),
        None
    );

    // Delete: gone, its task stays; deleting again says so.
    assert!(s.schedule_delete("b").await.unwrap());
    assert!(!s.schedule_delete("b").await.unwrap());
    assert_eq!(s.schedule_get("b").await.unwrap(), None);
    assert!(s.task_get(t.id).await.unwrap().is_some());
}
