-- Finished tasks leave the hot table (issue 13; PostgreSQL's 0020 does it with partitions).
-- MySQL has no partial indexes, so every index of docket_tasks held every finished task: at
-- 1M finished tasks the claim path ran at a third of its speed with a 128 MB buffer pool.
-- docket_tasks now holds unfinished tasks (and, for about a second, tasks that just finished);
-- the maintenance job `rotate` moves finished ones here in batches (MaintenanceStore::
-- task_rotate answers Rotation::Archived). Reads that can meet a finished task look in both
-- tables; a change to a finished task (retry, result) moves it back first.
-- Native partitioning was measured and refused: a partition key must be in every unique key,
-- MariaDB allows no generated column in a primary key, and with a trigger-kept flag the
-- bench ran at 5,604 tasks/s against 15,229 on one table.
CREATE TABLE docket_tasks_done (
    id BIGINT NOT NULL PRIMARY KEY,
    queue VARCHAR(512) NOT NULL,
    kind VARCHAR(512) NOT NULL,
    payload JSON NOT NULL,
    priority INT NOT NULL,
    state VARCHAR(16) NOT NULL,
    run_at DATETIME(6) NOT NULL,
    expires_at DATETIME(6) NULL,
    attempt INT NOT NULL,
    max_attempts INT NOT NULL,
    backoff_initial_ms BIGINT NOT NULL,
    backoff_coefficient DOUBLE NOT NULL,
    backoff_max_ms BIGINT NOT NULL,
    backoff_jitter DOUBLE NOT NULL,
    backoff_kind VARCHAR(16) NOT NULL,
    timeout_ms BIGINT NOT NULL,
    unique_key VARCHAR(512) NULL,
    concurrency_key VARCHAR(512) NULL,
    concurrency_limit INT NULL,
    node VARCHAR(512) NULL,
    result JSON NULL,
    errors JSON NOT NULL,
    progress JSON NULL,
    created_at DATETIME(6) NOT NULL,
    attempted_at DATETIME(6) NULL,
    finished_at DATETIME(6) NULL,
    worker VARCHAR(1024) NULL,
    lease_token VARCHAR(64) NULL,
    lease_ms BIGINT NULL,
    lease_expires_at DATETIME(6) NULL,
    cancel_requested_at DATETIME(6) NULL,
    trace_id VARCHAR(64) NULL,
    namespace VARCHAR(64) NULL,
    process_id VARCHAR(256) NULL,
    user_id VARCHAR(512) NULL,
    stage VARCHAR(512) NULL,
    stages_done JSON NULL,
    runs JSON NULL,
    run_count INT NOT NULL,
    attempt_node VARCHAR(512) NULL,
    -- Retention and the per-minute throughput; a queue's list and counts; idempotency keys
    -- answered after the task finished; a user's tasks; a process's tasks.
    KEY docket_tasks_done_finished_idx (finished_at),
    KEY docket_tasks_done_queue_idx (queue, state),
    KEY docket_tasks_done_unique_idx (unique_key),
    KEY docket_tasks_done_user_idx (user_id, id),
    KEY docket_tasks_done_key_idx (concurrency_key)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

INSERT INTO docket_tasks_done (id, queue, kind, payload, priority, state, run_at, expires_at,
    attempt, max_attempts, backoff_initial_ms, backoff_coefficient, backoff_max_ms,
    backoff_jitter, backoff_kind, timeout_ms, unique_key, concurrency_key, concurrency_limit,
    node, result, errors, progress, created_at, attempted_at, finished_at, worker, lease_token,
    lease_ms, lease_expires_at, cancel_requested_at, trace_id, namespace, process_id, user_id,
    stage, stages_done, runs, run_count, attempt_node)
    SELECT id, queue, kind, payload, priority, state, run_at, expires_at,
    attempt, max_attempts, backoff_initial_ms, backoff_coefficient, backoff_max_ms,
    backoff_jitter, backoff_kind, timeout_ms, unique_key, concurrency_key, concurrency_limit,
    node, result, errors, progress, created_at, attempted_at, finished_at, worker, lease_token,
    lease_ms, lease_expires_at, cancel_requested_at, trace_id, namespace, process_id, user_id,
    stage, stages_done, runs, run_count, attempt_node
    FROM docket_tasks WHERE state IN ('completed', 'discarded', 'cancelled');
DELETE FROM docket_tasks WHERE state IN ('completed', 'discarded', 'cancelled');
