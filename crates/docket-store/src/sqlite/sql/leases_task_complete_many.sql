UPDATE docket_tasks SET state = 'completed', finished_at = ?1, result = x.result,
    lease_expires_at = NULL, run_count = run_count + 1
    FROM (SELECT value->>'id' AS id, value->>'token' AS token, value->'result' AS result
    FROM json_each(?2)) AS x
    WHERE docket_tasks.id = x.id AND docket_tasks.lease_token = x.token
    AND docket_tasks.state = 'running' AND docket_tasks.cancel_requested_at IS NULL
    -- Within the deadline the claim wrote (docket_core::lease::deadline_of; none for steps).
    AND (docket_tasks.deadline_at IS NULL OR ?1 < docket_tasks.deadline_at)
    RETURNING docket_tasks.id, docket_tasks.run_at, docket_tasks.queue,
    (docket_tasks.concurrency_key IS NOT NULL OR EXISTS (SELECT 1 FROM docket_queues q
    WHERE q.name = docket_tasks.queue AND q.concurrency_limit IS NOT NULL)) AS frees,
    docket_tasks.kind, docket_tasks.attempted_at
