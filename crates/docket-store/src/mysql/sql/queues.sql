-- Queues: their settings rows, and their tasks counted by state.

-- name: counts
-- One statement (docket_core::counts): unfinished tasks in the hot table; finished ones kept up
-- to counted_to, plus those finished after it in either table (rotate moves them to
-- docket_tasks_done, 0004).
SELECT queue, state, CAST(SUM(n) AS SIGNED) AS n FROM (
    SELECT queue, state, count(*) AS n FROM docket_tasks
        WHERE state IN ('scheduled', 'available', 'running', 'retryable')
        AND (?1 IS NULL OR queue = ?1) GROUP BY queue, state
    UNION ALL
    SELECT queue, state, n FROM docket_queue_counts WHERE (?1 IS NULL OR queue = ?1)
    UNION ALL
    SELECT queue, state, count(*) FROM docket_tasks
        WHERE state IN ('completed', 'discarded', 'cancelled')
        AND finished_at > ?2 AND (?1 IS NULL OR queue = ?1) GROUP BY queue, state
    UNION ALL
    SELECT queue, state, count(*) FROM docket_tasks_done
        WHERE finished_at > ?2 AND (?1 IS NULL OR queue = ?1) GROUP BY queue, state
    UNION ALL
    -- The kept counts moved past ?2 (the counted_to the caller read): read again.
    SELECT '', 'stale', 1 FROM docket_counts WHERE id = 1 AND counted_to <> ?2) c
    GROUP BY queue, state

-- name: counted_to
SELECT counted_to FROM docket_counts WHERE id = 1

-- name: counts_lock
SELECT counted_to, recounted_at FROM docket_counts WHERE id = 1 FOR UPDATE

-- name: counts_recounted
SELECT recounted_at FROM docket_counts WHERE id = 1

-- name: counts_finished
SELECT queue, state, CAST(SUM(n) AS SIGNED) AS n FROM (
    SELECT queue, state, count(*) AS n FROM docket_tasks
        WHERE state IN ('completed', 'discarded', 'cancelled')
        AND finished_at <= ?2 AND (?1 IS NULL OR finished_at > ?1) GROUP BY queue, state
    UNION ALL
    SELECT queue, state, count(*) FROM docket_tasks_done
        WHERE finished_at <= ?2 AND (?1 IS NULL OR finished_at > ?1) GROUP BY queue, state) c
    GROUP BY queue, state

-- name: counts_minutes
SELECT queue, minute, CAST(SUM(completed) AS SIGNED) AS completed,
    CAST(SUM(discarded) AS SIGNED) AS discarded, CAST(SUM(cancelled) AS SIGNED) AS cancelled
    FROM (
    SELECT queue, CAST(DATE_FORMAT(finished_at, '%Y-%m-%d %H:%i:00') AS DATETIME(6)) AS minute,
        state = 'completed' AS completed, state = 'discarded' AS discarded,
        state = 'cancelled' AS cancelled
        FROM docket_tasks WHERE state IN ('completed', 'discarded', 'cancelled')
        AND finished_at > ?1 AND finished_at <= ?2
    UNION ALL
    SELECT queue, CAST(DATE_FORMAT(finished_at, '%Y-%m-%d %H:%i:00') AS DATETIME(6)),
        state = 'completed', state = 'discarded', state = 'cancelled'
        FROM docket_tasks_done WHERE finished_at > ?1 AND finished_at <= ?2) f
    GROUP BY queue, minute

-- name: minutes_add
INSERT INTO docket_queue_minutes (queue, minute, completed, discarded, cancelled)
    VALUES (?1, ?2, ?3, ?4, ?5) ON DUPLICATE KEY UPDATE completed = completed + VALUES(completed),
    discarded = discarded + VALUES(discarded), cancelled = cancelled + VALUES(cancelled)

-- name: minutes_prune
DELETE FROM docket_queue_minutes WHERE minute < ?1

-- name: counts_clear
DELETE FROM docket_queue_counts

-- name: counts_add
INSERT INTO docket_queue_counts (queue, state, n) VALUES (?1, ?2, ?3)
    ON DUPLICATE KEY UPDATE n = n + VALUES(n)

-- name: counts_moved
UPDATE docket_counts SET counted_to = ?1, recounted_at = COALESCE(?2, recounted_at) WHERE id = 1

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
