UPDATE docket_tasks SET state = 'available', run_at = ?, edited_at = run_at
    WHERE id = ? AND state IN ('scheduled', 'retryable')
