-- Durable functions (issue 41; docket_core::durable): workflow runs, their journals, and the
-- events sent to them. A run is driven by one task (task_id); the run row is the truth of where
-- it is, the task only carries it to a worker.
CREATE TABLE docket_workflow_runs (
    id text PRIMARY KEY,
    workflow text NOT NULL,
    queue text NOT NULL,
    state text NOT NULL,
    input jsonb NOT NULL,
    result jsonb,
    error text,
    parent_id text,
    task_id bigint NOT NULL,
    steps bigint NOT NULL DEFAULT 0,
    waiting_for text,
    wake_at timestamptz,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    finished_at timestamptz
);
CREATE INDEX docket_workflow_runs_created_idx ON docket_workflow_runs (created_at);
CREATE INDEX docket_workflow_runs_workflow_idx ON docket_workflow_runs (workflow, created_at);
CREATE INDEX docket_workflow_runs_state_idx ON docket_workflow_runs (state, created_at);
CREATE INDEX docket_workflow_runs_task_idx ON docket_workflow_runs (task_id);
CREATE INDEX docket_workflow_runs_parent_idx ON docket_workflow_runs (parent_id) WHERE parent_id IS NOT NULL;
CREATE TABLE docket_workflow_steps (
    run_id text NOT NULL,
    seq bigint NOT NULL,
    kind text NOT NULL,
    name text NOT NULL,
    state text NOT NULL,
    output jsonb,
    error text,
    attempts integer NOT NULL,
    child_id text,
    started_at timestamptz NOT NULL,
    finished_at timestamptz,
    wake_at timestamptz,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE docket_workflow_events (
    id bigserial PRIMARY KEY,
    run_id text NOT NULL,
    name text NOT NULL,
    payload jsonb NOT NULL,
    sent_at timestamptz NOT NULL,
    taken_seq bigint
);
CREATE INDEX docket_workflow_events_run_idx ON docket_workflow_events (run_id, name, id);
