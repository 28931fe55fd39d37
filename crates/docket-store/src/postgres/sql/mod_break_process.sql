UPDATE docket_processes SET
    previous_status = CASE WHEN status <> 'error' THEN status ELSE previous_status END,
    status_changed_at = CASE WHEN status <> 'error' THEN $3 ELSE status_changed_at END,
    status = 'error', detail = $4, corrupted_by = COALESCE($5, corrupted_by)
    WHERE namespace = $1 AND id = $2
