-- processes: the statements written alike on several backends, with numbered placeholders `?N`
-- (PostgreSQL's `$N` made by the loader, crate::sql). A statement of the same name in a
-- backend's own sql/processes.sql replaces the one here on that backend.

-- name: break_process
UPDATE docket_processes SET
    previous_status = CASE WHEN status <> 'error' THEN status ELSE previous_status END,
    status_changed_at = CASE WHEN status <> 'error' THEN ?3 ELSE status_changed_at END,
    status = 'error', detail = ?4, corrupted_by = COALESCE(?5, corrupted_by)
    WHERE namespace = ?1 AND id = ?2

-- name: cancel_waiting
UPDATE docket_tasks SET state = 'cancelled', finished_at = ?2 WHERE concurrency_key = ?1
    AND state IN ('scheduled', 'available', 'retryable')

-- name: commit_status
UPDATE docket_processes SET
    previous_status = CASE WHEN status <> 'running' THEN status ELSE previous_status END,
    status_changed_at = CASE WHEN status <> 'running' THEN ?3 ELSE status_changed_at END,
    detail = CASE WHEN status = 'error' THEN NULL ELSE detail END,
    corrupted_by = CASE WHEN status = 'error' THEN NULL ELSE corrupted_by END,
    status = 'running', aux_state = COALESCE(?4, aux_state), metadata = COALESCE(?5, metadata),
    last_event_id = last_event_id + ?6
    WHERE namespace = ?1 AND id = ?2

-- name: complete_step
UPDATE docket_tasks SET state = 'completed', finished_at = ?2, result = ?3, lease_expires_at = NULL,
    run_count = run_count + 1
    WHERE id = ?1

-- name: create
INSERT INTO docket_processes (namespace, id, status, status_changed_at, created_at)
    VALUES (?1, ?2, 'init', ?3, ?3) ON CONFLICT DO NOTHING RETURNING id

-- name: import
INSERT INTO docket_processes (namespace, id, status, previous_status, status_changed_at, detail,
    aux_state, metadata, corrupted_by, created_at, last_event_id)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, NULL, ?9, ?10) ON CONFLICT DO NOTHING RETURNING id

-- name: namespace_put
INSERT INTO docket_namespaces (name, config, updated_at) VALUES (?1, ?2, ?3)
    ON CONFLICT (name) DO UPDATE SET config = excluded.config, updated_at = excluded.updated_at

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

-- name: remove_events
DELETE FROM docket_events WHERE namespace = ?1 AND process_id = ?2

-- name: remove
DELETE FROM docket_processes WHERE namespace = ?1 AND id = ?2

-- name: remove_unfinished
DELETE FROM docket_tasks WHERE concurrency_key = ?1
    AND state NOT IN ('completed', 'discarded', 'cancelled')

-- name: detach_finished
-- Finished tasks stay, detached, until the retention prune: see the PostgreSQL statement.
UPDATE docket_tasks SET concurrency_key = NULL, unique_key = NULL, namespace = NULL,
    process_id = NULL WHERE concurrency_key = ?1
