UPDATE docket_processes SET previous_status = status, status_changed_at = ?,
    detail = NULL, corrupted_by = NULL, status = 'running'
    WHERE namespace = ? AND id = ? AND status = 'error'
