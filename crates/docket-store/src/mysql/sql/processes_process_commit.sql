SELECT last_event_id, status FROM docket_processes WHERE namespace = ? AND id = ?
    FOR UPDATE
