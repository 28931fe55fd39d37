-- tasks: the statements written alike on several backends, with numbered placeholders `?N`
-- (PostgreSQL's `$N` made by the loader, crate::sql). A statement of the same name in a
-- backend's own sql/tasks.sql replaces the one here on that backend.

-- name: update
-- A task's changeable columns as the engine's patch rule left them (?1 the id).
UPDATE docket_tasks SET queue = ?2, priority = ?3, run_at = ?4, state = ?5,
    payload = ?6, node = ?7, max_attempts = ?8, stage = ?9, progress = ?10,
    attempt = ?11, backoff_kind = ?12, backoff_initial_ms = ?13, backoff_coefficient = ?14,
    backoff_max_ms = ?15, backoff_jitter = ?16, edited_at = ?17
WHERE id = ?1 RETURNING {COLS}

-- name: cancel
UPDATE docket_tasks SET
    state = CASE WHEN state = 'running' THEN state ELSE 'cancelled' END,
    finished_at = CASE WHEN state = 'running' THEN finished_at ELSE ?2 END,
    cancel_requested_at = CASE WHEN state = 'running' THEN COALESCE(cancel_requested_at, ?2)
    ELSE cancel_requested_at END
    WHERE id = ?1 AND state IN ('scheduled','available','running','retryable') RETURNING {COLS}

-- name: run_now
UPDATE docket_tasks SET state = 'available', run_at = ?2, edited_at = ?2
    WHERE id = ?1 AND state IN ('scheduled', 'retryable') RETURNING {COLS}

-- name: next_due
SELECT min(run_at) AS run_at FROM docket_tasks WHERE state IN ('scheduled','retryable')

-- name: set_result
UPDATE docket_tasks SET result = ?2 WHERE id = ?1

-- name: debounce_mark
-- Task ?1, just inserted by a debounced enqueue, takes its key ?2 and deadline ?3 (the latest
-- run_at a replacement may give it). docket_tasks_debounce_idx refuses a second waiting task
-- with the key: the flow then goes again and replaces that one (portable/tasks.rs).
UPDATE docket_tasks SET debounce_key = ?2, debounce_until = ?3 WHERE id = ?1

-- name: debounce_replace
-- A debounced enqueue's fields over the waiting task ?1, locked by debounce_lock.
UPDATE docket_tasks SET queue = ?2, kind = ?3, payload = ?4, priority = ?5, run_at = ?6,
    state = ?7, expires_at = ?8, max_attempts = ?9, backoff_kind = ?10,
    backoff_initial_ms = ?11, backoff_coefficient = ?12, backoff_max_ms = ?13,
    backoff_jitter = ?14, timeout_ms = ?15, concurrency_key = ?16, concurrency_limit = ?17,
    rate_limit = ?18, partition_key = ?19, node = ?20, user_id = ?21, stage = ?22,
    progress = ?23, edited_at = ?24, tags = ?25, affinity = ?26
    WHERE id = ?1 RETURNING {COLS}

-- name: dead_letter_mark
-- Task ?1, just inserted as the dead letter of another, takes its link ?2 (JSON:
-- docket_core::dead_letter::DeadLetterOf).
UPDATE docket_tasks SET dead_letter_of = ?2 WHERE id = ?1
