UPDATE docket_tasks SET progress = COALESCE(?, progress), lease_ms = COALESCE(?, lease_ms),
    lease_expires_at = ? WHERE id = ?
