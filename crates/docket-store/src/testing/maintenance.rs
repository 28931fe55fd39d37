//! Conformance cases: maintenance beside claims — the ring turning, waiting tasks left to claims.

use super::fixtures::*;

/// The ring of slots (PostgreSQL's migration 0021): whatever a turn moves or truncates, every
/// task keeps its state, its lease and its unique key. Elsewhere the call does nothing.
pub(super) async fn tasks_survive_the_ring_turning(b: Bundle) {
    let s = &*b.store;
    let turn = |now: Timestamp, every: Duration| TaskRotateParams {
        now,
        every,
        min_fill_bytes: 0,
        idle_every: Duration::ZERO,
        lock_timeout: Duration::from_secs(5),
        batch: 2,
        most_moved: i64::MAX,
    };
    let full = |now: Timestamp| TaskRotateParams {
        most_moved: 5,
        ..turn(now, Duration::ZERO)
    };
    let mut keyed = nt("keyed");
    keyed.unique_key = Some("ring-1".into());
    let mut later = nt("later");
    later.run_at = Some(t0() + secs(60));
    let mut v = vec![nt("running"), keyed.clone(), later];
    v.extend((0..5).map(|i| nt(&format!("waiting{i}"))));
    let ids: Vec<i64> = insert(s, v, t0()).await.iter().map(|t| t.id).collect();
    let mut running = claim(s, "default", 1, t0()).await;
    assert_eq!(running[0].kind, "running");
    let running = running.remove(0);
    let pg = s.backend() == Backend::Postgres;
    // Four turns come back to the slot the tasks went into: it is emptied into slot 0 (in
    // batches of 2, then the rest under the lock) and truncated.
    let mut moved = 0;
    for i in 1..=4 {
        if i == 4 && pg {
            // Six tasks are left in the slot to empty: more than 5 wait for the backlog to drain.
            let r = s.task_rotate(full(t0() + secs(i))).await.unwrap();
            assert_eq!(r, Rotation::Full);
        }
        let r = s
            .task_rotate(turn(t0() + secs(i), Duration::ZERO))
            .await
            .unwrap();
        match r {
            Rotation::Turned { slot, moved: m, .. } => {
                assert!(pg, "{r:?}");
                assert_eq!(slot, ((i as i16) % 4) + 1, "turn {i}");
                moved += m;
            }
            other => {
                assert!(!pg, "{other:?}");
                let want = match s.backend() {
                    // Nothing finished yet to move to docket_tasks_done.
                    Backend::MySql => Rotation::Archived { moved: 0 },
                    _ => Rotation::Unsupported,
                };
                assert_eq!(other, want);
            }
        }
    }
    if pg {
        // The running task and the five waiting ones were in the ring; the unique and the
        // scheduled task were never there.
        assert_eq!(moved, 6);
        // A turn younger than `every` is not due.
        let r = s.task_rotate(turn(t0() + secs(5), Duration::from_secs(60)));
        assert_eq!(r.await.unwrap(), Rotation::NotDue);
        // A slot filling slowly (far fewer bytes than asked for) waits for `idle_every`, then
        // the ring turns whatever the slot holds.
        let quiet = |now: Timestamp, idle_every: Duration| TaskRotateParams {
            min_fill_bytes: i64::MAX,
            idle_every,
            ..turn(now, Duration::ZERO)
        };
        let r = s.task_rotate(quiet(t0() + secs(5), Duration::from_secs(60)));
        assert_eq!(r.await.unwrap(), Rotation::NotDue);
        let r = s.task_rotate(quiet(t0() + secs(5), Duration::from_secs(1)));
        assert!(matches!(r.await.unwrap(), Rotation::Turned { .. }));
    }
    for id in &ids {
        assert!(s.task_get(*id).await.unwrap().is_some(), "task {id} lost");
    }
    // The lease still holds; the key is still taken.
    let again = insert(s, vec![keyed], t0()).await;
    assert_eq!((again[0].id, again[0].inserted), (ids[1], Some(false)));
    let out = s
        .task_complete_many(TaskCompleteManyParams {
            fail_rule: docket_core::task::standard_fail_rule,
            items: &[done(&running, json!("after the turns"))],
            now: t0() + secs(5),
        })
        .await
        .unwrap();
    assert!(
        matches!(
            out[0],
            LeaseOutcome::Ok {
                state: TaskState::Completed,
                ..
            }
        ),
        "{out:?}"
    );
    let got = claim(s, "default", 10, t0() + secs(5)).await;
    assert_eq!(got.len(), 6, "keyed and the five waiting: {got:?}");
    s.task_promote(TaskPromoteParams {
        now: t0() + secs(61),
        limit: 10,
    })
    .await
    .unwrap();
    let late = claim(s, "default", 10, t0() + secs(61)).await;
    assert_eq!(late.len(), 1);
    assert_eq!(late[0].kind, "later");
}

/// Maintenance never hides a waiting task from a claim: promote and expire lock only the rows
/// they change (MySQL finds them without locks, then locks them by primary key), so a claim made
/// while the jobs run still gets every available task. A locking scan would
/// lock, and at READ COMMITTED release again, the waiting rows it looked at, and the claim's
/// SKIP LOCKED would pass them over (seen: a claim of 2 waiting tasks answered none).
pub(super) async fn maintenance_leaves_waiting_tasks_to_claims(b: Bundle) {
    let s = b.store.clone();
    // The jobs on connections of their own, as another node's maintenance would run them.
    let other = s.clone();
    let now = t0() + secs(2);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let jobs = {
        let (other, stop) = (other.clone(), stop.clone());
        tokio::spawn(async move {
            let mut passes = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                other
                    .task_promote(TaskPromoteParams { now, limit: 1000 })
                    .await
                    .unwrap();
                other
                    .task_expire(TaskExpireParams { now, limit: 1000 })
                    .await
                    .unwrap();
                passes += 1;
            }
            passes
        })
    };
    for round in 0..40 {
        // Work for the jobs in another queue: due tasks to promote, tasks to expire.
        let mut fodder = vec![];
        for i in 0..4 {
            let mut n = nt("fodder");
            n.queue = Some("fodder".into());
            if i % 2 == 0 {
                n.run_at = Some(t0() + secs(1));
            } else {
                n.expires_at = Some(t0() + secs(1));
            }
            fodder.push(n);
        }
        insert(&*s, fodder, t0()).await;
        insert(&*s, (0..10).map(|_| nt("w")).collect(), t0()).await;
        let got = claim(&*s, "default", 10, now).await;
        assert_eq!(
            got.len(),
            10,
            "round {round}: a claim got {} of 10",
            got.len()
        );
        let items: Vec<TaskComplete> = got.iter().map(|t| done(t, json!(null))).collect();
        s.task_complete_many(TaskCompleteManyParams {
            items: &items,
            now,
            fail_rule: docket_core::task::standard_fail_rule,
        })
        .await
        .unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(jobs.await.unwrap() > 0, "the jobs ran meanwhile");
}
