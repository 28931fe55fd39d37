INSERT INTO docket_events (namespace, process_id, event_id, task_id, timestamp, metadata, payload)
    SELECT $1, $2, e, NULL, t, m, p FROM unnest($3::bigint[], $4::timestamptz[], $5::jsonb[], $6::jsonb[]) AS x(e, t, m, p)
