-- name: id_settings
SELECT CAST(@@innodb_autoinc_lock_mode AS SIGNED) AS m,
    CAST(@@auto_increment_increment AS SIGNED) AS i

-- name: insert
INSERT INTO docket_tasks (queue, kind, payload, priority, state, run_at, expires_at,
    max_attempts, backoff_initial_ms, backoff_coefficient, backoff_max_ms, backoff_jitter,
    timeout_ms, unique_key, concurrency_key, concurrency_limit, node, created_at, trace_id,
    namespace, process_id, backoff_kind, user_id, stage, progress, errors)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '[]')

-- name: request_cancel
UPDATE docket_tasks SET cancel_requested_at = COALESCE(cancel_requested_at, ?)
    WHERE id = ?

-- name: retry
UPDATE docket_tasks SET run_at = ?, edited_at = run_at, finished_at = NULL, cancel_requested_at = NULL,
    max_attempts = GREATEST(max_attempts, attempt + 1), state = 'available'
    WHERE id = ? AND state IN ('discarded','cancelled')

-- name: run_now
UPDATE docket_tasks SET state = 'available', run_at = ?, edited_at = run_at
    WHERE id = ? AND state IN ('scheduled', 'retryable')

-- name: throughput
SELECT CAST(DATE_FORMAT(finished_at, '%Y-%m-%d %H:%i:00') AS DATETIME(6)) AS m,
    CAST(SUM(state = 'completed') AS SIGNED) AS completed,
    CAST(SUM(state = 'discarded') AS SIGNED) AS failed
    FROM (SELECT finished_at, state FROM docket_tasks
        WHERE finished_at >= ? AND state IN ('completed', 'discarded')
        UNION ALL SELECT finished_at, state FROM docket_tasks_done
        WHERE finished_at >= ? AND state IN ('completed', 'discarded')) f
    GROUP BY m ORDER BY m

-- name: update
-- A task's changeable columns as the engine's patch rule left them (the id last).
UPDATE docket_tasks SET queue = ?, priority = ?, run_at = ?, state = ?,
    payload = ?, node = ?, max_attempts = ?, stage = ?, progress = ?,
    attempt = ?, backoff_kind = ?, backoff_initial_ms = ?, backoff_coefficient = ?,
    backoff_max_ms = ?, backoff_jitter = ?, edited_at = ?
WHERE id = ?
