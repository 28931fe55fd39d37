-- Schedules (see the PostgreSQL migration of the same number). Times in µs since the epoch.
CREATE TABLE docket_schedules (
    name TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    paused INTEGER NOT NULL DEFAULT 0,
    next_run_at INTEGER NOT NULL,
    last_run_at INTEGER,
    last_task_id INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX docket_schedules_due ON docket_schedules (next_run_at) WHERE paused = 0;
