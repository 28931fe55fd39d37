UPDATE docket_tasks t SET state = x.state, run_at = x.run_at, finished_at = x.fin,
    errors = t.errors || jsonb_build_array(x.err), lease_expires_at = NULL,
    runs = (CASE WHEN jsonb_array_length(COALESCE(t.runs, '[]')) >= $7 THEN t.runs - 0
        ELSE COALESCE(t.runs, '[]') END) || jsonb_build_array(x.run::jsonb),
    run_count = t.run_count + 1
    FROM unnest($1::bigint[], $2::text[], $3::timestamptz[], $4::timestamptz[], $5::jsonb[],
    $6::text[]) AS x(id, state, run_at, fin, err, run)
    WHERE t.id = x.id
