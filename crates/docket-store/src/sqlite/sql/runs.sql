-- runs on SQLite: what differs from sql_shared/runs.sql.

-- name: lock
-- The write transaction (BEGIN IMMEDIATE) holds the database: no row lock to take.
SELECT {RUN_COLS} FROM docket_workflow_runs WHERE id = ?1

-- name: last_id
SELECT last_insert_rowid() AS id

-- name: of_tasks
-- The runs tasks drive (?1, a JSON array of task ids): an event sink's messages name them.
SELECT task_id, id, workflow FROM docket_workflow_runs WHERE task_id IN (SELECT value FROM json_each(?1))

-- name: lock_many
-- Runs ?1 (a JSON array of ids); the write transaction (BEGIN IMMEDIATE) holds the database.
SELECT {RUN_COLS} FROM docket_workflow_runs WHERE id IN (SELECT value FROM json_each(?1)) ORDER BY id

-- name: get_many
SELECT {RUN_COLS} FROM docket_workflow_runs WHERE id IN (SELECT value FROM json_each(?1))
