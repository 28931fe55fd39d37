UPDATE docket_tasks SET state = 'completed', finished_at = $2, result = $3, lease_expires_at = NULL,
    {runs:completed:$2}
    WHERE id = $1
