-- The run-log entry of the attempt the row holds, ended at {now} with {outcome}; the
-- oldest entry goes once the log holds {keep} (docket_core::run::StoredRun's shape). MySQL
-- evaluates SET assignments left to right on the new values: a marker goes after
-- `finished_at = ?` (its usual {now}) and before anything that changes `attempt` or `stage`.
-- claim_order: the claim order (docket_store::leases::sort_claim_order's, in Rust): higher
-- priority first, then fewer attempts, earlier run_at, lower id; a statement's claim_order
-- marker with alias T is this with T for t.
-- name: claim_order
{t}.priority DESC, {t}.attempt, {t}.run_at, {t}.id

-- name: runs
runs = JSON_ARRAY_APPEND(CASE WHEN JSON_LENGTH(COALESCE(runs, '[]')) >= {keep}
    THEN JSON_REMOVE(runs, '$[0]') ELSE COALESCE(runs, JSON_ARRAY()) END, '$',
    JSON_OBJECT('attempt', attempt, 'stage', stage,
    'started_us', TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', attempted_at),
    'finished_us', TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {now}),
    'worker', worker, 'node', attempt_node, 'outcome', '{outcome}')),
    run_count = run_count + 1

-- name: tag_filter
-- tasks.list's {tag} in tasks.list_tagged (sql.rs): the side table's (tag, task_id) key.
AND id IN (SELECT task_id FROM docket_task_tags WHERE tag = ?15)

-- The affinity marker (sql.rs, `affinity:T:LABELS:NOW` in braces): see the PostgreSQL fragment; JSON_CONTAINS(labels, pairs).
-- name: affinity
({t}.affinity IS NULL OR ((JSON_EXTRACT({t}.affinity, '$.requires') IS NULL
    OR JSON_CONTAINS({labels}, JSON_EXTRACT({t}.affinity, '$.requires')))
    AND (JSON_EXTRACT({t}.affinity, '$.prefer') IS NULL
    OR JSON_CONTAINS({labels}, JSON_EXTRACT({t}.affinity, '$.prefer'))
    OR {t}.run_at + INTERVAL JSON_EXTRACT({t}.affinity, '$.prefer_ms') * 1000 MICROSECOND
    <= {now})))
