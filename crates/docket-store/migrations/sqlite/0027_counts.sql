-- Queue counts that stay cheap at millions of finished tasks: see the PostgreSQL migration 0029
-- and docket_core::counts. Times are microseconds since 1970, as finished_at.
CREATE TABLE docket_queue_counts (
    queue TEXT NOT NULL,
    state TEXT NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (queue, state)
) WITHOUT ROWID;
CREATE TABLE docket_counts (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    counted_to INTEGER NOT NULL,
    recounted_at INTEGER
);
INSERT INTO docket_counts VALUES (1, 0, NULL);
CREATE TABLE docket_queue_minutes (
    queue TEXT NOT NULL,
    minute INTEGER NOT NULL,
    completed INTEGER NOT NULL,
    discarded INTEGER NOT NULL,
    cancelled INTEGER NOT NULL,
    PRIMARY KEY (queue, minute)
) WITHOUT ROWID;
CREATE INDEX docket_queue_minutes_minute_idx ON docket_queue_minutes (minute);
