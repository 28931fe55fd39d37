-- name: complete_cancelled
UPDATE docket_tasks SET state = 'cancelled', finished_at = ?, result = ?,
    lease_expires_at = NULL, {runs:cancelled:finished_at} WHERE id = ?

-- name: heartbeat_cancelled
UPDATE docket_tasks SET state = 'cancelled', finished_at = ?,
    lease_expires_at = NULL, progress = COALESCE(?, progress), {runs:cancelled:finished_at} WHERE id = ?

-- name: heartbeat
UPDATE docket_tasks SET edited_at = IF(? IS NULL, edited_at, ?),
    progress = COALESCE(?, progress), lease_ms = COALESCE(?, lease_ms),
    lease_expires_at = ? WHERE id = ?

-- name: complete_to_next_stage
UPDATE docket_tasks SET result = ?,
    stages_done = JSON_ARRAY_APPEND(COALESCE(stages_done, JSON_ARRAY()), '$', stage),
    {runs:completed:?},
    stage = ?, attempt = 0, state = ?, run_at = ?, payload = COALESCE(?, payload),
    priority = COALESCE(?, priority), lease_expires_at = NULL
    WHERE id = ?

-- name: fail
UPDATE docket_tasks SET state = ?, run_at = ?, finished_at = ?,
    errors = JSON_ARRAY_APPEND(errors, '$', JSON_EXTRACT(?, '$')),
    runs = JSON_ARRAY_APPEND(CASE WHEN JSON_LENGTH(COALESCE(runs, '[]')) >= ?
        THEN JSON_REMOVE(runs, '$[0]') ELSE COALESCE(runs, JSON_ARRAY()) END, '$', JSON_EXTRACT(?, '$')),
    run_count = run_count + 1,
    lease_expires_at = NULL WHERE id = ?
    -- A rescue: only a task still running the attempt it read, its lease still expired.
    AND (? IS NULL OR (state = 'running' AND attempt = ? AND lease_expires_at < ?))
