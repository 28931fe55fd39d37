UPDATE docket_tasks SET state = 'available', run_at = ?
    WHERE id = ? AND state IN ('scheduled', 'retryable')
