UPDATE docket_tasks SET state = 'cancelled', finished_at = ?2 WHERE concurrency_key = ?1
    AND kind IN (SELECT value FROM json_each(?3))
    AND state IN ('scheduled', 'available', 'retryable')
