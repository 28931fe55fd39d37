-- Durable functions: see the PostgreSQL migration 0032.
CREATE TABLE docket_workflow_runs (
    id TEXT PRIMARY KEY,
    workflow TEXT NOT NULL,
    queue TEXT NOT NULL,
    state TEXT NOT NULL,
    input TEXT NOT NULL,
    result TEXT,
    error TEXT,
    parent_id TEXT,
    task_id INTEGER NOT NULL,
    steps INTEGER NOT NULL DEFAULT 0,
    waiting_for TEXT,
    wake_at INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    finished_at INTEGER
) WITHOUT ROWID;
CREATE INDEX docket_workflow_runs_created_idx ON docket_workflow_runs (created_at);
CREATE INDEX docket_workflow_runs_workflow_idx ON docket_workflow_runs (workflow, created_at);
CREATE INDEX docket_workflow_runs_state_idx ON docket_workflow_runs (state, created_at);
CREATE INDEX docket_workflow_runs_task_idx ON docket_workflow_runs (task_id);
CREATE INDEX docket_workflow_runs_parent_idx ON docket_workflow_runs (parent_id) WHERE parent_id IS NOT NULL;
CREATE TABLE docket_workflow_steps (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    state TEXT NOT NULL,
    output TEXT,
    error TEXT,
    attempts INTEGER NOT NULL,
    child_id TEXT,
    started_at INTEGER NOT NULL,
    finished_at INTEGER,
    wake_at INTEGER,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE docket_workflow_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL,
    name TEXT NOT NULL,
    payload TEXT NOT NULL,
    sent_at INTEGER NOT NULL,
    taken_seq INTEGER
);
CREATE INDEX docket_workflow_events_run_idx ON docket_workflow_events (run_id, name, id);
