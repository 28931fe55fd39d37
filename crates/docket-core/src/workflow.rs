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
    /// 1..=10,000 tasks (counting those of the sub-workflows).
    pub tasks: Vec<WorkflowTask>,
    /// Sub-workflows: groups of tasks with a ref of their own that tasks (and other
    /// sub-workflows) may depend on as a whole ([`SubWorkflow`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workflows: Vec<SubWorkflow>,
    /// Callback tasks enqueued once every task finished, as for a batch
    /// ([`crate::batch::Callbacks`]).
    #[serde(default)]
    pub callbacks: crate::batch::Callbacks,
}

/// A workflow inside a workflow (Oban Pro's `add_workflow`). Its tasks' refs become
/// `{ref}/{task ref}`; its tasks without dependencies of their own wait for the sub-workflow's
/// `depends_on`; depending on the sub-workflow's ref means depending on every one of its tasks
/// (with that edge's `ignore_failure`). Refs inside it name its own tasks and sub-workflows only.
/// At most [`MAX_DEPTH`] levels deep.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubWorkflow {
    /// Its name in the enclosing workflow (1–128 characters without '/', unique there).
    #[serde(rename = "ref")]
    pub reference: String,
    /// What its tasks wait for (refs of the enclosing level).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<Dependency>,
    /// Its tasks.
    #[serde(default)]
    pub tasks: Vec<WorkflowTask>,
    /// Its own sub-workflows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(no_recursion)]
    pub workflows: Vec<SubWorkflow>,
}

/// Tasks added to a running workflow (`POST /v1/workflows/{id}/tasks`): fan-out decided by
/// data. Their `depends_on` may name refs already in the workflow (a sub-workflow's ref means
/// all of its tasks) as well as each other.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WorkflowAddition {
    /// The tasks to add.
    #[serde(default)]
    pub tasks: Vec<WorkflowTask>,
    /// Sub-workflows to add.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workflows: Vec<SubWorkflow>,
}

/// Deepest nesting of sub-workflows.
pub const MAX_DEPTH: usize = 8;
/// Longest ref once sub-workflows are flattened (`outer/inner/task`), in characters.
pub const MAX_FULL_REF_LEN: usize = 512;
/// Most dependency edges in one request once sub-workflows are flattened (a dependency on a
/// sub-workflow is one edge per task of it).
pub const MAX_EDGES: usize = 100_000;

/// What a dependency points at once checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The task at this index of the tasks being inserted.
    New(usize),
    /// A task already in the workflow (its id).
    Existing(i64),
}

/// A checked workflow (or addition): its tasks with full refs (sub-workflows flattened, input
/// order, depth first) and each task's dependencies.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The tasks; `reference` is the full ref.
    pub tasks: Vec<WorkflowTask>,
    /// Per task: what it waits for and whether the edge ignores a failure.
    pub deps: Vec<Vec<(Target, bool)>>,
}

/// Where a name at the top level of an addition may point outside it: the refs already in the
/// workflow (full ref → task id).
type Outer<'a> = Option<&'a HashMap<String, i64>>;

/// The full refs a ref of one level stands for: a task's own, or every task of a sub-workflow.
fn full_refs(sub: &SubWorkflow, prefix: &str, out: &mut Vec<String>) {
    for t in &sub.tasks {
        out.push(format!("{prefix}{}", t.reference));
    }
    for s in &sub.workflows {
        full_refs(s, &format!("{prefix}{}/", s.reference), out);
    }
}

fn check_segment(r: &str, at: &str) -> Result<(), String> {
    if r.is_empty()
        || r.chars().count() > MAX_REF_LEN
        || r.chars().any(|c| c.is_control() || c == '/')
    {
        return Err(format!(
            "{at}: ref must be 1 to {MAX_REF_LEN} characters without '/' or control characters"
        ));
    }
    Ok(())
}

/// Flattens one level (`tasks` and `subs` under `prefix`) into `out`: refs made full, each
/// dependency expanded to the full refs it stands for; tasks without dependencies at this level
/// wait for `inherited` (what the enclosing sub-workflow waits for).
fn flatten_level(
    tasks: &[WorkflowTask],
    subs: &[SubWorkflow],
    prefix: &str,
    inherited: &[Dependency],
    depth: usize,
    outer: Outer<'_>,
    out: &mut Vec<WorkflowTask>,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "sub-workflows nest at most {MAX_DEPTH} deep ({prefix:?})"
        ));
    }
    let mut names: HashMap<&str, Vec<String>> = HashMap::new();
    for (i, t) in tasks.iter().enumerate() {
        let at = format!("{prefix}tasks[{i}]");
        check_segment(&t.reference, &at)?;
        if t.task.unique_key.is_some() {
            return Err(format!(
                "{at}: a workflow's tasks carry no unique_key (a task it turned away would leave a hole in the graph)"
            ));
        }
        let full = format!("{prefix}{}", t.reference);
        if names.insert(&t.reference, vec![full]).is_some() {
            return Err(format!("{at}: ref {:?} is given twice", t.reference));
        }
    }
    for (i, s) in subs.iter().enumerate() {
        let at = format!("{prefix}workflows[{i}]");
        check_segment(&s.reference, &at)?;
        let mut refs = vec![];
        full_refs(s, &format!("{prefix}{}/", s.reference), &mut refs);
        if refs.is_empty() {
            return Err(format!("{at} ({:?}) has no tasks", s.reference));
        }
        if names.insert(&s.reference, refs).is_some() {
            return Err(format!("{at}: ref {:?} is given twice", s.reference));
        }
    }
    let expand = |own: &str, deps: &[Dependency]| -> Result<Vec<Dependency>, String> {
        let mut out = vec![];
        for d in deps {
            if d.target() == own {
                return Err(format!("{prefix}{own:?} depends on itself"));
            }
            let targets: Vec<String> = match names.get(d.target()) {
                Some(v) => v.clone(),
                None => match outer {
                    Some(existing) if existing.contains_key(d.target()) => {
                        vec![d.target().to_string()]
                    }
                    Some(existing) => {
                        let under = format!("{}/", d.target());
                        let mut v: Vec<String> = existing
                            .keys()
                            .filter(|k| k.starts_with(&under))
                            .cloned()
                            .collect();
                        v.sort();
                        v
                    }
                    None => vec![],
                },
            };
            if targets.is_empty() {
                return Err(format!(
                    "{prefix}{own:?} depends on {:?}, which is not a ref {}",
                    d.target(),
                    if prefix.is_empty() {
                        "of this workflow".to_string()
                    } else {
                        format!("of sub-workflow {:?}", prefix.trim_end_matches('/'))
                    }
                ));
            }
            for target in targets {
                out.push(if d.ignore_failure() {
                    Dependency::Edge {
                        target,
                        ignore_failure: true,
                    }
                } else {
                    Dependency::Ref(target)
                });
            }
        }
        Ok(out)
    };
    for t in tasks {
        let depends_on = if t.depends_on.is_empty() {
            inherited.to_vec()
        } else {
            expand(&t.reference, &t.depends_on)?
        };
        out.push(WorkflowTask {
            reference: format!("{prefix}{}", t.reference),
            depends_on,
            task: t.task.clone(),
        });
    }
    for s in subs {
        let mine = if s.depends_on.is_empty() {
            inherited.to_vec()
        } else {
            expand(&s.reference, &s.depends_on)?
        };
        flatten_level(
            &s.tasks,
            &s.workflows,
            &format!("{prefix}{}/", s.reference),
            &mine,
            depth + 1,
            None,
            out,
        )?;
    }
    Ok(())
}

/// Resolves flattened tasks' dependencies to indexes (or existing tasks) and looks for cycles.
fn resolve(tasks: Vec<WorkflowTask>, existing: &HashMap<String, i64>) -> Result<Plan, String> {
    if tasks.is_empty() || tasks.len() > MAX_TASKS {
        return Err(format!("a workflow has 1 to {MAX_TASKS} tasks"));
    }
    let mut index: HashMap<&str, usize> = HashMap::new();
    for (i, t) in tasks.iter().enumerate() {
        let r = t.reference.as_str();
        if r.chars().count() > MAX_FULL_REF_LEN {
            return Err(format!(
                "ref {:?}…: refs with their sub-workflows' prefixes are at most {MAX_FULL_REF_LEN} characters",
                r.chars().take(40).collect::<String>()
            ));
        }
        if existing.contains_key(r) {
            return Err(format!("ref {r:?} is already in the workflow"));
        }
        if index.insert(r, i).is_some() {
            return Err(format!("ref {r:?} is given twice"));
        }
    }
    let edges: usize = tasks.iter().map(|t| t.depends_on.len()).sum();
    if edges > MAX_EDGES {
        return Err(format!(
            "{edges} dependencies once sub-workflows are expanded; at most {MAX_EDGES}"
        ));
    }
    let mut deps = Vec::with_capacity(tasks.len());
    for (i, t) in tasks.iter().enumerate() {
        let mut mine: Vec<(Target, bool)> = vec![];
        for d in &t.depends_on {
            let target = match index.get(d.target()) {
                Some(&j) => Target::New(j),
                None => match existing.get(d.target()) {
                    Some(&id) => Target::Existing(id),
                    None => {
                        return Err(format!(
                            "{:?} depends on {:?}, which is not a ref of this workflow",
                            t.reference,
                            d.target()
                        ))
                    }
                },
            };
            if target == Target::New(i) {
                return Err(format!("{:?} depends on itself", t.reference));
            }
            if mine.iter().any(|(k, _)| *k == target) {
                return Err(format!(
                    "{:?} names {:?} twice in depends_on",
                    t.reference,
                    d.target()
                ));
            }
            mine.push((target, d.ignore_failure()));
        }
        deps.push(mine);
    }
    // Kahn's algorithm over the new tasks (existing tasks never wait on new ones, so no cycle
    // passes through them): what is left once every task without unmet dependencies is removed
    // lies on a cycle.
    let n = tasks.len();
    let mut indegree = vec![0usize; n];
    let mut dependants: Vec<Vec<usize>> = vec![vec![]; n];
    for (i, d) in deps.iter().enumerate() {
        for (t, _) in d {
            if let Target::New(j) = t {
                indegree[i] += 1;
                dependants[*j].push(i);
            }
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
            .map(|i| tasks[i].reference.as_str())
            .collect();
        on_cycle.truncate(10);
        return Err(format!(
            "the dependencies form a cycle (through {})",
            on_cycle.join(", ")
        ));
    }
    Ok(Plan { tasks, deps })
}

/// Checks a workflow: flattens its sub-workflows and resolves each task's dependencies to
/// indexes ([`Target::New`]), in input order (a level's tasks, then its sub-workflows' depth
/// first).
///
/// # Errors
/// A message naming the problem: a bad name, no tasks or too many, a bad or duplicate ref, a
/// dependency on an unknown ref or on itself, a cycle (its refs named), a task with
/// `unique_key`, nesting deeper than [`MAX_DEPTH`], more than [`MAX_EDGES`] edges.
pub fn check(w: &NewWorkflow) -> Result<Plan, String> {
    if let Some(n) = &w.name {
        if n.is_empty() || n.chars().count() > 256 || n.chars().any(char::is_control) {
            return Err("name must be 1 to 256 characters without control characters".into());
        }
    }
    if w.tasks.len() > MAX_TASKS {
        return Err(format!("a workflow has 1 to {MAX_TASKS} tasks"));
    }
    let mut flat = vec![];
    flatten_level(&w.tasks, &w.workflows, "", &[], 0, None, &mut flat)?;
    resolve(flat, &HashMap::new())
}

/// Checks tasks added to a workflow whose tasks are `existing` (full ref → id): as [`check`],
/// and a `depends_on` at the top level may also name an existing ref ([`Target::Existing`]) or
/// an existing sub-workflow (every task under `{ref}/`). A new ref equal to an existing one is
/// refused.
///
/// # Errors
/// As [`check`]; a ref already in the workflow.
pub fn check_addition(
    a: &WorkflowAddition,
    existing: &HashMap<String, i64>,
) -> Result<Plan, String> {
    if a.tasks.len() > MAX_TASKS {
        return Err(format!("a workflow has 1 to {MAX_TASKS} tasks"));
    }
    let mut flat = vec![];
    flatten_level(
        &a.tasks,
        &a.workflows,
        "",
        &[],
        0,
        Some(existing),
        &mut flat,
    )?;
    resolve(flat, existing)
}

/// What a workflow retry does to each of its failed tasks (discarded or cancelled): one
/// without dependencies runs again now; one with dependencies waits again, and the usual
/// release rule ([`decide`]) runs it once they complete — so what a failure cancelled runs
/// after what failed, in order. Completed tasks are not run again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetryPlan {
    /// Make available now.
    pub run: Vec<i64>,
    /// Make wait for their dependencies again.
    pub wait: Vec<i64>,
}

/// [`RetryPlan`] for a workflow's graph.
pub fn retry_plan(nodes: &[WorkflowNode]) -> RetryPlan {
    let mut p = RetryPlan::default();
    for n in nodes {
        if matches!(n.state, TaskState::Discarded | TaskState::Cancelled) {
            if n.depends_on.is_empty() {
                p.run.push(n.id);
            } else {
                p.wait.push(n.id);
            }
        }
    }
    p
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
        use Target::New;
        assert_eq!(
            check(&ok).unwrap().deps,
            vec![
                vec![],
                vec![(New(0), false)],
                vec![(New(0), false), (New(1), true)]
            ]
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
    fn sub_workflows_flatten() {
        // a → sub (x → y, and a nested sub inner: z) → b; c depends on nothing.
        let w = wf(json!({
            "tasks": [
                {"ref": "a", "kind": "k"},
                {"ref": "b", "kind": "k", "depends_on": [{"ref": "sub", "ignore_failure": true}]},
                {"ref": "c", "kind": "k"},
            ],
            "workflows": [{
                "ref": "sub", "depends_on": ["a"],
                "tasks": [{"ref": "x", "kind": "k"}, {"ref": "y", "kind": "k", "depends_on": ["x"]}],
                "workflows": [{"ref": "inner", "tasks": [{"ref": "z", "kind": "k"}]}],
            }],
        }));
        let p = check(&w).unwrap();
        let refs: Vec<&str> = p.tasks.iter().map(|t| t.reference.as_str()).collect();
        assert_eq!(refs, ["a", "b", "c", "sub/x", "sub/y", "sub/inner/z"]);
        use Target::New;
        assert_eq!(
            p.deps,
            vec![
                vec![],
                // b waits for every task of sub, each edge ignoring failure as b's did.
                vec![(New(3), true), (New(4), true), (New(5), true)],
                vec![],
                // sub's roots (x, and inner's z through inner) wait for what sub waits for.
                vec![(New(0), false)],
                vec![(New(3), false)],
                vec![(New(0), false)],
            ]
        );
        let err = |v: Value| check(&wf(v)).unwrap_err();
        // Refs inside a sub-workflow name its own level only.
        assert!(
            err(json!({"tasks": [{"ref": "a", "kind": "k"}], "workflows": [
            {"ref": "s", "tasks": [{"ref": "x", "kind": "k", "depends_on": ["a"]}]}]}))
            .contains("not a ref of sub-workflow \"s\"")
        );
        // A sub-workflow and a task depending on each other is a cycle.
        let cyc = err(
            json!({"tasks": [{"ref": "a", "kind": "k", "depends_on": ["s"]}],
            "workflows": [{"ref": "s", "depends_on": ["a"], "tasks": [{"ref": "x", "kind": "k"}]}]}),
        );
        assert!(cyc.contains("cycle"), "{cyc}");
        assert!(
            err(json!({"tasks": [{"ref": "s", "kind": "k"}], "workflows": [
            {"ref": "s", "tasks": [{"ref": "x", "kind": "k"}]}]}))
            .contains("twice")
        );
        assert!(
            err(json!({"tasks": [], "workflows": [{"ref": "s", "tasks": []}]}))
                .contains("no tasks")
        );
        assert!(err(json!({"tasks": [{"ref": "a/b", "kind": "k"}]})).contains("'/'"));
        assert!(err(json!({"tasks": [], "workflows": [
            {"ref": "s", "depends_on": ["s"], "tasks": [{"ref": "x", "kind": "k"}]}]}))
        .contains("itself"));
        // Nine levels deep is too deep.
        let mut deep = json!({"ref": "l9", "tasks": [{"ref": "t", "kind": "k"}]});
        for i in (0..9).rev() {
            deep = json!({"ref": format!("l{i}"), "workflows": [deep]});
        }
        assert!(err(json!({"tasks": [], "workflows": [deep]})).contains("at most 8 deep"));
        // 400 tasks each depending on a sub-workflow of 300: 120,000 edges.
        let many: Vec<Value> = (0..400)
            .map(|i| json!({"ref": i.to_string(), "kind": "k", "depends_on": ["s"]}))
            .collect();
        let sub: Vec<Value> = (0..300)
            .map(|i| json!({"ref": i.to_string(), "kind": "k"}))
            .collect();
        assert!(
            err(json!({"tasks": many, "workflows": [{"ref": "s", "tasks": sub}]}))
                .contains("at most 100000")
        );
    }

    #[test]
    fn additions_may_depend_on_what_is_there() {
        let existing: HashMap<String, i64> = [("a", 10), ("s/x", 11), ("s/y", 12)]
            .into_iter()
            .map(|(r, id)| (r.to_string(), id))
            .collect();
        let add = |v: Value| check_addition(&serde_json::from_value(v).unwrap(), &existing);
        let p = add(json!({"tasks": [
            {"ref": "n1", "kind": "k", "depends_on": ["a"]},
            {"ref": "n2", "kind": "k", "depends_on": ["n1", {"ref": "s", "ignore_failure": true}]},
        ]}))
        .unwrap();
        use Target::{Existing, New};
        assert_eq!(
            p.deps,
            vec![
                vec![(Existing(10), false)],
                vec![(New(0), false), (Existing(11), true), (Existing(12), true)]
            ]
        );
        assert!(add(json!({"tasks": [{"ref": "a", "kind": "k"}]}))
            .unwrap_err()
            .contains("already in the workflow"));
        assert!(
            add(json!({"tasks": [{"ref": "n", "kind": "k", "depends_on": ["zz"]}]}))
                .unwrap_err()
                .contains("not a ref")
        );
        assert!(add(json!({"tasks": []})).unwrap_err().contains("1 to"));
        // A sub-workflow added at run time waits as a whole.
        let p = add(json!({"workflows": [{"ref": "t", "depends_on": ["s/y"],
            "tasks": [{"ref": "q", "kind": "k"}]}]}))
        .unwrap();
        assert_eq!(p.tasks[0].reference, "t/q");
        assert_eq!(p.deps, vec![vec![(Existing(12), false)]]);
    }

    #[test]
    fn retries_rerun_failures_in_order() {
        let node = |id: i64, state: TaskState, deps: &[&str]| WorkflowNode {
            reference: id.to_string(),
            id,
            kind: "k".into(),
            state,
            waiting: false,
            depends_on: deps
                .iter()
                .map(|d| Dependency::Ref(d.to_string()))
                .collect(),
        };
        use TaskState::*;
        let p = retry_plan(&[
            node(1, Completed, &[]),
            node(2, Discarded, &[]),
            node(3, Cancelled, &["2"]),
            node(4, Cancelled, &[]),
            node(5, Completed, &["1"]),
            node(6, Running, &[]),
        ]);
        assert_eq!(
            p,
            RetryPlan {
                run: vec![2, 4],
                wait: vec![3]
            }
        );
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
