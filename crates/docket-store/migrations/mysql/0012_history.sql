-- The charts' history: see the PostgreSQL migration 0030 and docket_core::history.
ALTER TABLE docket_queue_minutes ADD COLUMN available BIGINT NULL, ADD COLUMN running BIGINT NULL;
CREATE TABLE docket_queue_latency (
    queue VARCHAR(512) NOT NULL,
    minute DATETIME(6) NOT NULL,
    bucket SMALLINT NOT NULL,
    n BIGINT NOT NULL,
    PRIMARY KEY (queue, minute, bucket),
    KEY docket_queue_latency_minute_idx (minute)
);
