UPDATE docket_tasks SET run_at = ?, edited_at = run_at, finished_at = NULL, cancel_requested_at = NULL,
    max_attempts = GREATEST(max_attempts, attempt + 1), state = 'available'
    WHERE id = ? AND state IN ('discarded','cancelled')
