INSERT INTO docket_notifications (namespace, process_id, kind, event_id, data, created_at)
    SELECT ns, id, 'failed', NULL, d, $4 FROM unnest($1::text[], $2::text[], $3::jsonb[])
    WITH ORDINALITY AS x(ns, id, d, o) ORDER BY o
