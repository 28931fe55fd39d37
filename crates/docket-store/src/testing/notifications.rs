//! Conformance cases: the backend's identity, migrations, and wake-ups.

use super::fixtures::*;

/// `migrate` again is harmless; `backend` and `supports_listen_notify` agree (PostgreSQL's
/// LISTEN/NOTIFY carries other processes' changes; SQLite's listener only this process's);
/// and on both an insert arrives on the listener as a wake-up for its queue.
pub(super) async fn notifications_sinks_and_listen(b: Bundle) {
    let s = &*b.store;
    s.migrate().await.expect("migrating twice is harmless");
    assert_eq!(s.supports_listen_notify(), s.backend() == Backend::Postgres);
    let mut rx = s.listen().await.unwrap().expect("a listener");
    insert(
        s,
        vec![NewTask {
            queue: Some("woken".into()),
            ..nt("k")
        }],
        t0(),
    )
    .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(Wake::Queue(q))) if q == "woken" => break,
            Ok(Some(Wake::All)) => break,
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the listener closed"),
            Err(_) => panic!("no wake-up for the insert within 20 s"),
        }
    }
}
