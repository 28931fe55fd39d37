-- Queues: their settings rows, and their tasks counted by state.

-- name: counts
-- One statement, one snapshot (docket_core::counts): unfinished tasks counted in the hot
-- partition; finished ones kept up to counted_to ($2, read before), plus those finished after
-- it (a range of docket_tasks_finished_idx).
SELECT queue, state, sum(n)::bigint AS n FROM (
    SELECT queue, state, count(*) AS n FROM docket_tasks
        WHERE state IN ('scheduled', 'available', 'running', 'retryable')
        AND ($1::text IS NULL OR queue = $1) GROUP BY queue, state
    UNION ALL
    SELECT queue, state, n FROM docket_queue_counts WHERE ($1::text IS NULL OR queue = $1)
    UNION ALL
    SELECT queue, state, count(*) FROM docket_tasks
        WHERE state IN ('completed', 'discarded', 'cancelled')
        AND finished_at > $2 AND ($1::text IS NULL OR queue = $1) GROUP BY queue, state
    UNION ALL
    -- The kept counts moved past $2 (the counted_to the caller read): read again.
    SELECT '', 'stale', 1 FROM docket_counts WHERE id = 1 AND counted_to <> $2) c
    GROUP BY queue, state

-- name: counts_lock
-- Serialises the steps of the kept counts and the prunes that subtract from them.
SELECT counted_to, recounted_at FROM docket_counts WHERE id = 1 FOR UPDATE

-- name: counts_finished
-- Finished tasks by queue and state with finished_at in ($1, $2] ($1 NULL: from the start).
SELECT queue, state, count(*) AS n FROM docket_tasks
    WHERE state IN ('completed', 'discarded', 'cancelled')
    AND finished_at <= $2 AND ($1::timestamptz IS NULL OR finished_at > $1)
    GROUP BY queue, state

-- Finished tasks per queue, minute and pickup latency bucket (docket_core::history: the last
-- attempt's start - its run_at, in the buckets of LATENCY_BOUNDS_MS; NULL: never started), with
-- finished_at in ($1, $2].

-- name: counts_minutes
SELECT queue, minute, bucket::bigint AS bucket,
    count(*) FILTER (WHERE state = 'completed') AS completed,
    count(*) FILTER (WHERE state = 'discarded') AS discarded,
    count(*) FILTER (WHERE state = 'cancelled') AS cancelled
    FROM (SELECT queue, state, minute,
        {latency_bucket:lat} AS bucket
        FROM (SELECT queue, state, date_trunc('minute', finished_at) AS minute,
            extract(epoch FROM attempted_at - run_at) * 1000 AS lat
            FROM docket_tasks WHERE state IN ('completed', 'discarded', 'cancelled')
            AND finished_at > $1 AND finished_at <= $2) l) f
    GROUP BY queue, minute, bucket

-- name: counts_add
-- $3 may be negative (a prune).
INSERT INTO docket_queue_counts (queue, state, n) VALUES ($1, $2, $3)
    ON CONFLICT (queue, state) DO UPDATE SET n = docket_queue_counts.n + excluded.n

-- name: settings_many
SELECT * FROM docket_queues WHERE name = ANY($1)

-- name: depth_sample
-- Available and running tasks per queue, as the depth of minute $1 (docket_core::history).
INSERT INTO docket_queue_minutes (queue, minute, completed, discarded, cancelled, available, running)
    SELECT queue, $1, 0, 0, 0, count(*) FILTER (WHERE state = 'available'),
    count(*) FILTER (WHERE state = 'running')
    FROM docket_tasks WHERE state IN ('available', 'running') GROUP BY queue
    ON CONFLICT (queue, minute) DO UPDATE SET available = excluded.available,
    running = excluded.running

-- name: history_minutes
-- The charts' minutes since $2, of queue $1 or of all queues.
SELECT minute, sum(completed)::bigint AS completed, sum(discarded)::bigint AS discarded,
    sum(cancelled)::bigint AS cancelled, sum(available)::bigint AS available,
    sum(running)::bigint AS running
    FROM docket_queue_minutes WHERE minute >= $2 AND ($1::text IS NULL OR queue = $1)
    GROUP BY minute ORDER BY minute

-- name: history_latency
SELECT minute, bucket::bigint AS bucket, sum(n)::bigint AS n FROM docket_queue_latency
    WHERE minute >= $2 AND ($1::text IS NULL OR queue = $1) GROUP BY minute, bucket
