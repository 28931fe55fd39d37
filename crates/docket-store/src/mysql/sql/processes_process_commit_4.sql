UPDATE docket_tasks SET state = 'completed', finished_at = ?, result = ?, lease_expires_at = NULL,
    run_count = run_count + 1
    WHERE id = ?
