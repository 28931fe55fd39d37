INSERT INTO docket_events (namespace, process_id, event_id, task_id, timestamp, metadata, payload)
    SELECT $1, $2, e, $3, $4, m, p FROM unnest($5::bigint[], $6::jsonb[], $7::jsonb[]) AS x(e, m, p)
