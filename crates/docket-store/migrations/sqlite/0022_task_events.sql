-- Task lifecycle events for event sinks (issue 25): see the PostgreSQL migration 0024. The
-- triggers are created when a sink first asks (notifications.sql task_events_arm_*).
CREATE TABLE docket_task_events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id INTEGER NOT NULL,
    queue TEXT NOT NULL,
    kind TEXT NOT NULL,
    from_state TEXT,
    to_state TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    from_stage TEXT,
    stage TEXT,
    at INTEGER NOT NULL
);
CREATE INDEX docket_task_events_queue_idx ON docket_task_events (queue, seq);
CREATE TABLE docket_task_event_queues (queue TEXT PRIMARY KEY);
