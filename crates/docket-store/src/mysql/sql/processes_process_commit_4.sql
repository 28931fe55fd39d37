UPDATE docket_tasks SET state = 'completed', finished_at = ?, result = ?, lease_expires_at = NULL,
    {runs:completed:finished_at}
    WHERE id = ?
