UPDATE docket_tasks t SET state = x.state, run_at = x.run_at, finished_at = x.fin,
    errors = t.errors || jsonb_build_array(x.err), lease_expires_at = NULL
    FROM unnest($1::bigint[], $2::text[], $3::timestamptz[], $4::timestamptz[], $5::jsonb[])
    AS x(id, state, run_at, fin, err)
    WHERE t.id = x.id
