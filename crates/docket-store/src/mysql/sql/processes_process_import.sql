INSERT INTO docket_processes (namespace, id, status, previous_status, status_changed_at, detail,
    aux_state, metadata, corrupted_by, created_at, last_event_id)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)
