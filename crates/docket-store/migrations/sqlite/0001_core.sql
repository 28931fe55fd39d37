-- docket core schema (SQLite). Times are integer microseconds since the Unix epoch (UTC);
-- JSON is text. Same shape and indexes as the PostgreSQL schema.

CREATE TABLE docket_queues (
    name TEXT PRIMARY KEY,
    paused INTEGER NOT NULL DEFAULT 0,
    concurrency_limit INTEGER CHECK (concurrency_limit >= 1),
    max_attempts INTEGER CHECK (max_attempts >= 1),
    backoff TEXT,
    timeout_ms INTEGER CHECK (timeout_ms > 0),
    retention_completed_ms INTEGER CHECK (retention_completed_ms >= 0),
    retention_failed_ms INTEGER CHECK (retention_failed_ms >= 0),
    updated_at INTEGER NOT NULL
);

CREATE TABLE docket_tasks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    queue TEXT NOT NULL DEFAULT 'default',
    kind TEXT NOT NULL,
    payload TEXT NOT NULL DEFAULT 'null',
    priority INTEGER NOT NULL DEFAULT 0,
    state TEXT NOT NULL DEFAULT 'available' CHECK (state IN
        ('scheduled', 'available', 'running', 'retryable', 'completed', 'discarded', 'cancelled')),
    run_at INTEGER NOT NULL,
    expires_at INTEGER,
    attempt INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL DEFAULT 25 CHECK (max_attempts >= 1),
    backoff_initial_ms INTEGER NOT NULL DEFAULT 1000,
    backoff_coefficient REAL NOT NULL DEFAULT 2.0,
    backoff_max_ms INTEGER NOT NULL DEFAULT 3600000,
    backoff_jitter REAL NOT NULL DEFAULT 0.1,
    timeout_ms INTEGER NOT NULL DEFAULT 60000 CHECK (timeout_ms > 0),
    unique_key TEXT,
    concurrency_key TEXT,
    concurrency_limit INTEGER CHECK (concurrency_limit >= 1),
    node TEXT,
    result TEXT,
    errors TEXT NOT NULL DEFAULT '[]',
    progress TEXT,
    created_at INTEGER NOT NULL,
    attempted_at INTEGER,
    finished_at INTEGER,
    worker TEXT,
    lease_token TEXT,
    lease_ms INTEGER,
    lease_expires_at INTEGER,
    cancel_requested_at INTEGER
);

CREATE INDEX docket_tasks_claim_idx ON docket_tasks (queue, priority DESC, run_at, id)
    WHERE state = 'available';
CREATE INDEX docket_tasks_due_idx ON docket_tasks (run_at) WHERE state IN ('scheduled', 'retryable');
CREATE INDEX docket_tasks_lease_idx ON docket_tasks (lease_expires_at) WHERE state = 'running';
CREATE INDEX docket_tasks_running_key_idx ON docket_tasks (concurrency_key)
    WHERE state = 'running' AND concurrency_key IS NOT NULL;
CREATE INDEX docket_tasks_expires_idx ON docket_tasks (expires_at)
    WHERE expires_at IS NOT NULL AND state IN ('scheduled', 'available', 'retryable');
CREATE INDEX docket_tasks_finished_idx ON docket_tasks (finished_at)
    WHERE state IN ('completed', 'discarded', 'cancelled');
CREATE UNIQUE INDEX docket_tasks_unique_idx ON docket_tasks (unique_key)
    WHERE unique_key IS NOT NULL AND state IN ('scheduled', 'available', 'running', 'retryable');

CREATE TABLE docket_nodes (
    name TEXT PRIMARY KEY,
    started_at INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    stopped_at INTEGER,
    version TEXT NOT NULL,
    info TEXT NOT NULL DEFAULT '{}'
);
