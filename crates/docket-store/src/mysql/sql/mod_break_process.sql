UPDATE docket_processes SET
    previous_status = CASE WHEN status <> 'error' THEN status ELSE previous_status END,
    status_changed_at = CASE WHEN status <> 'error' THEN ? ELSE status_changed_at END,
    status = 'error', detail = ?, corrupted_by = COALESCE(?, corrupted_by)
    WHERE namespace = ? AND id = ?
