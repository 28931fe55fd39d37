-- runs on MySQL/MariaDB: what differs from sql_shared/runs.sql.

-- name: last_id
SELECT CAST(LAST_INSERT_ID() AS SIGNED) AS id

-- name: of_tasks
-- The runs tasks drive (?1, a JSON array of task ids): an event sink's messages name them.
SELECT task_id, id, workflow FROM docket_workflow_runs WHERE task_id IN (SELECT s FROM JSON_TABLE(?1, '$[*]' COLUMNS (s BIGINT PATH '$')) t)
