-- schedules: the statements written alike on several backends, with numbered placeholders `?N`
-- (PostgreSQL's `$N` made by the loader, crate::sql). A statement of the same name in a
-- backend's own sql/schedules.sql replaces the one here on that backend.

-- name: put
INSERT INTO docket_schedules (name, spec, next_run_at, created_at, updated_at)
    VALUES (?1, ?2, ?3, ?4, ?4) ON CONFLICT (name) DO UPDATE SET spec = excluded.spec,
    next_run_at = excluded.next_run_at, updated_at = excluded.updated_at

-- name: get
SELECT {SCHEDULE_COLS} FROM docket_schedules WHERE name = ?1

-- name: list
SELECT {SCHEDULE_COLS} FROM docket_schedules ORDER BY name

-- name: delete
DELETE FROM docket_schedules WHERE name = ?1

-- name: pause
UPDATE docket_schedules SET paused = ?2, next_run_at = COALESCE(?3, next_run_at),
    updated_at = ?4 WHERE name = ?1

-- name: last_task
UPDATE docket_schedules SET last_task_id = ?2 WHERE name = ?1
