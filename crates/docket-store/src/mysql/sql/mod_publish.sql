INSERT INTO docket_notifications (namespace, process_id, kind, event_id, data, created_at)
    VALUES (?, ?, ?, ?, ?, ?)
