INSERT INTO docket_notifications (namespace, process_id, kind, event_id, data, created_at)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6)
