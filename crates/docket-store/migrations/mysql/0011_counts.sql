-- Queue counts that stay cheap at millions of finished tasks: see the PostgreSQL migration 0029
-- and docket_core::counts.
CREATE TABLE docket_queue_counts (
    queue VARCHAR(512) NOT NULL,
    state VARCHAR(16) NOT NULL,
    n BIGINT NOT NULL,
    PRIMARY KEY (queue, state)
);
CREATE TABLE docket_counts (
    id INT NOT NULL PRIMARY KEY,
    counted_to DATETIME(6) NOT NULL,
    recounted_at DATETIME(6) NULL
);
INSERT INTO docket_counts VALUES (1, '1970-01-01 00:00:00', NULL);
CREATE TABLE docket_queue_minutes (
    queue VARCHAR(512) NOT NULL,
    minute DATETIME(6) NOT NULL,
    completed BIGINT NOT NULL,
    discarded BIGINT NOT NULL,
    cancelled BIGINT NOT NULL,
    PRIMARY KEY (queue, minute),
    KEY docket_queue_minutes_minute_idx (minute)
);
