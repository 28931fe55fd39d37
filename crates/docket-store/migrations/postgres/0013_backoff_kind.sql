-- Linear backoff (node-daemons' delayRatio) beside the exponential default.
ALTER TABLE docket_tasks ADD COLUMN backoff_kind text NOT NULL DEFAULT 'exponential'
    CHECK (backoff_kind IN ('exponential', 'linear'));
