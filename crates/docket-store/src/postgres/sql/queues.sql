-- Queues: their settings rows, and their tasks counted by state.

-- name: counts
SELECT queue, state, count(*) AS n FROM docket_tasks
    WHERE ($1::text IS NULL OR queue = $1) GROUP BY queue, state

-- name: put
INSERT INTO docket_queues (name, paused, concurrency_limit, max_attempts, backoff,
    timeout_ms, retention_completed_ms, retention_failed_ms, updated_at, mask_payload, schedule_limit,
    schedule_interval_ms, created_at, rate_limit, fair, partition_weights, partition_limit)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $9, $13, $14, $15, $16)
    ON CONFLICT (name) DO UPDATE SET paused = excluded.paused,
    concurrency_limit = excluded.concurrency_limit, max_attempts = excluded.max_attempts,
    backoff = excluded.backoff, timeout_ms = excluded.timeout_ms,
    retention_completed_ms = excluded.retention_completed_ms,
    retention_failed_ms = excluded.retention_failed_ms, updated_at = excluded.updated_at,
    mask_payload = excluded.mask_payload, schedule_limit = excluded.schedule_limit,
    schedule_interval_ms = excluded.schedule_interval_ms, rate_limit = excluded.rate_limit,
    fair = excluded.fair, partition_weights = excluded.partition_weights,
    partition_limit = excluded.partition_limit

-- name: get
SELECT * FROM docket_queues WHERE name = $1

-- name: list
SELECT * FROM docket_queues

-- name: oldest_available
SELECT queue, min(run_at) AS run_at FROM docket_tasks WHERE state = 'available' GROUP BY queue
