-- Queue counts that stay cheap at millions of finished tasks (issue 27; docket_core::counts).
-- Finished tasks by queue and state, counted up to docket_counts.counted_to; a read adds the
-- unfinished states (the hot partition) and what finished after counted_to.
CREATE TABLE docket_queue_counts (
    queue text NOT NULL,
    state text NOT NULL,
    n bigint NOT NULL,
    PRIMARY KEY (queue, state)
);
-- One row: how far the kept counts go, and when they were last counted from scratch (NULL:
-- never; the first maintenance step does it). 1970: nothing counted yet, so reads count every
-- finished task until then.
CREATE TABLE docket_counts (
    id integer PRIMARY KEY CHECK (id = 1),
    counted_to timestamptz NOT NULL,
    recounted_at timestamptz
);
INSERT INTO docket_counts VALUES (1, '1970-01-01T00:00:00Z', NULL);
-- Finished tasks per queue and minute (the overview's charts), added by the same steps over the
-- same ranges, so each finished task lands once; kept a day (docket_core::counts::MINUTES_KEPT).
-- A prune leaves them: they are history, not what is stored.
CREATE TABLE docket_queue_minutes (
    queue text NOT NULL,
    minute timestamptz NOT NULL,
    completed bigint NOT NULL,
    discarded bigint NOT NULL,
    cancelled bigint NOT NULL,
    PRIMARY KEY (queue, minute)
);
CREATE INDEX docket_queue_minutes_minute_idx ON docket_queue_minutes (minute);
