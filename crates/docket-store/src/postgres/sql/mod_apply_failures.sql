UPDATE docket_tasks t SET state = x.state, run_at = x.run_at, finished_at = x.fin,
    errors = t.errors || jsonb_build_array(x.err), lease_expires_at = NULL,
    runs = (CASE WHEN jsonb_array_length(COALESCE(t.runs, '[]')) >= $7 THEN t.runs - 0
        ELSE COALESCE(t.runs, '[]') END) || jsonb_build_array(x.run::jsonb),
    run_count = t.run_count + 1
    FROM unnest($1::bigint[], $2::text[], $3::timestamptz[], $4::timestamptz[], $5::jsonb[],
    $6::text[], $8::int[]) AS x(id, state, run_at, fin, err, run, attempt)
    WHERE t.id = x.id
    -- A rescue ($9): only a task still running the attempt it read, its lease still expired.
    AND ($9::timestamptz IS NULL OR (t.state = 'running' AND t.attempt = x.attempt
        AND t.lease_expires_at < $9))
    RETURNING t.id
