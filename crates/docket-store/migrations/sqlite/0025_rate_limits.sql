-- Rate limits (issue 26 item 3): see the PostgreSQL migration 0027.
CREATE TABLE docket_rate_limits (
    name TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    lim INTEGER NOT NULL,
    period_ms INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    admitted_total INTEGER NOT NULL DEFAULT 0,
    delayed_total INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE docket_rate_limit_keys (
    key TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    at INTEGER,
    used INTEGER NOT NULL DEFAULT 0,
    blocked_until INTEGER,
    admitted_total INTEGER NOT NULL DEFAULT 0,
    delayed_total INTEGER NOT NULL DEFAULT 0,
    touched_at INTEGER NOT NULL
);
CREATE INDEX docket_rate_limit_keys_name_idx ON docket_rate_limit_keys (name);
ALTER TABLE docket_tasks ADD COLUMN rate_limit TEXT;
CREATE INDEX docket_tasks_running_rate_idx ON docket_tasks (rate_limit)
    WHERE state = 'running' AND rate_limit IS NOT NULL;
ALTER TABLE docket_queues ADD COLUMN rate_limit TEXT;
