UPDATE docket_tasks SET state = 'cancelled', finished_at = ? WHERE concurrency_key = ?
    AND state IN ('scheduled', 'available', 'retryable')
