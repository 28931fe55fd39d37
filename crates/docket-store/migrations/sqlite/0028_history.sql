-- The charts' history: see the PostgreSQL migration 0030 and docket_core::history.
ALTER TABLE docket_queue_minutes ADD COLUMN available INTEGER;
ALTER TABLE docket_queue_minutes ADD COLUMN running INTEGER;
CREATE TABLE docket_queue_latency (
    queue TEXT NOT NULL,
    minute INTEGER NOT NULL,
    bucket INTEGER NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (queue, minute, bucket)
) WITHOUT ROWID;
CREATE INDEX docket_queue_latency_minute_idx ON docket_queue_latency (minute);
