UPDATE docket_tasks SET state = 'cancelled', finished_at = ?2, result = ?3,
    lease_expires_at = NULL, {runs:cancelled:?2} WHERE id = ?1
