-- name: break_process
UPDATE docket_processes SET
    previous_status = CASE WHEN status <> 'error' THEN status ELSE previous_status END,
    status_changed_at = CASE WHEN status <> 'error' THEN ? ELSE status_changed_at END,
    status = 'error', detail = ?, corrupted_by = COALESCE(?, corrupted_by)
    WHERE namespace = ? AND id = ?

-- name: cancel_waiting
UPDATE docket_tasks SET state = 'cancelled', finished_at = ? WHERE concurrency_key = ?
    AND state IN ('scheduled', 'available', 'retryable')

-- name: lock_process
SELECT last_event_id, status FROM docket_processes WHERE namespace = ? AND id = ?
    FOR UPDATE

-- name: append_event
INSERT INTO docket_events (namespace, process_id, event_id, task_id, `timestamp`, metadata, payload)
    VALUES (?, ?, ?, ?, ?, ?, ?)

-- name: commit_status
UPDATE docket_processes SET
    previous_status = CASE WHEN status <> 'running' THEN status ELSE previous_status END,
    status_changed_at = CASE WHEN status <> 'running' THEN ? ELSE status_changed_at END,
    detail = CASE WHEN status = 'error' THEN NULL ELSE detail END,
    corrupted_by = CASE WHEN status = 'error' THEN NULL ELSE corrupted_by END,
    status = 'running', aux_state = COALESCE(?, aux_state), metadata = COALESCE(?, metadata),
    last_event_id = last_event_id + ?
    WHERE namespace = ? AND id = ?

-- name: complete_step
UPDATE docket_tasks SET state = 'completed', finished_at = ?, result = ?, lease_expires_at = NULL,
    run_count = run_count + 1
    WHERE id = ?

-- name: create
INSERT INTO docket_processes (namespace, id, status, status_changed_at, created_at,
    aux_state, metadata) VALUES (?, ?, 'init', ?, ?, 'null', '{}')

-- name: import
INSERT INTO docket_processes (namespace, id, status, previous_status, status_changed_at, detail,
    aux_state, metadata, corrupted_by, created_at, last_event_id)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)

-- name: import_event
INSERT INTO docket_events (namespace, process_id, event_id, task_id, `timestamp`, metadata, payload)
    VALUES (?, ?, ?, NULL, ?, ?, ?)

-- name: zombies
SELECT {COLS} FROM docket_tasks WHERE state = 'running' AND lease_expires_at < ?
    AND namespace IS NOT NULL ORDER BY lease_expires_at LIMIT ? FOR UPDATE SKIP LOCKED

-- name: cancel_timers
-- The process's waiting tasks of the kinds its result cancels ({kinds}: their placeholders).
UPDATE docket_tasks SET state = 'cancelled', finished_at = ? WHERE concurrency_key = ?
    AND kind IN ({kinds}) AND state IN ('scheduled', 'available', 'retryable')

-- name: namespace_put
INSERT INTO docket_namespaces (name, config, updated_at) VALUES (?1, ?2, ?3)
    ON DUPLICATE KEY UPDATE config = VALUES(config), updated_at = VALUES(updated_at)

-- name: namespace_list
SELECT name, config FROM docket_namespaces ORDER BY name

-- name: get
SELECT * FROM docket_processes WHERE namespace = ?1 AND id = ?2

-- name: status
SELECT status FROM docket_processes WHERE namespace = ?1 AND id = ?2

-- name: list
SELECT * FROM docket_processes WHERE namespace = ?1 AND (?2 IS NULL OR status = ?2)
    AND (?3 IS NULL OR id > ?3) ORDER BY id LIMIT ?4

-- name: simple_repair
UPDATE docket_processes SET previous_status = status, status_changed_at = ?3,
    detail = NULL, corrupted_by = NULL, status = 'running'
    WHERE namespace = ?1 AND id = ?2 AND status = 'error'

-- name: events_after
SELECT * FROM docket_events WHERE namespace = ?1 AND process_id = ?2
    AND (?3 IS NULL OR event_id > ?3) ORDER BY event_id LIMIT ?4

-- name: events_before
SELECT * FROM docket_events WHERE namespace = ?1 AND process_id = ?2
    AND (?3 IS NULL OR event_id < ?3) ORDER BY event_id DESC LIMIT ?4
