-- Durable functions: see the PostgreSQL migration 0032.
CREATE TABLE docket_workflow_runs (
    id VARCHAR(200) NOT NULL PRIMARY KEY,
    workflow VARCHAR(256) NOT NULL,
    queue VARCHAR(256) NOT NULL,
    state VARCHAR(16) NOT NULL,
    input JSON NOT NULL,
    result JSON NULL,
    error MEDIUMTEXT NULL,
    parent_id VARCHAR(200) NULL,
    task_id BIGINT NOT NULL,
    steps BIGINT NOT NULL DEFAULT 0,
    waiting_for VARCHAR(256) NULL,
    wake_at DATETIME(6) NULL,
    created_at DATETIME(6) NOT NULL,
    updated_at DATETIME(6) NOT NULL,
    finished_at DATETIME(6) NULL,
    KEY docket_workflow_runs_created_idx (created_at),
    KEY docket_workflow_runs_workflow_idx (workflow, created_at),
    KEY docket_workflow_runs_state_idx (state, created_at),
    KEY docket_workflow_runs_task_idx (task_id),
    KEY docket_workflow_runs_parent_idx (parent_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE docket_workflow_steps (
    run_id VARCHAR(200) NOT NULL,
    seq BIGINT NOT NULL,
    kind VARCHAR(16) NOT NULL,
    name VARCHAR(256) NOT NULL,
    state VARCHAR(16) NOT NULL,
    output JSON NULL,
    error MEDIUMTEXT NULL,
    attempts INT NOT NULL,
    child_id VARCHAR(200) NULL,
    started_at DATETIME(6) NOT NULL,
    finished_at DATETIME(6) NULL,
    wake_at DATETIME(6) NULL,
    PRIMARY KEY (run_id, seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE docket_workflow_events (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    run_id VARCHAR(200) NOT NULL,
    name VARCHAR(256) NOT NULL,
    payload JSON NOT NULL,
    sent_at DATETIME(6) NOT NULL,
    taken_seq BIGINT NULL,
    KEY docket_workflow_events_run_idx (run_id, name, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
