-- A task's changeable columns as the engine's patch rule left them (the id last).
UPDATE docket_tasks SET queue = ?, priority = ?, run_at = ?, state = ?,
    payload = ?, node = ?, max_attempts = ?, stage = ?, progress = ?,
    attempt = ?, backoff_kind = ?, backoff_initial_ms = ?, backoff_coefficient = ?,
    backoff_max_ms = ?, backoff_jitter = ?, edited_at = ?
WHERE id = ?
