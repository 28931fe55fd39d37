//! Conformance cases: fair queues.

use super::fixtures::*;
use docket_core::QueueSettings;

fn part(queue: &str, kind: &str, p: Option<&str>) -> NewTask {
    NewTask {
        queue: Some(queue.into()),
        partition_key: p.map(str::to_string),
        ..nt(kind)
    }
}

/// Fair queues: a fair claim takes the partitions' first tasks, then their second, … (a
/// partition of weight w gives w per round), whatever the claim order; tasks without a
/// partition form one; a queue that is not fair keeps claim order; a partition limit holds
/// each partition to its number of running tasks.
pub(super) async fn fair_claims_take_partitions_in_turn(b: Bundle) {
    let s = &*b.store;
    let mut settings = QueueSettings {
        fair: true,
        partition_weights: Some([("b".to_string(), 2)].into()),
        ..QueueSettings::default()
    };
    s.queue_put(QueuePutParams {
        name: "fq",
        settings: &settings,
        now: t0(),
    })
    .await
    .unwrap();
    // Claim order: a's ten first, then b's three, c's two, one without a partition.
    let mut tasks = vec![];
    for i in 0..10 {
        tasks.push(part("fq", &format!("a{}", i + 1), Some("a")));
    }
    for i in 0..3 {
        tasks.push(part("fq", &format!("b{}", i + 1), Some("b")));
    }
    tasks.push(part("fq", "c1", Some("c")));
    tasks.push(part("fq", "c2", Some("c")));
    tasks.push(part("fq", "n1", None));
    let ins = insert(s, tasks, t0()).await;
    assert_eq!(ins[0].partition_key.as_deref(), Some("a"));
    let kinds = |ts: &[docket_core::Task]| {
        let mut k: Vec<String> = ts.iter().map(|t| t.kind.clone()).collect();
        k.sort();
        k
    };
    // Round one: a1 b1 c1 n1 and b2 (weight 2); then a2.
    let got = claim(s, "fq", 6, t0()).await;
    assert_eq!(kinds(&got), ["a1", "a2", "b1", "b2", "c1", "n1"]);
    // Round two, as far as it goes: c2, b3, then a3, a4 …
    let got = claim(s, "fq", 4, t0()).await;
    assert_eq!(kinds(&got), ["a3", "a4", "b3", "c2"]);

    // The same tasks in a queue that is not fair: claim order.
    let mut tasks = vec![];
    for i in 0..5 {
        tasks.push(part("plain", &format!("a{i}"), Some("a")));
    }
    tasks.push(part("plain", "b0", Some("b")));
    insert(s, tasks, t0()).await;
    let got = claim(s, "plain", 3, t0()).await;
    assert_eq!(kinds(&got), ["a0", "a1", "a2"]);

    // A partition limit of one: each partition runs one at a time.
    settings.partition_limit = Some(1);
    s.queue_put(QueuePutParams {
        name: "fl",
        settings: &settings,
        now: t0(),
    })
    .await
    .unwrap();
    let mut tasks = vec![];
    for i in 0..3 {
        tasks.push(part("fl", &format!("a{i}"), Some("a")));
        tasks.push(part("fl", &format!("b{i}"), Some("b")));
    }
    let ins = insert(s, tasks, t0()).await;
    assert_eq!(ins[0].concurrency_key.as_deref(), Some("partition:fl:a"));
    let got = claim(s, "fl", 10, t0()).await;
    assert_eq!(kinds(&got), ["a0", "b0"]);
    assert!(claim(s, "fl", 10, t0()).await.is_empty());
}
