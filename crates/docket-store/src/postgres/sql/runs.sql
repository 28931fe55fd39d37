-- runs on PostgreSQL: what differs from sql_shared/runs.sql.

-- name: last_id
SELECT lastval() AS id

-- name: list
-- Typed: PostgreSQL cannot tell a parameter's type from `$1 IS NULL` alone.
SELECT {RUN_COLS} FROM docket_workflow_runs
    WHERE ($1::text IS NULL OR workflow = $1) AND ($2::text IS NULL OR state = $2)
    AND ($3::text IS NULL OR parent_id = $3) AND ($4::timestamptz IS NULL OR created_at >= $4)
    AND ($5::timestamptz IS NULL OR created_at < $5)
    ORDER BY created_at DESC, id DESC LIMIT $6

-- name: wake_task
-- Into the current ring slot, as promote does (migration 0021).
UPDATE docket_tasks SET state = 'available', run_at = $2,
    slot = COALESCE((SELECT current FROM docket_task_slots), 0)
    WHERE id = $1 AND state = 'scheduled'

-- name: of_tasks
-- The runs tasks drive ($1, a JSON array of task ids): an event sink's messages name them.
SELECT task_id, id, workflow FROM docket_workflow_runs WHERE task_id IN (SELECT jsonb_array_elements_text($1::jsonb)::int8)

-- name: lock_many
-- Runs $1 (ids, in id order: one lock order for every caller) locked; a report batch's.
SELECT {RUN_COLS} FROM docket_workflow_runs WHERE id = ANY($1) ORDER BY id FOR UPDATE

-- name: get_many
SELECT {RUN_COLS} FROM docket_workflow_runs WHERE id = ANY($1)
