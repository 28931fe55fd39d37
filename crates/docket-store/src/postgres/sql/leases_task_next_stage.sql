UPDATE docket_tasks t SET state = $3, run_at = $4, stage = $5, payload = COALESCE($6, t.payload),
    priority = COALESCE($7, t.priority), result = $8, attempt = 0, lease_expires_at = NULL,
    stages_done = COALESCE(t.stages_done, '[]') || jsonb_build_array(t.stage),
    {runs:completed:$9}
    WHERE t.id = $1 AND t.lease_token = $2 AND t.state = 'running'
    AND t.cancel_requested_at IS NULL
    AND (t.deadline_at IS NULL OR $9 < t.deadline_at)
    RETURNING t.id, t.run_at, t.queue, (t.concurrency_key IS NOT NULL OR EXISTS (
    SELECT 1 FROM docket_queues q WHERE q.name = t.queue AND q.concurrency_limit IS NOT NULL)) AS frees,
    t.kind, t.attempted_at
