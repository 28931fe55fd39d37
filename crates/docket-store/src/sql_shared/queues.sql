-- queues: the statements written alike on several backends, with numbered placeholders `?N`
-- (PostgreSQL's `$N` made by the loader, crate::sql). A statement of the same name in a
-- backend's own sql/queues.sql replaces the one here on that backend.

-- name: counted_to
SELECT counted_to FROM docket_counts WHERE id = 1

-- name: counts_recounted
SELECT recounted_at FROM docket_counts WHERE id = 1

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

-- name: counts_moved
UPDATE docket_counts SET counted_to = ?1, recounted_at = COALESCE(?2, recounted_at) WHERE id = 1

-- name: put
INSERT INTO docket_queues (name, paused, concurrency_limit, max_attempts, backoff,
    timeout_ms, retention_completed_ms, retention_failed_ms, updated_at, mask_payload, schedule_limit,
    schedule_interval_ms, created_at, rate_limit, fair, partition_weights, partition_limit,
    dead_letter)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?9, ?13, ?14, ?15, ?16, ?17)
    ON CONFLICT (name) DO UPDATE SET paused = excluded.paused,
    concurrency_limit = excluded.concurrency_limit, max_attempts = excluded.max_attempts,
    backoff = excluded.backoff, timeout_ms = excluded.timeout_ms,
    retention_completed_ms = excluded.retention_completed_ms,
    retention_failed_ms = excluded.retention_failed_ms, updated_at = excluded.updated_at,
    mask_payload = excluded.mask_payload, schedule_limit = excluded.schedule_limit,
    schedule_interval_ms = excluded.schedule_interval_ms, rate_limit = excluded.rate_limit,
    fair = excluded.fair, partition_weights = excluded.partition_weights,
    partition_limit = excluded.partition_limit, dead_letter = excluded.dead_letter

-- name: get
SELECT * FROM docket_queues WHERE name = ?1

-- name: list
SELECT * FROM docket_queues

-- name: oldest_available
SELECT queue, min(run_at) AS run_at FROM docket_tasks WHERE state = 'available' GROUP BY queue

-- name: latency_add
INSERT INTO docket_queue_latency (queue, minute, bucket, n) VALUES (?1, ?2, ?3, ?4)
    ON CONFLICT (queue, minute, bucket) DO UPDATE SET n = docket_queue_latency.n + excluded.n

-- name: latency_prune
DELETE FROM docket_queue_latency WHERE minute < ?1
