-- The charts' history (issue 27; docket_core::history): queue depth sampled once a minute, and
-- pickup latency (last attempt's start - its run_at) of the tasks finished each minute, in
-- fixed buckets. Kept and pruned with docket_queue_minutes (a day).
ALTER TABLE docket_queue_minutes ADD COLUMN available bigint, ADD COLUMN running bigint;
CREATE TABLE docket_queue_latency (
    queue text NOT NULL,
    minute timestamptz NOT NULL,
    bucket smallint NOT NULL,
    n bigint NOT NULL,
    PRIMARY KEY (queue, minute, bucket)
);
CREATE INDEX docket_queue_latency_minute_idx ON docket_queue_latency (minute);
