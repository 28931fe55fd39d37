//! Pickup latency: tasks enqueued at a steady rate and the time until each is claimed, with
//! a per-step breakdown when the engine's probe marks are on.

use super::args::Mode;
use super::phases::{bench_client, pct, start_pool, start_server, Noop};
use anyhow::Result;
use docket_core::NewTask;
use docket_engine::Engine;
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Latencies in ms: (from enqueue return, from enqueue call start) per task, in enqueue order.
/// One task of the latency phase: its id, when its enqueue was called and returned, and when
/// its handler started (None: it never ran).
pub(super) struct Pickup {
    id: i64,
    call: Instant,
    ret: Instant,
    start: Option<Instant>,
}

impl Pickup {
    /// (from enqueue return, from enqueue call start) in ms; NaN when it never ran.
    pub(super) fn ms(&self) -> (f64, f64) {
        match self.start {
            Some(st) => (
                st.saturating_duration_since(self.ret).as_secs_f64() * 1000.0,
                st.saturating_duration_since(self.call).as_secs_f64() * 1000.0,
            ),
            None => (f64::NAN, f64::NAN),
        }
    }
}

/// The latency phase: `rate` single enqueues per second for `secs` through `enqueue`, worked by
/// `c` idle workers (in-process or over HTTP) of `worker` — another node when they differ.
pub(super) async fn latency(
    enqueue: &Engine,
    worker: &Engine,
    rate: u32,
    secs: u32,
    c: usize,
    mode: Mode,
    auth: bool,
) -> Result<Vec<Pickup>> {
    let engine = worker;
    let total = (rate * secs) as usize;
    let starts = Arc::new(Mutex::new(HashMap::new()));
    let done = Arc::new(AtomicUsize::new(0));
    let all = Arc::new(tokio::sync::Notify::new());
    let mut stoppers = vec![];
    match mode {
        Mode::Inproc => {
            let h = Noop {
                done: done.clone(),
                target: total,
                all_done: all.clone(),
                starts: Some(starts.clone()),
            };
            let (stop, jh) = start_pool(engine, "latency", c, 100, 1, h);
            stoppers.push((stop, jh));
        }
        Mode::Http | Mode::PgTask => {
            let (addr, shutdown) = start_server(engine, auth).await?;
            for w in 0..c {
                let client = bench_client(engine, &addr, auth).await?;
                let (starts, done, all, stop) =
                    (starts.clone(), done.clone(), all.clone(), shutdown.clone());
                let jh = tokio::spawn(async move {
                    while !stop.is_cancelled() {
                        let Ok(tasks) = client
                            .claim(
                                "latency",
                                &format!("lat-{w}"),
                                &[],
                                1,
                                Duration::from_secs(30),
                                Duration::from_secs(2),
                            )
                            .await
                        else {
                            continue;
                        };
                        for t in tasks {
                            starts.lock().expect("lock").insert(t.id, Instant::now());
                            let lease = t.lease.clone().expect("lease").token;
                            let _ = client.complete(t.id, &lease, serde_json::Value::Null).await;
                            if done.fetch_add(1, Ordering::Relaxed) + 1 >= total {
                                all.notify_one();
                            }
                        }
                    }
                });
                stoppers.push((shutdown.clone(), jh));
            }
        }
    }
    // Let the workers reach their idle wait.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let every = Duration::from_secs_f64(1.0 / rate as f64);
    let t0 = Instant::now();
    let mut sent = Vec::with_capacity(total);
    for i in 0..total {
        tokio::time::sleep_until((t0 + every * i as u32).into()).await;
        let call = Instant::now();
        let t = enqueue
            .enqueue_many(vec![NewTask {
                queue: Some("latency".into()),
                ..NewTask::new("noop", json!({"i": i}))
            }])
            .await?;
        sent.push((t[0].id, call, Instant::now()));
    }
    let _ = tokio::time::timeout(Duration::from_secs(30), all.notified()).await;
    for (s, h) in stoppers {
        s.cancel();
        let _ = h.await;
    }
    let starts = starts.lock().expect("lock");
    Ok(sent
        .into_iter()
        .map(|(id, call, ret)| Pickup {
            id,
            call,
            ret,
            start: starts.get(&id).copied(),
        })
        .collect())
}

/// Prints p50/p99 of each step of the pickups in `lat`, from the engine's `marks`: enqueue
/// return → claim start (negative when the claim started first, woken by the insert before
/// the enqueue call returned), the claim statement, claimed → dispatched (in-process: the
/// worker's buffer and slot) and dispatched (HTTP: claimed) → handler start.
pub(super) fn print_breakdown(lat: &[Pickup], marks: &[docket_engine::probe::Mark]) {
    use docket_engine::probe::Step;
    let ms = |a: Instant, b: Instant| -> f64 {
        if b >= a {
            (b - a).as_secs_f64() * 1000.0
        } else {
            -((a - b).as_secs_f64() * 1000.0)
        }
    };
    let find = |step: Step, id: i64| marks.iter().find(|m| m.step == step && m.id == id);
    let mut steps: Vec<(&str, Vec<f64>)> = [
        "enqueue return -> wake",
        "enqueue return -> claim start",
        "claim statement",
        "claimed -> dispatched",
        "dispatched -> handler",
        "total",
    ]
    .into_iter()
    .map(|n| (n, vec![]))
    .collect();
    for p in lat {
        let (Some(start), Some(claimed)) = (p.start, find(Step::Claimed, p.id)) else {
            continue;
        };
        // The claim that returned it: the last claim started before it came back.
        let Some(cs) = marks
            .iter()
            .rfind(|m| m.step == Step::ClaimStart && m.at <= claimed.at)
        else {
            continue;
        };
        // The first wake-up issued after the enqueue was called (insert or notification).
        if let Some(w) = marks
            .iter()
            .find(|m| m.step == Step::Wake && m.at >= p.call)
        {
            steps[0].1.push(ms(p.ret, w.at));
        }
        steps[1].1.push(ms(p.ret, cs.at));
        steps[2].1.push(ms(cs.at, claimed.at));
        let dispatched = find(Step::Dispatched, p.id).map_or(claimed.at, |d| d.at);
        steps[3].1.push(ms(claimed.at, dispatched));
        steps[4].1.push(ms(dispatched, start));
        steps[5].1.push(ms(p.ret, start));
    }
    println!("pickup breakdown (ms, p50 / p99):");
    for (name, mut v) in steps {
        v.sort_by(|x, y| x.partial_cmp(y).expect("no NaN"));
        println!(
            "  {name:<32} {:>7.3} / {:>7.3}  ({} tasks)",
            pct(&v, 50.0),
            pct(&v, 99.0),
            v.len()
        );
    }
}
