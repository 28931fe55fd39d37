-- Workflows (issue 26): see the PostgreSQL migration 0026.
CREATE TABLE docket_task_refs (
    task_id BIGINT NOT NULL PRIMARY KEY,
    batch_id BIGINT NOT NULL,
    ref VARCHAR(512) NOT NULL,
    KEY docket_task_refs_batch_idx (batch_id, task_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE docket_task_deps (
    task_id BIGINT NOT NULL,
    dep_id BIGINT NOT NULL,
    ignore_failure BOOLEAN NOT NULL,
    PRIMARY KEY (task_id, dep_id),
    KEY docket_task_deps_dep_idx (dep_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
