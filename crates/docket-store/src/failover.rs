//! Several database hosts in one URL, tried in order, as libpq's multi-host URLs with
//! `target_session_attrs=read-write` are (issue 38): `postgres://u@h1:5432,h2:5432/db`,
//! `mysql://root@h1:3311,h2:3312,h3:3313/db`. A node works through the first host that takes
//! writes; when that host goes away — killed, cut off, or no longer taking writes (a PostgreSQL
//! standby, a Galera node outside the primary component) — a watcher moves the node's pools to
//! the next host in the list that does, within about [`EVERY`] plus a connect timeout.
//! Connections made before the move are dropped as they are next handed out
//! ([`Switch::stale`]), so no statement goes to the old host once the move is made. A host
//! that comes back is used again only when the one in use goes away.

use crate::{Result, StoreError};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the watcher looks at the host in use.
pub const EVERY: Duration = Duration::from_secs(1);

/// How long one look at a host may take (connect and ask whether it takes writes).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// The URL of each host of `url`, in its order: `scheme://[userinfo@]h1[:p1],h2[:p2]/rest`
/// gives `scheme://[userinfo@]h1[:p1]/rest`, … A URL with one host gives itself.
///
/// # Errors
/// [`StoreError::Invalid`] for an empty host in the list (`h1,,h2`).
pub fn hosts(url: &str) -> Result<Vec<String>> {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return Ok(vec![url.to_string()]);
    };
    let rest = &url[scheme_end..];
    let auth_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..auth_end];
    // The userinfo ends at the last '@' (a password may hold '@' percent-encoded only, but
    // be lenient).
    let (user, hostlist) = match authority.rfind('@') {
        Some(i) => (&authority[..=i], &authority[i + 1..]),
        None => ("", authority),
    };
    if !hostlist.contains(',') {
        return Ok(vec![url.to_string()]);
    }
    let tail = &rest[auth_end..];
    hostlist
        .split(',')
        .map(|h| {
            if h.trim().is_empty() {
                return Err(StoreError::Invalid(format!(
                    "an empty host in the database URL's host list {hostlist:?}"
                )));
            }
            Ok(format!("{}{user}{}{tail}", &url[..scheme_end], h.trim()))
        })
        .collect()
}

/// The host a node works through now, and when it last moved (see the module).
#[derive(Debug)]
pub struct Switch {
    current: AtomicUsize,
    moved_at: Mutex<Option<Instant>>,
}

impl Switch {
    /// Starting on host `current` (its index in the URL's list).
    pub fn new(current: usize) -> Self {
        Switch {
            current: AtomicUsize::new(current),
            moved_at: Mutex::new(None),
        }
    }

    /// The index of the host in use.
    pub fn current(&self) -> usize {
        self.current.load(Ordering::Acquire)
    }

    /// Whether a connection `age` old was made before the last move (to the old host).
    pub fn stale(&self, age: Duration) -> bool {
        let at = *self.moved_at.lock().unwrap_or_else(|e| e.into_inner());
        at.is_some_and(|t| age > t.elapsed())
    }

    fn moved(&self, to: usize) {
        *self.moved_at.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        self.current.store(to, Ordering::Release);
    }
}

/// A store's hosts: each one's URL and connection options, and the [`Switch`] when there are
/// several (none with one host: nothing to watch).
#[derive(Debug)]
pub struct Hosts<O> {
    /// Each host's URL, in the URL's order.
    pub urls: Vec<String>,
    /// Each host's connection options (the backend's).
    pub options: Vec<O>,
    /// Where the node works now, with several hosts.
    pub switch: Option<Arc<Switch>>,
}

impl<O> Hosts<O> {
    /// The hosts of `url`, each one's `options`, and — with several — the first that `probe`
    /// finds taking writes.
    ///
    /// # Errors
    /// A bad URL or host list; with several hosts, none takes writes.
    pub async fn open<F, Fut>(
        url: &str,
        options: impl Fn(&str) -> Result<O>,
        probe: &F,
    ) -> Result<Self>
    where
        F: Fn(String) -> Fut,
        Fut: Future<Output = Result<()>>,
    {
        let urls = hosts(url)?;
        let options = urls
            .iter()
            .map(|u| options(u))
            .collect::<Result<Vec<_>>>()?;
        let switch = if urls.len() > 1 {
            Some(Arc::new(Switch::new(first_writable(&urls, probe).await?)))
        } else {
            None
        };
        Ok(Hosts {
            urls,
            options,
            switch,
        })
    }

    /// The index of the host the node works through now.
    pub fn current(&self) -> usize {
        self.switch.as_ref().map_or(0, |s| s.current())
    }
}

/// The first host of `urls` (in order) that `probe` finds taking writes.
///
/// # Errors
/// When none does: the error names every host with what it answered.
pub async fn first_writable<F, Fut>(urls: &[String], probe: &F) -> Result<usize>
where
    F: Fn(String) -> Fut,
    Fut: Future<Output = Result<()>>,
{
    let mut why = vec![];
    for (i, u) in urls.iter().enumerate() {
        match tokio::time::timeout(PROBE_TIMEOUT, probe(u.clone())).await {
            Ok(Ok(())) => return Ok(i),
            Ok(Err(e)) => why.push(format!("{}: {e}", redact(u))),
            Err(_) => why.push(format!("{}: no answer within {PROBE_TIMEOUT:?}", redact(u))),
        }
    }
    Err(StoreError::Database {
        kind: crate::DbErrorKind::Unavailable,
        message: format!("no database host takes writes: {}", why.join("; ")),
    })
}

/// Watches the host in use every [`EVERY`] and, when it stops taking writes, moves to the first
/// host that does: `apply(i)` points the node's pools at host `i`. Ends when `closed()` says
/// the store was closed.
pub fn watch<F, Fut, A, C>(urls: Vec<String>, switch: Arc<Switch>, probe: F, apply: A, closed: C)
where
    F: Fn(String) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<()>> + Send,
    A: Fn(usize) + Send + Sync + 'static,
    C: Fn() -> bool + Send + Sync + 'static,
{
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(EVERY).await;
            if closed() {
                return;
            }
            let now = switch.current();
            let ok = matches!(
                tokio::time::timeout(PROBE_TIMEOUT, probe(urls[now].clone())).await,
                Ok(Ok(()))
            );
            if ok {
                continue;
            }
            match first_writable(&urls, &probe).await {
                Ok(next) if next != now => {
                    tracing::warn!(
                        from = %redact(&urls[now]),
                        to = %redact(&urls[next]),
                        "the database host in use stopped taking writes: moved to the next one"
                    );
                    apply(next);
                    switch.moved(next);
                }
                // The same host answers again (a blip), or none does yet: look again.
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "no database host takes writes"),
            }
        }
    });
}

/// A URL without its password, for logs.
pub fn redact(url: &str) -> String {
    let Some(s) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    let rest = &url[s..];
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => match rest[..at].find(':') {
            Some(c) => format!("{}{}:***{}", &url[..s], &rest[..c], &rest[at..]),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_lists_split_into_one_url_per_host() {
        assert_eq!(
            hosts("mysql://root@127.0.0.1:3311,127.0.0.1:3312/db?x=1").unwrap(),
            [
                "mysql://root@127.0.0.1:3311/db?x=1",
                "mysql://root@127.0.0.1:3312/db?x=1"
            ]
        );
        assert_eq!(
            hosts("postgres://u:p@a,b:5433/d").unwrap(),
            ["postgres://u:p@a/d", "postgres://u:p@b:5433/d"]
        );
        assert_eq!(
            hosts("postgres://a,b").unwrap(),
            ["postgres://a", "postgres://b"]
        );
        assert_eq!(hosts("postgres://u@one/d").unwrap(), ["postgres://u@one/d"]);
        assert_eq!(hosts("sqlite://x.db").unwrap(), ["sqlite://x.db"]);
        assert!(hosts("mysql://root@a,,b/db").is_err());
    }

    #[test]
    fn passwords_stay_out_of_logs() {
        assert_eq!(
            redact("mysql://root:secret@h:1/db"),
            "mysql://root:***@h:1/db"
        );
        assert_eq!(redact("mysql://root@h:1/db"), "mysql://root@h:1/db");
    }

    #[test]
    fn connections_from_before_a_move_are_stale() {
        let s = Switch::new(0);
        assert!(!s.stale(Duration::from_secs(100)));
        s.moved(1);
        assert_eq!(s.current(), 1);
        assert!(s.stale(Duration::from_secs(100)));
        std::thread::sleep(Duration::from_millis(20));
        assert!(!s.stale(Duration::from_millis(1)));
    }
}
