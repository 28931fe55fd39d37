-- Workers' reports (node-daemons' worker states IDLE/WORK/STOP and the tasks in hand): one row
-- per worker name, replaced by each report.
CREATE TABLE docket_workers (
    name text PRIMARY KEY,
    report jsonb NOT NULL,
    reported_at timestamptz NOT NULL,
    interval_ms bigint NOT NULL CHECK (interval_ms > 0)
);
