SELECT id, queue FROM docket_tasks WHERE state IN ('scheduled','retryable') AND run_at <= ?
    AND (expires_at IS NULL OR expires_at > ?) ORDER BY run_at LIMIT ? FOR UPDATE SKIP LOCKED
