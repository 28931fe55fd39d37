UPDATE docket_tasks SET state = 'cancelled', finished_at = $2 WHERE concurrency_key = $1
    AND state IN ('scheduled', 'available', 'retryable')
