SELECT id FROM docket_tasks WHERE expires_at <= ?
    AND state IN ('scheduled','available','retryable') LIMIT ? FOR UPDATE SKIP LOCKED
