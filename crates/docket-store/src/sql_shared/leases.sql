-- leases: the statements written alike on several backends, with numbered placeholders `?N`
-- (PostgreSQL's `$N` made by the loader, crate::sql). A statement of the same name in a
-- backend's own sql/leases.sql replaces the one here on that backend.

-- name: complete_cancelled
UPDATE docket_tasks SET state = 'cancelled', finished_at = ?2, result = ?3,
    lease_expires_at = NULL, {runs:cancelled:?2} WHERE id = ?1

-- name: heartbeat_cancelled
UPDATE docket_tasks SET state = 'cancelled', finished_at = ?2,
    lease_expires_at = NULL, progress = COALESCE(?3, progress), {runs:cancelled:?2} WHERE id = ?1

-- name: heartbeat
UPDATE docket_tasks SET progress = COALESCE(?2, progress),
    edited_at = CASE WHEN ?2 IS NULL THEN edited_at ELSE ?3 END,
    lease_ms = ?4, lease_expires_at = ?5 WHERE id = ?1 RETURNING {COLS}

-- name: release_prune
DELETE FROM docket_claim_releases WHERE released_at < ?1

-- name: release_marked
SELECT 1 AS marked FROM docket_claim_releases WHERE nonce = ?1

-- name: lease_token
SELECT lease_token FROM docket_tasks WHERE id = ?1 AND state = 'running'

-- name: claim_queue
-- The queue's settings a claim follows (none for a queue never configured).
SELECT paused, concurrency_limit, schedule_limit, fair, partition_weights FROM docket_queues
    WHERE name = ?1

-- name: running_in_queue
-- Running tasks of queue ?1, counted under the queue's lock.
SELECT count(*) AS n FROM docket_tasks WHERE state = 'running' AND queue = ?1

-- name: running_with_key
-- Running tasks of concurrency key ?1, counted under the key's lock.
SELECT count(*) AS n FROM docket_tasks WHERE state = 'running' AND concurrency_key = ?1
