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

-- name: counts_lock
-- The write transaction (BEGIN IMMEDIATE) already serialises the steps and the prunes.
SELECT counted_to, recounted_at FROM docket_counts WHERE id = 1

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
        {latency_bucket:lat} AS bucket
        FROM (SELECT queue, state, (finished_at / 60000000) * 60000000 AS minute,
            (attempted_at - run_at) / 1000 AS lat
            FROM docket_tasks WHERE state IN ('completed', 'discarded', 'cancelled')
            AND finished_at > ?1 AND finished_at <= ?2))
    GROUP BY queue, minute, bucket

-- name: counts_add
INSERT INTO docket_queue_counts (queue, state, n) VALUES (?1, ?2, ?3)
    ON CONFLICT (queue, state) DO UPDATE SET n = docket_queue_counts.n + excluded.n

-- name: settings_many
SELECT * FROM docket_queues WHERE name IN (SELECT value FROM json_each(?1))

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
