-- Queues: their settings rows, and their tasks counted by state.

-- name: counts
-- The hot table and docket_tasks_done (0004).
SELECT queue, state, CAST(SUM(n) AS SIGNED) AS n FROM (
    SELECT queue, state, count(*) AS n FROM docket_tasks
        WHERE (?1 IS NULL OR queue = ?1) GROUP BY queue, state
    UNION ALL
    SELECT queue, state, count(*) AS n FROM docket_tasks_done
        WHERE (?1 IS NULL OR queue = ?1) GROUP BY queue, state) c
    GROUP BY queue, state

-- name: put
INSERT INTO docket_queues (name, paused, concurrency_limit, max_attempts, backoff,
    timeout_ms, retention_completed_ms, retention_failed_ms, updated_at, mask_payload, schedule_limit,
    schedule_interval_ms, created_at, rate_limit, fair, partition_weights, partition_limit)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?9, ?13, ?14, ?15, ?16)
    ON DUPLICATE KEY UPDATE paused = VALUES(paused),
    concurrency_limit = VALUES(concurrency_limit), max_attempts = VALUES(max_attempts),
    backoff = VALUES(backoff), timeout_ms = VALUES(timeout_ms),
    retention_completed_ms = VALUES(retention_completed_ms),
    retention_failed_ms = VALUES(retention_failed_ms), updated_at = VALUES(updated_at),
    mask_payload = VALUES(mask_payload), schedule_limit = VALUES(schedule_limit),
    schedule_interval_ms = VALUES(schedule_interval_ms), rate_limit = VALUES(rate_limit),
    fair = VALUES(fair), partition_weights = VALUES(partition_weights),
    partition_limit = VALUES(partition_limit)

-- name: get
SELECT * FROM docket_queues WHERE name = ?1

-- name: list
SELECT * FROM docket_queues

-- name: oldest_available
SELECT queue, min(run_at) AS run_at FROM docket_tasks WHERE state = 'available' GROUP BY queue
