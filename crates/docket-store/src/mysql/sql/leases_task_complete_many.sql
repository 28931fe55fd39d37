UPDATE docket_tasks SET state = 'cancelled', finished_at = ?, result = ?,
    lease_expires_at = NULL, {runs:cancelled:finished_at} WHERE id = ?
