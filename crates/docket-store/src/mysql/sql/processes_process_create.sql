INSERT INTO docket_processes (namespace, id, status, status_changed_at, created_at,
    aux_state, metadata) VALUES (?, ?, 'init', ?, ?, 'null', '{}')
