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

-- name: insert
-- Runs, a row per element of the arrays (DriverTx::update_each: one statement for a start
-- batch); answers their tasks' ids.
INSERT INTO docket_workflow_runs (id, workflow, queue, state, input, parent_id, task_id, steps,
    created_at, updated_at)
    SELECT id, wf, q, 'running', inp, par, tid, 0, at, at
    FROM unnest($1::text[], $2::text[], $3::text[], $4::jsonb[], $5::text[], $6::bigint[],
    $7::timestamptz[]) AS x(id, wf, q, inp, par, tid, at)
    RETURNING task_id AS id

-- name: entry_insert
-- Journal entries, a row per element of the arrays (DriverTx::update_each: one statement for
-- a report batch).
INSERT INTO docket_workflow_steps (run_id, seq, kind, name, state, output, error, attempts,
    child_id, started_at, finished_at, wake_at)
    SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[],
    $6::jsonb[], $7::text[], $8::int[], $9::text[], $10::timestamptz[], $11::timestamptz[],
    $12::timestamptz[])
    RETURNING seq AS id

-- name: set_steps
-- Journals' lengths raised, a run per element of the arrays (DriverTx::update_each).
UPDATE docket_workflow_runs r SET steps = CASE WHEN r.steps < x.n THEN x.n ELSE r.steps END,
    updated_at = x.at
    FROM unnest($1::text[], $2::bigint[], $3::timestamptz[]) AS x(id, n, at)
    WHERE r.id = x.id
    RETURNING r.steps AS id

-- name: finish
-- Runs end at $1, a run per element of the arrays (DriverTx::update_each); each journal's
-- length is raised to the entries its finish recorded.
UPDATE docket_workflow_runs r SET state = x.state, result = x.result, error = x.error,
    finished_at = $1, updated_at = $1, waiting_for = NULL, wake_at = NULL,
    steps = CASE WHEN r.steps < x.n THEN x.n ELSE r.steps END
    FROM unnest($2::text[], $3::text[], $4::jsonb[], $5::text[], $6::bigint[])
    AS x(id, state, result, error, n)
    WHERE r.id = x.id
    RETURNING r.steps AS id
