UPDATE docket_tasks SET state = 'cancelled', finished_at = $2,
    lease_expires_at = NULL, progress = COALESCE($3, progress), {runs:cancelled:$2} WHERE id = $1
