-- Workflows (issue 26): a workflow is a batch (0025) whose tasks have refs and dependencies. A
-- task waiting for its dependencies is `scheduled` with run_at 9999-12-31T23:59:59.999999Z
-- (never due); the engine releases or cancels it as docket_core::workflow decides.
CREATE TABLE docket_task_refs (
    task_id bigint PRIMARY KEY,
    batch_id bigint NOT NULL,
    ref text NOT NULL
);
CREATE INDEX docket_task_refs_batch_idx ON docket_task_refs (batch_id, task_id);
CREATE TABLE docket_task_deps (
    task_id bigint NOT NULL,
    dep_id bigint NOT NULL,
    ignore_failure boolean NOT NULL,
    PRIMARY KEY (task_id, dep_id)
);
CREATE INDEX docket_task_deps_dep_idx ON docket_task_deps (dep_id);
