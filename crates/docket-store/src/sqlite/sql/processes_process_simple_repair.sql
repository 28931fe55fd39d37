UPDATE docket_processes SET previous_status = status, status = 'running', status_changed_at = ?3,
    detail = NULL, corrupted_by = NULL WHERE namespace = ?1 AND id = ?2 AND status = 'error'
