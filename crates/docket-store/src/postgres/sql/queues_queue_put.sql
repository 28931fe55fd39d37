INSERT INTO docket_queues (name, paused, concurrency_limit, max_attempts, backoff,
    timeout_ms, retention_completed_ms, retention_failed_ms, updated_at, mask_payload)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
    ON CONFLICT (name) DO UPDATE SET paused = excluded.paused,
    concurrency_limit = excluded.concurrency_limit, max_attempts = excluded.max_attempts,
    backoff = excluded.backoff, timeout_ms = excluded.timeout_ms,
    retention_completed_ms = excluded.retention_completed_ms,
    retention_failed_ms = excluded.retention_failed_ms, updated_at = excluded.updated_at,
    mask_payload = excluded.mask_payload
