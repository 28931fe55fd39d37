//! Kind hooks: rules a task kind brings with it, registered by the crate that runs that kind
//! (docket-sql registers `sql`), so the engine and the edges need not know each kind. A hook
//! checks — and may complete — a task of its kind before it is enqueued or scheduled, and names
//! the scope a token needs to enqueue it.

use docket_core::auth::Scope;
use docket_core::NewTask;
use std::sync::Arc;

/// Why a hook refused a task: an HTTP status, a stable error code (listed in the error table
/// of docs/src/api/index.md) and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindRefusal {
    /// HTTP status (400, 403, …).
    pub status: u16,
    /// Stable error code, e.g. `sql_target_not_allowed`.
    pub code: &'static str,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for KindRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The rules of one task kind.
pub trait KindHook: Send + Sync {
    /// The kind (`NewTask::kind`) this hook is for.
    fn kind(&self) -> &str;
    /// The scope a token needs to enqueue this kind, besides `enqueue` (`None`: no more).
    fn scope(&self) -> Option<Scope>;
    /// Checks a task of this kind before it is enqueued or scheduled; may complete it (a
    /// default queue).
    ///
    /// # Errors
    /// The refusal the caller gets.
    fn check(&self, task: &mut NewTask) -> Result<(), KindRefusal>;
}

/// The registered hooks, by kind.
#[derive(Clone, Default)]
pub struct KindHooks(Arc<Vec<Arc<dyn KindHook>>>);

impl std::fmt::Debug for KindHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|h| h.kind().to_string()))
            .finish()
    }
}

impl KindHooks {
    /// These hooks plus `hook` (replacing one of the same kind).
    pub fn with(&self, hook: Arc<dyn KindHook>) -> Self {
        let mut v: Vec<Arc<dyn KindHook>> = self
            .0
            .iter()
            .filter(|h| h.kind() != hook.kind())
            .cloned()
            .collect();
        v.push(hook);
        KindHooks(Arc::new(v))
    }

    fn get(&self, kind: &str) -> Option<&Arc<dyn KindHook>> {
        self.0.iter().find(|h| h.kind() == kind)
    }

    /// Runs the hook of `task`'s kind, if any.
    ///
    /// # Errors
    /// The hook's refusal.
    pub fn check(&self, task: &mut NewTask) -> Result<(), KindRefusal> {
        match self.get(&task.kind) {
            Some(h) => h.check(task),
            None => Ok(()),
        }
    }

    /// The scope a token needs to enqueue `kind` besides `enqueue`.
    pub fn scope(&self, kind: &str) -> Option<Scope> {
        self.get(kind).and_then(|h| h.scope())
    }
}
