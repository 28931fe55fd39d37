UPDATE docket_tasks SET cancel_requested_at = COALESCE(cancel_requested_at, ?)
    WHERE id = ?
