-- Task lifecycle events for event sinks (issue 25): see the PostgreSQL migration 0024. The
-- triggers are created when a sink first asks (notifications.sql task_events_arm_*).
CREATE TABLE docket_task_events (
    seq BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    task_id BIGINT NOT NULL,
    queue VARCHAR(512) NOT NULL,
    kind VARCHAR(512) NOT NULL,
    from_state VARCHAR(16) NULL,
    to_state VARCHAR(16) NOT NULL,
    attempt INT NOT NULL,
    from_stage VARCHAR(512) NULL,
    stage VARCHAR(512) NULL,
    at DATETIME(6) NOT NULL,
    KEY docket_task_events_queue_idx (queue, seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE docket_task_event_queues (
    queue VARCHAR(512) NOT NULL PRIMARY KEY
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
