INSERT INTO docket_processes (namespace, id, status, status_changed_at, created_at)
    VALUES ($1, $2, 'init', $3, $3) ON CONFLICT DO NOTHING RETURNING id
