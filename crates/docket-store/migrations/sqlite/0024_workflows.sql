-- Workflows (issue 26): see the PostgreSQL migration 0026.
CREATE TABLE docket_task_refs (
    task_id INTEGER PRIMARY KEY,
    batch_id INTEGER NOT NULL,
    ref TEXT NOT NULL
);
CREATE INDEX docket_task_refs_batch_idx ON docket_task_refs (batch_id, task_id);
CREATE TABLE docket_task_deps (
    task_id INTEGER NOT NULL,
    dep_id INTEGER NOT NULL,
    ignore_failure INTEGER NOT NULL,
    PRIMARY KEY (task_id, dep_id)
);
CREATE INDEX docket_task_deps_dep_idx ON docket_task_deps (dep_id);
