//! Workflows (issue 26 item 1): tasks with dependencies, a directed acyclic graph inserted in one
//! transaction. River Pro's workflows and Oban Pro's `Workflow` (`deps`) are the models.
//!
//! The rules, each written here once:
//! - A task with dependencies waits (`scheduled`, never due: [`waiting_run_at`]) until each of
//!   them has **finished**. Then [`decide`] says: **release** it (it becomes `available`) when
//!   every dependency completed — or failed (discarded or cancelled) on an edge marked
//!   `ignore_failure` —, else **cancel** it. A cancelled task is finished, so what waits on it is
//!   decided the same way: a failure cancels its dependants transitively, and an
//!   `ignore_failure` edge stops the cascade there.
//! - A task without dependencies starts as any task (at `run_at`).
//! - A claimed task of a workflow sees its dependencies' results (`deps`: ref → result).

use crate::task::NewTask;
use crate::{TaskState, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;

/// The `run_at` of a task waiting for its dependencies ([`crate::time::max`],
/// 9999-12-31T23:59:59.999999Z): never due, so the scheduler leaves it alone; the engine
/// releases it.
pub fn waiting_run_at() -> Timestamp {
    crate::time::max()
}

/// Most tasks in one workflow request.
pub const MAX_TASKS: usize = 10_000;
/// Longest ref (characters).
pub const MAX_REF_LEN: usize = 128;

/// One dependency edge: the ref it waits on, and whether a failure there still lets it run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(untagged)]
pub enum Dependency {
    /// `"a"`: wait for `a` to complete; a failure of `a` cancels this task.
    Ref(String),
    /// `{"ref": "a", "ignore_failure": true}`.
    Edge {
        /// The task waited on.
        #[serde(rename = "ref")]
        target: String,
        /// Run this task even when `ref` was discarded or cancelled.
        #[serde(default)]
        ignore_failure: bool,
    },
}

impl Dependency {
    /// The ref waited on.
    pub fn target(&self) -> &str {
        match self {
            Dependency::Ref(r) => r,
            Dependency::Edge { target, .. } => target,
        }
    }

    /// Whether a failure of the target still lets the dependant run.
    pub fn ignore_failure(&self) -> bool {
        matches!(
            self,
            Dependency::Edge {
                ignore_failure: true,
                ..
            }
        )
    }
}

/// One task of a workflow: a task spec (as `POST /v1/tasks`) plus `ref` and `depends_on`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct WorkflowTask {
    /// Its name in the workflow (1–128 characters, unique in it).
    #[serde(rename = "ref")]
    pub reference: String,
    /// What it waits for (refs of this workflow).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<Dependency>,
    /// The task (every field of `POST /v1/tasks`).
    #[serde(flatten)]
    pub task: NewTask,
}

impl<'de> Deserialize<'de> for WorkflowTask {
    /// `ref` and `depends_on` are taken out; the rest must be a task spec (unknown fields are
    /// refused, as for `POST /v1/tasks`).
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut m = serde_json::Map::<String, Value>::deserialize(d)?;
        let reference = match m.remove("ref") {
            Some(Value::String(s)) => s,
            Some(_) => return Err(D::Error::custom("ref must be a string")),
            None => return Err(D::Error::custom("missing field `ref`")),
        };
        let depends_on = match m.remove("depends_on") {
            None | Some(Value::Null) => vec![],
            Some(v) => serde_json::from_value(v).map_err(|e| {
                D::Error::custom(format!(
                    "depends_on: a list of refs or {{\"ref\", \"ignore_failure\"}}: {e}"
                ))
            })?,
        };
        let task = serde_json::from_value(Value::Object(m)).map_err(D::Error::custom)?;
        Ok(WorkflowTask {
            reference,
            depends_on,
            task,
        })
    }
}

/// A workflow to create. JSON shape of `POST /v1/workflows`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewWorkflow {
    /// A label for people (1–256 characters).
    #[serde(default)]
    pub name: Option<String>,
    /// 1..=10,000 tasks.
    pub tasks: Vec<WorkflowTask>,
    /// Callback tasks enqueued once every task finished, as for a batch
    /// ([`crate::batch::Callbacks`]).
    #[serde(default)]
    pub callbacks: crate::batch::Callbacks,
}

/// Checks a workflow and answers its tasks' dependencies as indexes, in input order.
///
/// # Errors
/// A message naming the problem: no tasks or too many, a bad or duplicate ref, a dependency on
/// an unknown ref or on itself, a cycle (its refs named), a task with `unique_key`.
pub fn check(w: &NewWorkflow) -> Result<Vec<Vec<(usize, bool)>>, String> {
    if let Some(n) = &w.name {
        if n.is_empty() || n.chars().count() > 256 || n.chars().any(char::is_control) {
            return Err("name must be 1 to 256 characters without control characters".into());
        }
    }
    if w.tasks.is_empty() || w.tasks.len() > MAX_TASKS {
        return Err(format!("a workflow has 1 to {MAX_TASKS} tasks"));
    }
    let mut index: HashMap<&str, usize> = HashMap::new();
    for (i, t) in w.tasks.iter().enumerate() {
        let r = t.reference.as_str();
        if r.is_empty() || r.chars().count() > MAX_REF_LEN || r.chars().any(char::is_control) {
            return Err(format!(
                "tasks[{i}]: ref must be 1 to {MAX_REF_LEN} characters without control characters"
            ));
        }
        if index.insert(r, i).is_some() {
            return Err(format!("tasks[{i}]: ref {r:?} is given twice"));
        }
        if t.task.unique_key.is_some() {
            return Err(format!(
                "tasks[{i}]: a workflow's tasks carry no unique_key (a task it turned away would leave a hole in the graph)"
            ));
        }
    }
    let mut deps = Vec::with_capacity(w.tasks.len());
    for (i, t) in w.tasks.iter().enumerate() {
        let mut mine = vec![];
        for d in &t.depends_on {
            let Some(&j) = index.get(d.target()) else {
                return Err(format!(
                    "tasks[{i}] ({:?}) depends on {:?}, which is not a ref of this workflow",
                    t.reference,
                    d.target()
                ));
            };
            if j == i {
                return Err(format!("tasks[{i}] ({:?}) depends on itself", t.reference));
            }
            if mine.iter().any(|(k, _)| *k == j) {
                return Err(format!(
                    "tasks[{i}] ({:?}) names {:?} twice in depends_on",
                    t.reference,
                    d.target()
                ));
            }
            mine.push((j, d.ignore_failure()));
        }
        deps.push(mine);
    }
    // Kahn's algorithm: what is left once every task without unmet dependencies is removed
    // lies on a cycle.
    let n = w.tasks.len();
    let mut indegree: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut dependants: Vec<Vec<usize>> = vec![vec![]; n];
    for (i, d) in deps.iter().enumerate() {
        for (j, _) in d {
            dependants[*j].push(i);
        }
    }
    let mut ready: Vec<usize> = (0..n).filter(|i| indegree[*i] == 0).collect();
    let mut seen = 0;
    while let Some(i) = ready.pop() {
        seen += 1;
        for &k in &dependants[i] {
            indegree[k] -= 1;
            if indegree[k] == 0 {
                ready.push(k);
            }
        }
    }
    if seen < n {
        let mut on_cycle: Vec<&str> = (0..n)
            .filter(|i| indegree[*i] > 0)
            .map(|i| w.tasks[i].reference.as_str())
            .collect();
        on_cycle.truncate(10);
        return Err(format!(
            "the dependencies form a cycle (through {})",
            on_cycle.join(", ")
        ));
    }
    Ok(deps)
}

/// What becomes of a waiting task, from its dependencies' states and edges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Some dependency has not finished.
    Wait,
    /// Every dependency completed (or failed on an `ignore_failure` edge): make it available.
    Release,
    /// A dependency failed on an edge that does not ignore it: cancel it.
    Cancel,
}

/// [`Decision`] for a task whose dependencies are in `deps` (state, ignore_failure). A failure
/// decides at once (the task cannot run whatever the rest do); otherwise the task waits until
/// every dependency finished.
pub fn decide(deps: &[(TaskState, bool)]) -> Decision {
    let failed = |s: TaskState| matches!(s, TaskState::Discarded | TaskState::Cancelled);
    if deps.iter().any(|(s, ignore)| failed(*s) && !ignore) {
        return Decision::Cancel;
    }
    if deps.iter().all(|(s, _)| s.is_finished()) {
        Decision::Release
    } else {
        Decision::Wait
    }
}

/// A workflow as `GET /v1/workflows/{id}` shows it: its batch (id, progress, callbacks) and
/// its graph.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct Workflow {
    /// The batch the workflow is: `batch.id` is the workflow's id.
    pub batch: crate::batch::Batch,
    /// Every task with its ref, state and edges, in creation order.
    pub tasks: Vec<WorkflowNode>,
}

/// The answer to `POST /v1/workflows`: the workflow and its tasks as inserted (input order).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct WorkflowCreated {
    /// The workflow.
    pub workflow: Workflow,
    /// Its tasks.
    pub tasks: Vec<crate::Task>,
}

/// One task of a workflow and its edges.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct WorkflowNode {
    /// Its ref.
    #[serde(rename = "ref")]
    pub reference: String,
    /// The task id.
    pub id: i64,
    /// Its kind.
    pub kind: String,
    /// Its state; `scheduled` while it waits for dependencies (`waiting` says which).
    pub state: TaskState,
    /// Waiting for its dependencies (not yet released or cancelled).
    pub waiting: bool,
    /// What it waits for.
    pub depends_on: Vec<Dependency>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn wf(v: Value) -> NewWorkflow {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn graphs_are_checked() {
        let ok = wf(json!({"tasks": [
            {"ref": "a", "kind": "k"},
            {"ref": "b", "kind": "k", "depends_on": ["a"]},
            {"ref": "c", "kind": "k", "depends_on": ["a", {"ref": "b", "ignore_failure": true}]},
        ]}));
        assert_eq!(
            check(&ok).unwrap(),
            vec![vec![], vec![(0, false)], vec![(0, false), (1, true)]]
        );
        let err = |v: Value| check(&wf(v)).unwrap_err();
        assert!(err(json!({"tasks": []})).contains("1 to"));
        assert!(
            err(json!({"tasks": [{"ref": "a", "kind": "k"}, {"ref": "a", "kind": "k"}]}))
                .contains("twice")
        );
        assert!(
            err(json!({"tasks": [{"ref": "a", "kind": "k", "depends_on": ["x"]}]}))
                .contains("not a ref")
        );
        assert!(
            err(json!({"tasks": [{"ref": "a", "kind": "k", "depends_on": ["a"]}]}))
                .contains("itself")
        );
        let cyc = err(json!({"tasks": [
            {"ref": "a", "kind": "k", "depends_on": ["c"]},
            {"ref": "b", "kind": "k", "depends_on": ["a"]},
            {"ref": "c", "kind": "k", "depends_on": ["b"]},
            {"ref": "d", "kind": "k"},
        ]}));
        assert!(cyc.ends_with("(through a, b, c)"), "{cyc}");
        assert!(err(json!({"tasks": [{"ref": "", "kind": "k"}]})).contains("ref"));
        assert!(err(json!({"tasks": [
            {"ref": "a", "kind": "k"},
            {"ref": "b", "kind": "k", "depends_on": ["a", {"ref": "a", "ignore_failure": true}]},
        ]}))
        .contains("twice in depends_on"));
        let many: Vec<Value> = (0..=MAX_TASKS)
            .map(|i| json!({"ref": i.to_string(), "kind": "k"}))
            .collect();
        assert!(err(json!({ "tasks": many })).contains("1 to 10000"));
        assert!(
            err(json!({"tasks": [{"ref": "a", "kind": "k", "unique_key": "u"}]}))
                .contains("unique_key")
        );
        // Unknown task fields are refused as for POST /v1/tasks.
        assert!(serde_json::from_value::<NewWorkflow>(
            json!({"tasks": [{"ref": "a", "kind": "k", "colour": 1}]})
        )
        .is_err());
        assert!(serde_json::from_value::<NewWorkflow>(json!({"tasks": [{"kind": "k"}]})).is_err());
    }

    #[test]
    fn decisions_follow_the_edges() {
        use TaskState::*;
        assert_eq!(
            decide(&[(Completed, false), (Running, false)]),
            Decision::Wait
        );
        assert_eq!(
            decide(&[(Completed, false), (Completed, false)]),
            Decision::Release
        );
        assert_eq!(
            decide(&[(Discarded, false), (Running, false)]),
            Decision::Cancel
        );
        assert_eq!(
            decide(&[(Discarded, true), (Completed, false)]),
            Decision::Release
        );
        assert_eq!(
            decide(&[(Cancelled, true), (Available, false)]),
            Decision::Wait
        );
        assert_eq!(decide(&[]), Decision::Release);
    }
}
