UPDATE docket_processes SET
    previous_status = CASE WHEN status <> 'running' THEN status ELSE previous_status END,
    status_changed_at = CASE WHEN status <> 'running' THEN $3 ELSE status_changed_at END,
    detail = CASE WHEN status = 'error' THEN NULL ELSE detail END,
    corrupted_by = CASE WHEN status = 'error' THEN NULL ELSE corrupted_by END,
    status = 'running', aux_state = COALESCE($4, aux_state), metadata = COALESCE($5, metadata),
    last_event_id = last_event_id + $6
    WHERE namespace = $1 AND id = $2
