-- docket schema (MySQL 8.0+ / MariaDB 10.6+), the whole of what PostgreSQL reached in its
-- migrations 0001-0016, in one file (this backend started there). Times are UTC DATETIME(6)
-- (the connection sets time_zone '+00:00'), JSON is JSON (MariaDB: LONGTEXT checked by
-- json_valid), text utf8mb4 with binary collation, so names compare exactly as on PostgreSQL.
-- MySQL has no partial indexes: the claim index leads with state, and "unique among unfinished
-- tasks" is a unique index over a stored generated column that is NULL for finished tasks.

CREATE TABLE docket_queues (
    name VARCHAR(512) NOT NULL PRIMARY KEY,
    paused BOOLEAN NOT NULL DEFAULT FALSE,
    concurrency_limit INT NULL CHECK (concurrency_limit >= 1),
    max_attempts INT NULL CHECK (max_attempts >= 1),
    backoff JSON NULL,
    timeout_ms BIGINT NULL CHECK (timeout_ms > 0),
    retention_completed_ms BIGINT NULL CHECK (retention_completed_ms >= 0),
    retention_failed_ms BIGINT NULL CHECK (retention_failed_ms >= 0),
    mask_payload BOOLEAN NOT NULL DEFAULT FALSE,
    updated_at DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE docket_tasks (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    queue VARCHAR(512) NOT NULL,
    kind VARCHAR(512) NOT NULL,
    payload JSON NOT NULL,
    priority INT NOT NULL DEFAULT 0,
    state VARCHAR(16) NOT NULL CHECK (state IN
        ('scheduled', 'available', 'running', 'retryable', 'completed', 'discarded', 'cancelled')),
    run_at DATETIME(6) NOT NULL,
    expires_at DATETIME(6) NULL,
    attempt INT NOT NULL DEFAULT 0,
    max_attempts INT NOT NULL DEFAULT 25 CHECK (max_attempts >= 1),
    backoff_initial_ms BIGINT NOT NULL DEFAULT 1000,
    backoff_coefficient DOUBLE NOT NULL DEFAULT 2.0,
    backoff_max_ms BIGINT NOT NULL DEFAULT 3600000,
    backoff_jitter DOUBLE NOT NULL DEFAULT 0.1,
    backoff_kind VARCHAR(16) NOT NULL DEFAULT 'exponential'
        CHECK (backoff_kind IN ('exponential', 'linear')),
    timeout_ms BIGINT NOT NULL DEFAULT 60000 CHECK (timeout_ms > 0),
    unique_key VARCHAR(512) NULL,
    concurrency_key VARCHAR(512) NULL,
    concurrency_limit INT NULL CHECK (concurrency_limit >= 1),
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
    -- The durable process the task is a step or timer of (NULL for other tasks).
    namespace VARCHAR(64) NULL,
    process_id VARCHAR(256) NULL,
    -- The user the task is for (asyncflow's user_id).
    user_id VARCHAR(512) NULL,
    -- unique_key while the task is unfinished, else NULL (NULLs never collide).
    unique_active VARCHAR(512) AS (CASE WHEN state IN ('scheduled', 'available', 'running', 'retryable')
        THEN unique_key END) STORED,
    UNIQUE KEY docket_tasks_unique_idx (unique_active),
    -- Claim order within a queue: priority desc, fewer attempts first, run_at, id.
    KEY docket_tasks_claim_idx (state, queue, priority DESC, attempt, run_at, id),
    -- Promotion (scheduled/retryable coming due) and the rescuer (expired leases).
    KEY docket_tasks_due_idx (state, run_at),
    KEY docket_tasks_lease_idx (state, lease_expires_at),
    -- How many of a concurrency key run; a process's waiting tasks.
    KEY docket_tasks_key_idx (concurrency_key, state),
    KEY docket_tasks_expires_idx (expires_at),
    KEY docket_tasks_finished_idx (finished_at),
    KEY docket_tasks_unique_any_idx (unique_key),
    KEY docket_tasks_user_idx (user_id, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE docket_nodes (
    name VARCHAR(512) NOT NULL PRIMARY KEY,
    started_at DATETIME(6) NOT NULL,
    heartbeat_at DATETIME(6) NOT NULL,
    stopped_at DATETIME(6) NULL,
    -- Since when the node is drained: it claims nothing (node-daemons' move to another node).
    draining_at DATETIME(6) NULL,
    version VARCHAR(255) NOT NULL,
    info JSON NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE docket_namespaces (
    name VARCHAR(64) NOT NULL PRIMARY KEY,
    config JSON NOT NULL,
    updated_at DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE docket_processes (
    namespace VARCHAR(64) NOT NULL,
    id VARCHAR(256) NOT NULL,
    status VARCHAR(16) NOT NULL CHECK (status IN ('init', 'running', 'error')),
    previous_status VARCHAR(16) NULL,
    status_changed_at DATETIME(6) NOT NULL,
    detail TEXT NULL,
    aux_state JSON NOT NULL,
    metadata JSON NOT NULL,
    corrupted_by BIGINT NULL,
    created_at DATETIME(6) NOT NULL,
    last_event_id BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (namespace, id),
    KEY docket_processes_status_idx (namespace, status, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE docket_events (
    namespace VARCHAR(64) NOT NULL,
    process_id VARCHAR(256) NOT NULL,
    event_id BIGINT NOT NULL,
    task_id BIGINT NULL,
    `timestamp` DATETIME(6) NOT NULL,
    metadata JSON NOT NULL,
    payload JSON NOT NULL,
    PRIMARY KEY (namespace, process_id, event_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE docket_notifications (
    seq BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    namespace VARCHAR(64) NOT NULL,
    process_id VARCHAR(256) NOT NULL,
    kind VARCHAR(16) NOT NULL CHECK (kind IN ('event', 'created', 'failed', 'repaired', 'removed')),
    event_id BIGINT NULL,
    data JSON NOT NULL,
    created_at DATETIME(6) NOT NULL,
    KEY docket_notifications_ns_idx (namespace, seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE docket_sinks (
    name VARCHAR(512) NOT NULL PRIMARY KEY,
    seq BIGINT NOT NULL DEFAULT 0,
    owner VARCHAR(512) NULL,
    lease_until DATETIME(6) NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE docket_schedules (
    name VARCHAR(255) NOT NULL PRIMARY KEY,
    spec JSON NOT NULL,
    paused BOOLEAN NOT NULL DEFAULT FALSE,
    next_run_at DATETIME(6) NOT NULL,
    last_run_at DATETIME(6) NULL,
    last_task_id BIGINT NULL,
    created_at DATETIME(6) NOT NULL,
    updated_at DATETIME(6) NOT NULL,
    KEY docket_schedules_due (paused, next_run_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE docket_audit (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    at DATETIME(6) NOT NULL,
    actor VARCHAR(512) NOT NULL,
    action VARCHAR(255) NOT NULL,
    target VARCHAR(1024) NOT NULL,
    detail JSON NULL,
    KEY docket_audit_at (at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE docket_tokens (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name VARCHAR(255) NOT NULL,
    hash VARCHAR(128) NOT NULL,
    scopes JSON NOT NULL,
    queues JSON NOT NULL,
    created_at DATETIME(6) NOT NULL,
    expires_at DATETIME(6) NULL,
    revoked_at DATETIME(6) NULL,
    last_used_at DATETIME(6) NULL,
    -- name while the token is not revoked (one live token per name).
    active_name VARCHAR(255) AS (CASE WHEN revoked_at IS NULL THEN name END) STORED,
    UNIQUE KEY docket_tokens_hash (hash),
    UNIQUE KEY docket_tokens_name (active_name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Transaction-scoped named locks (PostgreSQL's pg_advisory_xact_lock): a transaction upserts
-- the row of a name and so holds its row lock until it ends. Used for concurrency keys, queue
-- limits and the notification sequence. GET_LOCK would be session-scoped and outlive a
-- transaction on a pooled connection that errors before releasing it.
CREATE TABLE docket_locks (
    name VARCHAR(768) NOT NULL PRIMARY KEY
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
