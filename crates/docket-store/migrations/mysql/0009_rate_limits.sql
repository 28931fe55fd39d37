-- Rate limits (issue 26 item 3): see the PostgreSQL migration 0027. MySQL has no partial
-- index: the running tasks of a key are found by (rate_limit, state).
CREATE TABLE docket_rate_limits (
    name VARCHAR(100) NOT NULL PRIMARY KEY,
    kind VARCHAR(16) NOT NULL,
    lim BIGINT NOT NULL,
    period_ms BIGINT NULL,
    created_at DATETIME(6) NOT NULL,
    updated_at DATETIME(6) NOT NULL,
    admitted_total BIGINT NOT NULL DEFAULT 0,
    delayed_total BIGINT NOT NULL DEFAULT 0
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TABLE docket_rate_limit_keys (
    `key` VARCHAR(256) NOT NULL PRIMARY KEY,
    name VARCHAR(100) NOT NULL,
    at DATETIME(6) NULL,
    used BIGINT NOT NULL DEFAULT 0,
    blocked_until DATETIME(6) NULL,
    admitted_total BIGINT NOT NULL DEFAULT 0,
    delayed_total BIGINT NOT NULL DEFAULT 0,
    touched_at DATETIME(6) NOT NULL,
    KEY docket_rate_limit_keys_name_idx (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
ALTER TABLE docket_tasks ADD COLUMN rate_limit VARCHAR(256) NULL,
    ADD KEY docket_tasks_rate_idx (rate_limit, state);
ALTER TABLE docket_tasks_done ADD COLUMN rate_limit VARCHAR(256) NULL;
ALTER TABLE docket_queues ADD COLUMN rate_limit VARCHAR(256) NULL;
