-- A task's changeable columns as the engine's patch rule left them (?1 the id).
UPDATE docket_tasks SET queue = ?2, priority = ?3, run_at = ?4, state = ?5,
    payload = ?6, node = ?7, max_attempts = ?8, stage = ?9, progress = ?10,
    attempt = ?11, backoff_kind = ?12, backoff_initial_ms = ?13, backoff_coefficient = ?14,
    backoff_max_ms = ?15, backoff_jitter = ?16, edited_at = ?17
WHERE id = ?1 RETURNING {COLS}
