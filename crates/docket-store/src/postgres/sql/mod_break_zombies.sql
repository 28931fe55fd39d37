UPDATE docket_processes p SET
    previous_status = CASE WHEN p.status <> 'error' THEN p.status ELSE p.previous_status END,
    status_changed_at = CASE WHEN p.status <> 'error' THEN $3 ELSE p.status_changed_at END,
    status = 'error', detail = $4, corrupted_by = COALESCE(x.by, p.corrupted_by)
    FROM unnest($1::text[], $2::text[], $5::bigint[]) AS x(ns, id, by)
    WHERE p.namespace = x.ns AND p.id = x.id
