UPDATE docket_tasks SET result = ?,
    stages_done = JSON_ARRAY_APPEND(COALESCE(stages_done, JSON_ARRAY()), '$', stage),
    {runs:completed:?},
    stage = ?, attempt = 0, state = ?, run_at = ?, payload = COALESCE(?, payload),
    priority = COALESCE(?, priority), lease_expires_at = NULL
    WHERE id = ?
