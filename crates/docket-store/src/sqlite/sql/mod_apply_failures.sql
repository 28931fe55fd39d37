UPDATE docket_tasks SET state = ?2, run_at = ?3, finished_at = ?4,
    errors = json_insert(errors, '$[#]', json(?5)), lease_expires_at = NULL,
    runs = json_insert(CASE WHEN json_array_length(COALESCE(runs, '[]')) >= ?7
        THEN json_remove(runs, '$[0]') ELSE COALESCE(runs, '[]') END, '$[#]', json(?6)),
    run_count = run_count + 1
    WHERE id = ?1
    -- A rescue (?9): only a task still running the attempt it read, its lease still expired.
    AND (?9 IS NULL OR (state = 'running' AND attempt = ?8 AND lease_expires_at < ?9))
    RETURNING id
