-- The run-log entry of the attempt the row holds, ended at {now} with {outcome}; the
-- oldest entry goes once the log holds {keep} (docket_core::run::StoredRun's shape).
-- claim_order: the claim order (docket_store::leases::sort_claim_order's, in Rust): higher
-- priority first, then fewer attempts, earlier run_at, lower id; a statement's claim_order
-- marker with alias T is this with T for t.
-- name: claim_order
{t}.priority DESC, {t}.attempt, {t}.run_at, {t}.id

-- name: runs
runs = (CASE WHEN jsonb_array_length(COALESCE(runs, '[]')) >= {keep} THEN runs - 0
    ELSE COALESCE(runs, '[]') END) || jsonb_build_array(jsonb_build_object('attempt', attempt,
    'stage', stage, 'started_us', (extract(epoch FROM attempted_at) * 1000000)::bigint,
    'finished_us', (extract(epoch FROM {now}::timestamptz) * 1000000)::bigint,
    'worker', worker, 'node', attempt_node, 'outcome', '{outcome}')),
    run_count = run_count + 1

-- name: tag_filter
-- tasks.list's {tag} in tasks.list_tagged (sql.rs): containment, which docket_tasks_tags_idx
-- (GIN, migration 0033) serves.
AND tags @> jsonb_build_array($15::text)

-- The affinity marker (sql.rs, `affinity:T:LABELS:NOW` in braces): whether a claim with labels LABELS (a JSON object) may take
-- row T at NOW — docket_core::labels::may_claim: every required pair, and the preferred ones
-- until run_at + prefer_ms. NULL (most tasks) passes at once.
-- name: affinity
({t}.affinity IS NULL OR (({t}.affinity -> 'requires' IS NULL
    OR {t}.affinity -> 'requires' <@ {labels}::jsonb)
    AND ({t}.affinity -> 'prefer' IS NULL OR {t}.affinity -> 'prefer' <@ {labels}::jsonb
    OR {t}.run_at + ({t}.affinity ->> 'prefer_ms')::bigint * interval '1 millisecond' <= {now})))
