-- name: insert_event
INSERT INTO docket_events (namespace, process_id, event_id, task_id, timestamp, metadata, payload)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)

-- name: cancel_timers
UPDATE docket_tasks SET state = 'cancelled', finished_at = ?2 WHERE concurrency_key = ?1
    AND kind IN (SELECT value FROM json_each(?3))
    AND state IN ('scheduled', 'available', 'retryable')

-- name: zombies
SELECT {COLS} FROM docket_tasks WHERE state = 'running' AND lease_expires_at < ?
    AND namespace IS NOT NULL ORDER BY lease_expires_at LIMIT ?

-- name: lock_status
-- The writer lock (BEGIN IMMEDIATE) holds the row.
SELECT status FROM docket_processes WHERE namespace = ?1 AND id = ?2

-- name: lock_process
SELECT last_event_id, status FROM docket_processes WHERE namespace = ?1 AND id = ?2
