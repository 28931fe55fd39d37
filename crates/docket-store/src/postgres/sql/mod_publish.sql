INSERT INTO docket_notifications (namespace, process_id, kind, event_id, data, created_at)
    SELECT $1, $2, k, e, d, $3 FROM unnest($4::text[], $5::bigint[], $6::jsonb[])
    WITH ORDINALITY AS x(k, e, d, o) ORDER BY o
