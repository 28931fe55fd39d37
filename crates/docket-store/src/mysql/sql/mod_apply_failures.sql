UPDATE docket_tasks SET state = ?, run_at = ?, finished_at = ?,
    errors = JSON_ARRAY_APPEND(errors, '$', JSON_EXTRACT(?, '$')),
    runs = JSON_ARRAY_APPEND(CASE WHEN JSON_LENGTH(COALESCE(runs, '[]')) >= ?
        THEN JSON_REMOVE(runs, '$[0]') ELSE COALESCE(runs, JSON_ARRAY()) END, '$', JSON_EXTRACT(?, '$')),
    run_count = run_count + 1,
    lease_expires_at = NULL WHERE id = ?
    -- A rescue: only a task still running the attempt it read, its lease still expired.
    AND (? IS NULL OR (state = 'running' AND attempt = ? AND lease_expires_at < ?))
