INSERT INTO docket_events (namespace, process_id, event_id, task_id, `timestamp`, metadata, payload)
    VALUES (?, ?, ?, ?, ?, ?, ?)
