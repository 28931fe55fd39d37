UPDATE docket_tasks SET state = 'completed', finished_at = ?2, result = ?3, lease_expires_at = NULL,
    run_count = run_count + 1
    WHERE id = ?1
