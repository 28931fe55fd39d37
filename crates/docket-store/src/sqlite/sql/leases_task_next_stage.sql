UPDATE docket_tasks SET state = ?3, run_at = ?4, stage = ?5, payload = COALESCE(?6, payload),
    priority = COALESCE(?7, priority), result = ?8, attempt = 0, lease_expires_at = NULL,
    stages_done = json_insert(COALESCE(stages_done, '[]'), '$[#]', stage),
    {runs:completed:?9}
    WHERE id = ?1 AND lease_token = ?2 AND state = 'running' AND cancel_requested_at IS NULL
    AND (deadline_at IS NULL OR ?9 < deadline_at)
    RETURNING id, run_at, queue, (concurrency_key IS NOT NULL OR EXISTS (SELECT 1
    FROM docket_queues q WHERE q.name = docket_tasks.queue AND q.concurrency_limit IS NOT NULL)) AS frees,
    kind, attempted_at
