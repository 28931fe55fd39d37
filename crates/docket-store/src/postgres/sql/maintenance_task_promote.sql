UPDATE docket_tasks SET state = 'available' WHERE id IN (
    SELECT id FROM docket_tasks WHERE state IN ('scheduled','retryable') AND run_at <= $1
    AND (expires_at IS NULL OR expires_at > $1)
    ORDER BY run_at LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING queue
