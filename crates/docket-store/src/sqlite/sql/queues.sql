-- Queues: their settings rows, and their tasks counted by state.

-- name: counts
-- One statement, one snapshot (docket_core::counts). Each unfinished state is counted through
-- its own partial index (claim_idx, lease_idx, due_idx), so the finished rows this table also
-- holds are never read; finished ones are kept up to counted_to, plus those finished after it.
SELECT queue, state, sum(n) AS n FROM (
    SELECT queue, 'available' AS state, count(*) AS n FROM docket_tasks
        WHERE state = 'available' AND (?1 IS NULL OR queue = ?1) GROUP BY queue
    UNION ALL
    SELECT queue, 'running', count(*) FROM docket_tasks INDEXED BY docket_tasks_lease_idx
        WHERE state = 'running' AND (?1 IS NULL OR queue = ?1) GROUP BY queue
    UNION ALL
    SELECT queue, state, count(*) FROM docket_tasks INDEXED BY docket_tasks_due_idx
        WHERE state IN ('scheduled', 'retryable') AND (?1 IS NULL OR queue = ?1)
        GROUP BY queue, state
    UNION ALL
    SELECT queue, state, n FROM docket_queue_counts WHERE (?1 IS NULL OR queue = ?1)
    UNION ALL
    SELECT queue, state, count(*) FROM docket_tasks
        WHERE finished_at > ?2 AND state IN ('completed', 'discarded', 'cancelled')
        AND (?1 IS NULL OR queue = ?1) GROUP BY queue, state
    UNION ALL
    -- The kept counts moved past ?2 (the counted_to the caller read): read again.
    SELECT '', 'stale', 1 FROM docket_counts WHERE id = 1 AND counted_to <> ?2)
    GROUP BY queue, state

-- name: counted_to
SELECT counted_to FROM docket_counts WHERE id = 1

-- name: counts_lock
-- The write transaction (BEGIN IMMEDIATE) already serialises the steps and the prunes.
SELECT counted_to, recounted_at FROM docket_counts WHERE id = 1

-- name: counts_recounted
SELECT recounted_at FROM docket_counts WHERE id = 1

-- name: counts_finished
SELECT queue, state, count(*) AS n FROM docket_tasks
    WHERE state IN ('completed', 'discarded', 'cancelled')
    AND finished_at <= ?2 AND (?1 IS NULL OR finished_at > ?1)
    GROUP BY queue, state

-- Finished tasks per queue, minute and pickup latency bucket (docket_core::history: the last
-- attempt's start - its run_at, in the buckets of LATENCY_BOUNDS_MS; NULL: never started), with
-- finished_at in (?1, ?2].
-- name: counts_minutes
SELECT queue, minute, bucket, sum(state = 'completed') AS completed,
    sum(state = 'discarded') AS discarded, sum(state = 'cancelled') AS cancelled
    FROM (SELECT queue, state, minute,
        CASE WHEN lat < 10 THEN 0 WHEN lat < 50 THEN 1 WHEN lat < 100 THEN 2
            WHEN lat < 250 THEN 3 WHEN lat < 500 THEN 4 WHEN lat < 1000 THEN 5
            WHEN lat < 2500 THEN 6 WHEN lat < 5000 THEN 7 WHEN lat < 10000 THEN 8
            WHEN lat < 30000 THEN 9 WHEN lat < 60000 THEN 10 WHEN lat < 300000 THEN 11
            WHEN lat IS NOT NULL THEN 12 END AS bucket
        FROM (SELECT queue, state, (finished_at / 60000000) * 60000000 AS minute,
            (attempted_at - run_at) / 1000 AS lat
            FROM docket_tasks WHERE state IN ('completed', 'discarded', 'cancelled')
            AND finished_at > ?1 AND finished_at <= ?2))
    GROUP BY queue, minute, bucket

-- name: minutes_add
INSERT INTO docket_queue_minutes (queue, minute, completed, discarded, cancelled)
    VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (queue, minute) DO UPDATE SET
    completed = docket_queue_minutes.completed + excluded.completed,
    discarded = docket_queue_minutes.discarded + excluded.discarded,
    cancelled = docket_queue_minutes.cancelled + excluded.cancelled

-- name: minutes_prune
DELETE FROM docket_queue_minutes WHERE minute < ?1

-- name: counts_clear
DELETE FROM docket_queue_counts

-- name: counts_add
INSERT INTO docket_queue_counts (queue, state, n) VALUES (?1, ?2, ?3)
    ON CONFLICT (queue, state) DO UPDATE SET n = docket_queue_counts.n + excluded.n

-- name: counts_moved
UPDATE docket_counts SET counted_to = ?1, recounted_at = COALESCE(?2, recounted_at) WHERE id = 1

-- name: put
INSERT INTO docket_queues (name, paused, concurrency_limit, max_attempts, backoff,
    timeout_ms, retention_completed_ms, retention_failed_ms, updated_at, mask_payload, schedule_limit,
    schedule_interval_ms, created_at, rate_limit, fair, partition_weights, partition_limit)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?9, ?13, ?14, ?15, ?16)
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
SELECT * FROM docket_queues WHERE name = ?1

-- name: settings_many
SELECT * FROM docket_queues WHERE name IN (SELECT value FROM json_each(?1))

-- name: list
SELECT * FROM docket_queues

-- name: oldest_available
SELECT queue, min(run_at) AS run_at FROM docket_tasks WHERE state = 'available' GROUP BY queue

-- name: latency_add
INSERT INTO docket_queue_latency (queue, minute, bucket, n) VALUES (?1, ?2, ?3, ?4)
    ON CONFLICT (queue, minute, bucket) DO UPDATE SET n = docket_queue_latency.n + excluded.n

-- name: latency_prune
DELETE FROM docket_queue_latency WHERE minute < ?1

-- name: depth_sample
-- Available and running tasks per queue, as the depth of minute ?1 (docket_core::history).
INSERT INTO docket_queue_minutes (queue, minute, completed, discarded, cancelled, available, running)
    SELECT queue, ?1, 0, 0, 0, sum(state = 'available'), sum(state = 'running')
    FROM docket_tasks WHERE state IN ('available', 'running') GROUP BY queue
    ON CONFLICT (queue, minute) DO UPDATE SET available = excluded.available,
    running = excluded.running

-- name: history_minutes
-- The charts' minutes since ?2, of queue ?1 or of all queues.
SELECT minute, sum(completed) AS completed, sum(discarded) AS discarded,
    sum(cancelled) AS cancelled, sum(available) AS available, sum(running) AS running
    FROM docket_queue_minutes WHERE minute >= ?2 AND (?1 IS NULL OR queue = ?1)
    GROUP BY minute ORDER BY minute

-- name: history_latency
SELECT minute, bucket, sum(n) AS n FROM docket_queue_latency
    WHERE minute >= ?2 AND (?1 IS NULL OR queue = ?1) GROUP BY minute, bucket
