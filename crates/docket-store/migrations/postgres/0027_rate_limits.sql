-- Rate limits (issue 26 item 3): named limits (docket_rate_limits) that tasks name in
-- rate_limit (`name` or `name:partition`), and one row per key seen (docket_rate_limit_keys)
-- holding what docket_core::rate_limit counts: `at` (window start, or the bucket's theoretical
-- arrival time), `used` (admissions in the window), `blocked_until` (claims skip the key's
-- tasks until then), and the admitted and delayed totals the metrics and dashboard show. A claim
-- locks the rows of the keys among its candidates (in key order), asks the rule for each key's
-- room, and writes the new state in the same transaction.
CREATE TABLE docket_rate_limits (
    name text PRIMARY KEY,
    kind text NOT NULL,
    lim bigint NOT NULL,
    period_ms bigint,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    -- Totals of keys pruned after a day unused (their rows go; the totals stay).
    admitted_total bigint NOT NULL DEFAULT 0,
    delayed_total bigint NOT NULL DEFAULT 0
);
CREATE TABLE docket_rate_limit_keys (
    key text PRIMARY KEY,
    name text NOT NULL,
    at timestamptz,
    used bigint NOT NULL DEFAULT 0,
    blocked_until timestamptz,
    admitted_total bigint NOT NULL DEFAULT 0,
    delayed_total bigint NOT NULL DEFAULT 0,
    touched_at timestamptz NOT NULL
);
CREATE INDEX docket_rate_limit_keys_name_idx ON docket_rate_limit_keys (name);
-- No default: adding the columns rewrites nothing. The partial index holds running tasks
-- with a rate limit only (concurrent limits count them), so other tasks pay nothing for it.
ALTER TABLE docket_tasks ADD COLUMN rate_limit text;
CREATE INDEX docket_tasks_running_rate_idx ON docket_tasks_live (rate_limit)
    WHERE state = 'running' AND rate_limit IS NOT NULL;
ALTER TABLE docket_queues ADD COLUMN rate_limit text;
