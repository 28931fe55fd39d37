INSERT INTO docket_processes (namespace, id, status, previous_status, status_changed_at, detail,
    aux_state, metadata, corrupted_by, created_at, last_event_id)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, NULL, $9, $10) ON CONFLICT DO NOTHING RETURNING id
