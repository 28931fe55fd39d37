-- Into the current ring slot (migration 0021) unless its unique_key keeps it in slot 0.
UPDATE docket_tasks SET state = 'available',
    slot = CASE WHEN unique_key IS NULL THEN COALESCE((SELECT current FROM docket_task_slots), 0) ELSE 0 END
    WHERE id IN (
    SELECT id FROM docket_tasks WHERE state IN ('scheduled','retryable') AND run_at <= $1
    AND (expires_at IS NULL OR expires_at > $1)
    ORDER BY run_at LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING queue
