-- name: break_process
-- MySQL assigns left to right, so the status test comes before status changes.
UPDATE docket_processes SET
    previous_status = CASE WHEN status <> 'error' THEN status ELSE previous_status END,
    status_changed_at = CASE WHEN status <> 'error' THEN ?3 ELSE status_changed_at END,
    status = 'error', detail = ?4, corrupted_by = COALESCE(?5, corrupted_by)
    WHERE namespace = ?1 AND id = ?2

-- name: lock_process
SELECT last_event_id, status FROM docket_processes WHERE namespace = ? AND id = ?
    FOR UPDATE

-- name: insert_event
INSERT INTO docket_events (namespace, process_id, event_id, task_id, `timestamp`, metadata, payload)
    VALUES (?, ?, ?, ?, ?, ?, ?)

-- name: commit_status
-- MySQL assigns left to right: every test of `status` comes before status changes.
UPDATE docket_processes SET
    previous_status = CASE WHEN status <> 'running' THEN status ELSE previous_status END,
    status_changed_at = CASE WHEN status <> 'running' THEN ?3 ELSE status_changed_at END,
    detail = CASE WHEN status = 'error' THEN NULL ELSE detail END,
    corrupted_by = CASE WHEN status = 'error' THEN NULL ELSE corrupted_by END,
    status = 'running', aux_state = COALESCE(?4, aux_state), metadata = COALESCE(?5, metadata),
    last_event_id = last_event_id + ?6
    WHERE namespace = ?1 AND id = ?2

-- name: create
INSERT INTO docket_processes (namespace, id, status, status_changed_at, created_at,
    aux_state, metadata) VALUES (?1, ?2, 'init', ?3, ?3, 'null', '{}')

-- name: import
INSERT INTO docket_processes (namespace, id, status, previous_status, status_changed_at, detail,
    aux_state, metadata, corrupted_by, created_at, last_event_id)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)

-- name: zombies
SELECT {COLS} FROM docket_tasks WHERE state = 'running' AND lease_expires_at < ?
    AND namespace IS NOT NULL ORDER BY lease_expires_at LIMIT ? FOR UPDATE SKIP LOCKED

-- name: cancel_timers
-- The process's waiting tasks of the kinds its result cancels (?3: a JSON list of kinds).
UPDATE docket_tasks SET state = 'cancelled', finished_at = ?2 WHERE concurrency_key = ?1
    AND JSON_CONTAINS(?3, JSON_QUOTE(kind)) AND state IN ('scheduled', 'available', 'retryable')

-- name: namespace_put
INSERT INTO docket_namespaces (name, config, updated_at) VALUES (?1, ?2, ?3)
    ON DUPLICATE KEY UPDATE config = VALUES(config), updated_at = VALUES(updated_at)

-- name: lock_status
-- Locks the process row: a concurrent removal or status change waits for this insert.
SELECT status FROM docket_processes WHERE namespace = ?1 AND id = ?2 FOR UPDATE

-- name: detach_finished_done
-- detach_finished for the finished tasks kept in docket_tasks_done (0004).
UPDATE docket_tasks_done SET concurrency_key = NULL, unique_key = NULL, namespace = NULL,
    process_id = NULL WHERE concurrency_key = ?1
