//! What the backends share that does not depend on the SQL dialect: the in-process wake-ups
//! of the backends without LISTEN/NOTIFY (SQLite, MySQL) and the run-log fragment expansion.
//! The rules every backend applies (deadline, lease, failure) are `docket_core::lease`.

use crate::Wake;

/// Wake-ups within one process: what a backend without LISTEN/NOTIFY sends after each commit
/// (other processes' changes are found by polling).
#[derive(Debug, Clone)]
pub(crate) struct LocalWake(tokio::sync::broadcast::Sender<Wake>);

impl Default for LocalWake {
    fn default() -> Self {
        LocalWake(tokio::sync::broadcast::channel(1024).0)
    }
}

impl LocalWake {
    /// Claimers of these queues should look again (each queue once).
    pub(crate) fn queues<'a>(&self, queues: impl IntoIterator<Item = &'a String>) {
        let mut qs: Vec<&String> = queues.into_iter().collect();
        qs.sort();
        qs.dedup();
        for q in qs {
            // No receiver (no engine listening) is fine.
            let _ = self.0.send(Wake::Queue(q.clone()));
        }
    }

    /// Every claimer should look again.
    pub(crate) fn all(&self) {
        let _ = self.0.send(Wake::All);
    }

    /// A subscription: every wake-up from now on; `Wake::All` when some were missed.
    pub(crate) fn listen(&self) -> tokio::sync::mpsc::Receiver<Wake> {
        let mut sub = self.0.subscribe();
        let (tx, rx) = tokio::sync::mpsc::channel(1024);
        tokio::spawn(async move {
            loop {
                let w = match sub.recv().await {
                    Ok(w) => w,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => Wake::All,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                };
                if tx.send(w).await.is_err() {
                    return;
                }
            }
        });
        rx
    }
}

/// Expands each `{runs:OUTCOME:NOW}` marker of a statement into the backend's assignments that
/// append a run log entry for the attempt the row holds (`template(now, outcome)`, where `now`
/// is the SQL expression of the end time) and count it. The entry's shape is
/// [`docket_core::run::StoredRun`]; the oldest entry goes once the log holds
/// [`docket_core::run::RUN_LOG_KEEP`]. Statements keep one text per backend in `sql/*.sql`;
/// only this fragment is spelled once per dialect.
pub(crate) fn expand_runs(sql: &str, template: fn(&str, &str) -> String) -> String {
    let mut out = String::with_capacity(sql.len() + 512);
    let mut rest = sql;
    while let Some(i) = rest.find("{runs:") {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 6..];
        let end = tail.find('}').expect("a {runs:…} marker is closed");
        let (outcome, now) = tail[..end]
            .split_once(':')
            .expect("a {runs:OUTCOME:NOW} marker names the time");
        out.push_str(&template(now, outcome));
        rest = &tail[end + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_markers_expand_in_place() {
        let t = |now: &str, out: &str| format!("R({now},{out})");
        assert_eq!(
            expand_runs(
                "SET a = 1, {runs:completed:$2} WHERE {runs:cancelled:?1}",
                t
            ),
            "SET a = 1, R($2,completed) WHERE R(?1,cancelled)"
        );
        assert_eq!(expand_runs("no marker", t), "no marker");
    }
}
