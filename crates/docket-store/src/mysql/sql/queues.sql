-- name: counts
SELECT queue, state, CAST(SUM(n) AS SIGNED) AS n FROM (
    SELECT queue, state, count(*) AS n FROM docket_tasks
        WHERE (? IS NULL OR queue = ?) GROUP BY queue, state
    UNION ALL
    SELECT queue, state, count(*) AS n FROM docket_tasks_done
        WHERE (? IS NULL OR queue = ?) GROUP BY queue, state) c
    GROUP BY queue, state

-- name: put
INSERT INTO docket_queues (name, paused, concurrency_limit, max_attempts, backoff,
    timeout_ms, retention_completed_ms, retention_failed_ms, updated_at, mask_payload, schedule_limit,
    schedule_interval_ms, created_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON DUPLICATE KEY UPDATE paused = VALUES(paused),
    concurrency_limit = VALUES(concurrency_limit), max_attempts = VALUES(max_attempts),
    backoff = VALUES(backoff), timeout_ms = VALUES(timeout_ms),
    retention_completed_ms = VALUES(retention_completed_ms),
    retention_failed_ms = VALUES(retention_failed_ms), updated_at = VALUES(updated_at),
    mask_payload = VALUES(mask_payload), schedule_limit = VALUES(schedule_limit),
    schedule_interval_ms = VALUES(schedule_interval_ms)
