-- runs on MySQL/MariaDB: what differs from sql_shared/runs.sql.

-- name: last_id
SELECT CAST(LAST_INSERT_ID() AS SIGNED) AS id
