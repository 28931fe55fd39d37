INSERT INTO docket_events (namespace, process_id, event_id, task_id, timestamp, metadata, payload)
    VALUES (?1, ?2, ?3, NULL, ?4, ?5, ?6)
