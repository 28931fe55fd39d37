-- name: insert
INSERT INTO docket_tasks (queue, kind, payload, priority, state, run_at, expires_at,
    max_attempts, backoff_initial_ms, backoff_coefficient, backoff_max_ms, backoff_jitter,
    timeout_ms, unique_key, concurrency_key, concurrency_limit, node, created_at, trace_id,
    namespace, process_id, backoff_kind, user_id, stage, progress)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,
    ?20, ?21, ?22, ?23, ?24, ?25)
    ON CONFLICT DO NOTHING RETURNING id

-- name: throughput
SELECT (finished_at / 60000000) * 60000000 AS m,
    sum(state = 'completed'), sum(state = 'discarded')
    FROM docket_tasks WHERE finished_at >= ?1 AND state IN ('completed', 'discarded')
    GROUP BY m ORDER BY m

-- name: update
-- A task's changeable columns as the engine's patch rule left them (?1 the id).
UPDATE docket_tasks SET queue = ?2, priority = ?3, run_at = ?4, state = ?5,
    payload = ?6, node = ?7, max_attempts = ?8, stage = ?9, progress = ?10,
    attempt = ?11, backoff_kind = ?12, backoff_initial_ms = ?13, backoff_coefficient = ?14,
    backoff_max_ms = ?15, backoff_jitter = ?16, edited_at = ?17
WHERE id = ?1 RETURNING {COLS}
