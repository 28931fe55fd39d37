SELECT t.id, t.concurrency_key, t.concurrency_limit, q.concurrency_limit AS queue_limit,
    t.timeout_ms, t.namespace IS NOT NULL AS process
    FROM docket_tasks t LEFT JOIN docket_queues q ON q.name = t.queue
    WHERE t.state = 'available' AND t.queue = ?1
    AND (t.node IS NULL OR t.node = ?2)
    AND (?5 IS NULL OR t.kind IN (SELECT value FROM json_each(?5)))
    AND (?6 IS NULL OR t.stage IN (SELECT value FROM json_each(?6)))
    AND (t.expires_at IS NULL OR t.expires_at > ?3)
    AND (q.paused IS NULL OR q.paused = 0)
    AND (t.concurrency_key IS NULL OR (SELECT count(*) FROM docket_tasks r
    WHERE r.state = 'running' AND r.concurrency_key = t.concurrency_key)
    < t.concurrency_limit)
    ORDER BY t.priority DESC, t.attempt, t.run_at, t.id
    LIMIT min(?4, COALESCE((SELECT schedule_limit FROM docket_queues WHERE name = ?1), ?4))
