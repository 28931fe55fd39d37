-- The run-log entry of the attempt the row holds, ended at {now} with {outcome}; the
-- oldest entry goes once the log holds {keep} (docket_core::run::StoredRun's shape).
-- claim_order: the claim order (docket_store::leases::sort_claim_order's, in Rust): higher
-- priority first, then fewer attempts, earlier run_at, lower id; a statement's claim_order
-- marker with alias T is this with T for t.
-- name: claim_order
{t}.priority DESC, {t}.attempt, {t}.run_at, {t}.id

-- name: runs
runs = json_insert(CASE WHEN json_array_length(COALESCE(runs, '[]')) >= {keep}
    THEN json_remove(runs, '$[0]') ELSE COALESCE(runs, '[]') END, '$[#]',
    json_object('attempt', attempt, 'stage', stage, 'started_us', attempted_at,
    'finished_us', {now}, 'worker', worker, 'node', attempt_node, 'outcome', '{outcome}')),
    run_count = run_count + 1

-- name: tag_filter
-- tasks.list's {tag} in tasks.list_tagged (sql.rs): the side table's (tag, task_id) key.
AND id IN (SELECT task_id FROM docket_task_tags WHERE tag = ?15)

-- The affinity marker (sql.rs, `affinity:T:LABELS:NOW` in braces): see the PostgreSQL fragment. A pair is held when the
-- claim's labels (JSON text) have the same key with the same value (json_each on both sides:
-- no JSON path built from a label name).
-- name: affinity
({t}.affinity IS NULL OR ((json_extract({t}.affinity, '$.requires') IS NULL
    OR NOT EXISTS (SELECT 1 FROM json_each({t}.affinity, '$.requires') r WHERE NOT EXISTS
    (SELECT 1 FROM json_each({labels}) w WHERE w.key = r.key AND w.value = r.value)))
    AND (json_extract({t}.affinity, '$.prefer') IS NULL
    OR {t}.run_at + json_extract({t}.affinity, '$.prefer_ms') * 1000 <= {now}
    OR NOT EXISTS (SELECT 1 FROM json_each({t}.affinity, '$.prefer') r WHERE NOT EXISTS
    (SELECT 1 FROM json_each({labels}) w WHERE w.key = r.key AND w.value = r.value)))))
