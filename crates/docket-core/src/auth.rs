//! API tokens: their scopes, how a token is made and stored, and which scope each request
//! needs. The rules live here; the server applies them (see docs: operations/security.md).

use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;

/// What a token may do. `admin` may do everything.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Everything, including tokens and operator actions (cancel, retry, pause, …).
    Admin,
    /// Every read (`GET`), the dashboard read-only.
    Read,
    /// Create tasks and schedules.
    Enqueue,
    /// Claim, heartbeat, complete and fail tasks (optionally only of some queues).
    Work,
    /// Namespaces and durable processes.
    Process,
    /// Enqueue tasks of kind `sql` (needs `enqueue` too).
    Sql,
}

impl Scope {
    /// Every scope.
    pub const ALL: &'static [Scope] = &[
        Scope::Admin,
        Scope::Read,
        Scope::Enqueue,
        Scope::Work,
        Scope::Process,
        Scope::Sql,
    ];

    /// The scope's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Admin => "admin",
            Scope::Read => "read",
            Scope::Enqueue => "enqueue",
            Scope::Work => "work",
            Scope::Process => "process",
            Scope::Sql => "sql",
        }
    }

    /// Parses a scope name.
    ///
    /// # Errors
    /// A message listing the scopes.
    pub fn parse(s: &str) -> Result<Scope, String> {
        Scope::ALL
            .iter()
            .copied()
            .find(|x| x.as_str() == s)
            .ok_or_else(|| {
                format!("unknown scope {s:?}; scopes: admin, read, enqueue, work, process, sql")
            })
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one token was granted.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Grant {
    /// Its scopes.
    pub scopes: Vec<Scope>,
    /// With `work`: only these queues (empty: every queue).
    pub queues: Vec<String>,
}

impl Grant {
    /// Whether the grant includes `need` (`admin` includes every scope).
    pub fn allows(&self, need: Scope) -> bool {
        self.scopes.contains(&Scope::Admin) || self.scopes.contains(&need)
    }

    /// Whether the grant may work tasks of `queue`.
    pub fn allows_queue(&self, queue: &str) -> bool {
        self.scopes.contains(&Scope::Admin)
            || self.queues.is_empty()
            || self.queues.iter().any(|q| q == queue)
    }
}

/// Prefix of every token, so a leaked one is recognisable (secret scanners, logs).
pub const TOKEN_PREFIX: &str = "dkt_";

/// A new random token: [`TOKEN_PREFIX`] and 64 hex digits (256 bits from the OS's CSPRNG).
pub fn new_token() -> String {
    let mut b = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut b);
    let mut s = String::with_capacity(TOKEN_PREFIX.len() + 64);
    s.push_str(TOKEN_PREFIX);
    for x in b {
        s.push_str(&format!("{x:02x}"));
    }
    s
}

/// What is stored of a token: its SHA-256, hex. A fast unsalted hash is enough because the
/// token is 256 random bits — nothing to guess by brute force, unlike a password — and it lets
/// a token be found by its hash with one indexed lookup per request.
pub fn hash_token(token: &str) -> String {
    let d = Sha256::digest(token.as_bytes());
    d.iter().map(|x| format!("{x:02x}")).collect()
}

/// The scope a request needs, by method and path; `None`: open to anyone (`/healthz`,
/// `/openapi.json`, the dashboard's login page and assets). Finer checks happen in the
/// handlers: claims against a `work` token's queues, `sql` tasks against `sql`.
pub fn needed_scope(method: &str, path: &str) -> Option<Scope> {
    let read = matches!(method, "GET" | "HEAD");
    if path == "/healthz"
        || path == "/openapi.json"
        || path == "/ui/login"
        || path == "/ui/logout"
        || path.starts_with("/ui/assets/")
    {
        return None;
    }
    if path.starts_with("/v1/tokens") {
        return Some(Scope::Admin);
    }
    if read {
        return Some(Scope::Read);
    }
    let seg: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    Some(match seg.as_slice() {
        // A namespace's processor URL and webhook make the server send requests where they
        // say: setting them is an admin's decision.
        ["v1", "namespaces", _] => Scope::Admin,
        ["v1", "tasks"] | ["v1", "schedules" | "batches", ..] => Scope::Enqueue,
        ["v1", "workflows"] | ["v1", "workflows", _, "tasks"] => Scope::Enqueue,
        // Durable functions: starting a run and sending it an event enqueue work; the calls
        // a worker makes under the lease of a run's task are work.
        ["v1", "workflow-runs"] | ["v1", "workflow-runs", _, "events"] => Scope::Enqueue,
        ["v1", "workflow-runs", _, "steps" | "suspend" | "finish" | "resume"] => Scope::Work,
        ["v1", "tasks", "complete" | "fail" | "release"] => Scope::Work,
        ["v1", "tasks", _, "heartbeat" | "complete" | "fail"] => Scope::Work,
        ["v1", "queues", _, "claim"] | ["v1", "queues", _, "claims", _, "release"] => Scope::Work,
        ["v1", "workers", _, "report"] => Scope::Work,
        // asyncflow's routes (`--compat asyncflow`): its config list is a POST that reads.
        ["api", "task_schedule_cfg", "list"] => Scope::Read,
        ["api", "task", "createTask"] => Scope::Enqueue,
        ["api", "task", "hold_task" | "setTask"] => Scope::Work,
        ["v1", "namespaces", ..] => Scope::Process,
        // Operator actions (cancel, retry, run now, queue settings, pause/resume) and every
        // dashboard action.
        _ => Scope::Admin,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_hashed() {
        let a = new_token();
        let b = new_token();
        assert_ne!(a, b);
        assert!(a.starts_with(TOKEN_PREFIX) && a.len() == 68, "{a}");
        assert_eq!(hash_token(&a), hash_token(&a));
        assert_ne!(hash_token(&a), hash_token(&b));
        assert_eq!(
            hash_token("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn scopes_by_route() {
        use Scope::*;
        let cases = [
            ("GET", "/healthz", None),
            ("GET", "/openapi.json", None),
            ("GET", "/v1/tasks", Some(Read)),
            ("GET", "/metrics", Some(Read)),
            ("GET", "/ui", Some(Read)),
            ("POST", "/v1/tasks", Some(Enqueue)),
            ("POST", "/v1/workflows/7/tasks", Some(Enqueue)),
            ("POST", "/v1/workflows/7/retry", Some(Admin)),
            ("POST", "/v1/workflow-runs", Some(Enqueue)),
            ("POST", "/v1/workflow-runs/r1/events", Some(Enqueue)),
            ("POST", "/v1/workflow-runs/r1/steps", Some(Work)),
            ("POST", "/v1/workflow-runs/r1/suspend", Some(Work)),
            ("POST", "/v1/workflow-runs/r1/finish", Some(Work)),
            ("POST", "/v1/workflow-runs/r1/resume", Some(Work)),
            ("POST", "/v1/workflow-runs/r1/cancel", Some(Admin)),
            ("GET", "/v1/workflow-runs/r1/result", Some(Read)),
            ("POST", "/v1/schedules", Some(Enqueue)),
            ("DELETE", "/v1/schedules/x", Some(Enqueue)),
            ("POST", "/v1/tasks/complete", Some(Work)),
            ("POST", "/v1/tasks/7/fail", Some(Work)),
            ("POST", "/v1/queues/q/claim", Some(Work)),
            ("POST", "/v1/tasks/7/cancel", Some(Admin)),
            ("PUT", "/v1/queues/q", Some(Admin)),
            ("PUT", "/v1/rate-limits/x", Some(Admin)),
            ("DELETE", "/v1/rate-limits/x", Some(Admin)),
            ("POST", "/v1/queues/q/pause", Some(Admin)),
            ("PUT", "/v1/namespaces/n", Some(Admin)),
            ("PUT", "/v1/namespaces/n/processes/p", Some(Process)),
            ("POST", "/v1/namespaces/n/processes/p/call", Some(Process)),
            ("GET", "/v1/tokens", Some(Admin)),
            ("POST", "/ui/tasks/7/cancel", Some(Admin)),
        ];
        for (m, p, want) in cases {
            assert_eq!(needed_scope(m, p), want, "{m} {p}");
        }
        let g = Grant {
            scopes: vec![Work],
            queues: vec!["emails".into()],
        };
        assert!(g.allows(Work) && !g.allows(Read) && !g.allows(Admin));
        assert!(g.allows_queue("emails") && !g.allows_queue("other"));
        let admin = Grant {
            scopes: vec![Admin],
            queues: vec![],
        };
        assert!(Scope::ALL.iter().all(|s| admin.allows(*s)) && admin.allows_queue("x"));
        assert_eq!(Scope::parse("work"), Ok(Work));
        assert!(Scope::parse("root").is_err());
    }
}
