UPDATE docket_tasks SET state = 'cancelled', finished_at = ?,
    lease_expires_at = NULL, progress = COALESCE(?, progress), {runs:cancelled:finished_at} WHERE id = ?
