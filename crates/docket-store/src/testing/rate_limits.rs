//! Conformance cases: rate limits.

use super::fixtures::*;
use docket_core::rate_limit::{Kind, RateLimitSpec};

fn rl(kind: &str, key: &str) -> NewTask {
    NewTask {
        queue: Some("rl".into()),
        rate_limit: Some(key.into()),
        ..nt(kind)
    }
}

fn spec(kind: Kind, limit: i64, period_ms: Option<u64>) -> RateLimitSpec {
    RateLimitSpec {
        kind,
        limit,
        period: period_ms.map(Duration::from_millis),
    }
}

fn ms(t: i64) -> Timestamp {
    docket_core::time::add_ms(t0(), t)
}

/// Rate limits: a window limit admits `limit` per window and then holds the key's tasks
/// (available, no attempt spent) without holding the queue's other tasks; partitions have
/// their own budgets; a bucket admits its burst and then one per interval; a concurrent limit
/// counts running tasks; a task naming no existing limit runs unlimited; a change starts the
/// keys afresh; totals (admitted, delayed, keys, blocked) add up; delete and prune.
pub(super) async fn rate_limits_admit_at_claim(b: Bundle) {
    let s = &*b.store;
    assert!(s.rate_limit_list(t0()).await.unwrap().is_empty());
    assert!(s.rate_limit_get("stripe", t0()).await.unwrap().is_none());
    let l = s
        .rate_limit_put("stripe", &spec(Kind::Window, 2, Some(1000)), t0())
        .await
        .unwrap();
    assert_eq!(
        (l.name.as_str(), l.kind, l.limit),
        ("stripe", Kind::Window, 2)
    );
    assert_eq!(l.period, Some(Duration::from_secs(1)));
    assert_eq!((l.keys, l.admitted, l.delayed, l.blocked), (0, 0, 0, 0));

    // Five of one key, two of a partition, and a plain task last in claim order.
    let mut tasks = vec![];
    for _ in 0..5 {
        tasks.push(rl("charge", "stripe"));
    }
    tasks.push(rl("charge", "stripe:acme"));
    tasks.push(rl("charge", "stripe:acme"));
    tasks.push(rl("charge", "stripe:acme"));
    tasks.push(NewTask {
        queue: Some("rl".into()),
        ..nt("plain")
    });
    let ins = insert(s, tasks, t0()).await;
    assert_eq!(ins[0].rate_limit.as_deref(), Some("stripe"));
    let got = claim(s, "rl", 100, ms(100)).await;
    let keys: Vec<&str> = got.iter().filter_map(|t| t.rate_limit.as_deref()).collect();
    assert_eq!(keys, ["stripe", "stripe", "stripe:acme", "stripe:acme"]);
    assert!(got.iter().any(|t| t.kind == "plain"));
    // Within the window: nothing of either key, however often a claim looks.
    assert!(claim(s, "rl", 100, ms(500)).await.is_empty());
    assert!(claim(s, "rl", 100, ms(999)).await.is_empty());
    let held = s.task_get(ins[4].id).await.unwrap().unwrap();
    assert_eq!((held.state, held.attempt), (TaskState::Available, 0));
    let l = s.rate_limit_get("stripe", ms(999)).await.unwrap().unwrap();
    assert_eq!((l.keys, l.admitted, l.blocked), (2, 4, 2));
    // The first claim met both keys at their limit.
    assert_eq!(l.delayed, 2);
    // The next window: two more of stripe, the last of acme.
    let got = claim(s, "rl", 100, ms(1000)).await;
    assert_eq!(got.len(), 3);
    let got = claim(s, "rl", 100, ms(2000)).await;
    assert_eq!(got.len(), 1);
    assert!(claim(s, "rl", 100, ms(3000)).await.is_empty());

    // A change applies at once: a bucket of 3 per second, fresh.
    s.rate_limit_put("stripe", &spec(Kind::Bucket, 3, Some(1000)), ms(3000))
        .await
        .unwrap();
    let ins = insert(s, (0..6).map(|_| rl("b", "stripe")).collect(), ms(3000)).await;
    assert_eq!(claim(s, "rl", 100, ms(3000)).await.len(), 3);
    assert!(claim(s, "rl", 100, ms(3300)).await.is_empty());
    assert_eq!(claim(s, "rl", 100, ms(3334)).await.len(), 1);
    assert_eq!(claim(s, "rl", 100, ms(4000)).await.len(), 2);
    assert!(ins
        .iter()
        .all(|t| t.rate_limit.as_deref() == Some("stripe")));

    // Concurrent: two at once; a finish frees a place.
    s.rate_limit_put("pdf", &spec(Kind::Concurrent, 2, None), ms(4000))
        .await
        .unwrap();
    insert(s, (0..4).map(|_| rl("pdf", "pdf")).collect(), ms(4000)).await;
    let got = claim(s, "rl", 100, ms(4000)).await;
    assert_eq!(got.len(), 2);
    assert!(claim(s, "rl", 100, ms(4001)).await.is_empty());
    s.task_complete_many(TaskCompleteManyParams {
        items: &[done(&got[0], json!(null))],
        now: ms(4002),
        fail_rule: docket_core::task::standard_fail_rule,
    })
    .await
    .unwrap();
    assert_eq!(claim(s, "rl", 100, ms(4003)).await.len(), 1);
    assert!(claim(s, "rl", 100, ms(4004)).await.is_empty());

    // A key naming no limit: unlimited.
    insert(s, (0..3).map(|_| rl("x", "nosuch:1")).collect(), ms(5000)).await;
    assert_eq!(claim(s, "rl", 100, ms(5000)).await.len(), 3);

    let asked = [
        "pdf".to_string(),
        "nosuch".into(),
        "stripe".into(),
        "it's".into(),
    ];
    assert_eq!(s.rate_limit_names(&asked).await.unwrap(), ["pdf", "stripe"]);
    assert!(s.rate_limit_names(&[]).await.unwrap().is_empty());
    let all = s.rate_limit_list(ms(5000)).await.unwrap();
    let names: Vec<&str> = all.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["pdf", "stripe"]);
    assert_eq!(all[0].admitted, 3);

    // Prune: keys untouched since then go, their totals stay with the limit.
    let before = s.rate_limit_get("stripe", ms(5000)).await.unwrap().unwrap();
    assert_eq!(s.rate_limit_prune(ms(1500)).await.unwrap(), 1); // stripe:acme, last at 1000
    let after = s.rate_limit_get("stripe", ms(5000)).await.unwrap().unwrap();
    assert_eq!(after.keys, before.keys - 1);
    assert_eq!(
        (after.admitted, after.delayed),
        (before.admitted, before.delayed)
    );
    assert_eq!(s.rate_limit_prune(ms(1500)).await.unwrap(), 0);

    assert!(s.rate_limit_delete("pdf").await.unwrap());
    assert!(!s.rate_limit_delete("pdf").await.unwrap());
    assert!(s.rate_limit_get("pdf", ms(5000)).await.unwrap().is_none());
    // Its tasks now run unlimited.
    assert_eq!(claim(s, "rl", 100, ms(5001)).await.len(), 1);
}
