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

-- name: counts_lock
SELECT counted_to, recounted_at FROM docket_counts WHERE id = 1 FOR UPDATE

-- name: counts_finished
SELECT queue, state, CAST(SUM(n) AS SIGNED) AS n FROM (
    SELECT queue, state, count(*) AS n FROM docket_tasks
        WHERE state IN ('completed', 'discarded', 'cancelled')
        AND finished_at <= ?2 AND (?1 IS NULL OR finished_at > ?1) GROUP BY queue, state
    UNION ALL
    SELECT queue, state, count(*) FROM docket_tasks_done
        WHERE finished_at <= ?2 AND (?1 IS NULL OR finished_at > ?1) GROUP BY queue, state) c
    GROUP BY queue, state

-- Finished tasks per queue, minute and pickup latency bucket (docket_core::history: the last
-- attempt's start - its run_at, in the buckets of LATENCY_BOUNDS_MS; NULL: never started), with
-- finished_at in (?1, ?2].

-- name: counts_minutes
SELECT queue, minute, CAST(bucket AS SIGNED) AS bucket,
    CAST(SUM(state = 'completed') AS SIGNED) AS completed,
    CAST(SUM(state = 'discarded') AS SIGNED) AS discarded,
    CAST(SUM(state = 'cancelled') AS SIGNED) AS cancelled
    FROM (SELECT queue, state, minute,
        {latency_bucket:lat} AS bucket
        FROM (
        SELECT queue, state, CAST(DATE_FORMAT(finished_at, '%Y-%m-%d %H:%i:00') AS DATETIME(6)) AS minute,
            TIMESTAMPDIFF(MICROSECOND, run_at, attempted_at) / 1000 AS lat
            FROM docket_tasks WHERE state IN ('completed', 'discarded', 'cancelled')
            AND finished_at > ?1 AND finished_at <= ?2
        UNION ALL
        SELECT queue, state, CAST(DATE_FORMAT(finished_at, '%Y-%m-%d %H:%i:00') AS DATETIME(6)),
            TIMESTAMPDIFF(MICROSECOND, run_at, attempted_at) / 1000
            FROM docket_tasks_done WHERE finished_at > ?1 AND finished_at <= ?2) l) f
    GROUP BY queue, minute, bucket

-- name: minutes_add
INSERT INTO docket_queue_minutes (queue, minute, completed, discarded, cancelled)
    VALUES (?1, ?2, ?3, ?4, ?5) ON DUPLICATE KEY UPDATE completed = completed + VALUES(completed),
    discarded = discarded + VALUES(discarded), cancelled = cancelled + VALUES(cancelled)

-- name: counts_add
INSERT INTO docket_queue_counts (queue, state, n) VALUES (?1, ?2, ?3)
    ON DUPLICATE KEY UPDATE n = n + VALUES(n)

-- name: put
INSERT INTO docket_queues (name, paused, concurrency_limit, max_attempts, backoff,
    timeout_ms, retention_completed_ms, retention_failed_ms, updated_at, mask_payload, schedule_limit,
    schedule_interval_ms, created_at, rate_limit, fair, partition_weights, partition_limit,
    dead_letter)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?9, ?13, ?14, ?15, ?16, ?17)
    ON DUPLICATE KEY UPDATE paused = VALUES(paused),
    concurrency_limit = VALUES(concurrency_limit), max_attempts = VALUES(max_attempts),
    backoff = VALUES(backoff), timeout_ms = VALUES(timeout_ms),
    retention_completed_ms = VALUES(retention_completed_ms),
    retention_failed_ms = VALUES(retention_failed_ms), updated_at = VALUES(updated_at),
    mask_payload = VALUES(mask_payload), schedule_limit = VALUES(schedule_limit),
    schedule_interval_ms = VALUES(schedule_interval_ms), rate_limit = VALUES(rate_limit),
    fair = VALUES(fair), partition_weights = VALUES(partition_weights),
    partition_limit = VALUES(partition_limit), dead_letter = VALUES(dead_letter)

-- name: settings_many
SELECT * FROM docket_queues WHERE name IN (?1)

-- name: latency_add
INSERT INTO docket_queue_latency (queue, minute, bucket, n) VALUES (?1, ?2, ?3, ?4)
    ON DUPLICATE KEY UPDATE n = n + VALUES(n)

-- name: depth_sample
-- Available and running tasks per queue, as the depth of minute ?1 (docket_core::history).
INSERT INTO docket_queue_minutes (queue, minute, completed, discarded, cancelled, available, running)
    SELECT queue, ?1, 0, 0, 0, SUM(state = 'available'), SUM(state = 'running')
    FROM docket_tasks WHERE state IN ('available', 'running') GROUP BY queue
    ON DUPLICATE KEY UPDATE available = VALUES(available), running = VALUES(running)

-- name: history_minutes
-- The charts' minutes since ?2, of queue ?1 or of all queues.
SELECT minute, CAST(SUM(completed) AS SIGNED) AS completed,
    CAST(SUM(discarded) AS SIGNED) AS discarded, CAST(SUM(cancelled) AS SIGNED) AS cancelled,
    CAST(SUM(available) AS SIGNED) AS available, CAST(SUM(running) AS SIGNED) AS running
    FROM docket_queue_minutes WHERE minute >= ?2 AND (?1 IS NULL OR queue = ?1)
    GROUP BY minute ORDER BY minute

-- name: history_latency
SELECT minute, CAST(bucket AS SIGNED) AS bucket, CAST(SUM(n) AS SIGNED) AS n
    FROM docket_queue_latency WHERE minute >= ?2 AND (?1 IS NULL OR queue = ?1)
    GROUP BY minute, bucket
