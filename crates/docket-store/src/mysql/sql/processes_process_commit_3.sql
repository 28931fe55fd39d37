UPDATE docket_processes SET
    previous_status = CASE WHEN status <> 'running' THEN status ELSE previous_status END,
    status_changed_at = CASE WHEN status <> 'running' THEN ? ELSE status_changed_at END,
    detail = CASE WHEN status = 'error' THEN NULL ELSE detail END,
    corrupted_by = CASE WHEN status = 'error' THEN NULL ELSE corrupted_by END,
    status = 'running', aux_state = COALESCE(?, aux_state), metadata = COALESCE(?, metadata),
    last_event_id = last_event_id + ?
    WHERE namespace = ? AND id = ?
