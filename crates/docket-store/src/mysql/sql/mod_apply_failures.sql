UPDATE docket_tasks SET state = ?, run_at = ?, finished_at = ?,
    errors = JSON_ARRAY_APPEND(errors, '$', JSON_EXTRACT(?, '$')),
    lease_expires_at = NULL WHERE id = ?
