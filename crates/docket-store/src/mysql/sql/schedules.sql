-- name: defer
-- Moves an unpaused schedule's next_run_at from the occurrence read to another, firing nothing.
UPDATE docket_schedules SET next_run_at = ?, updated_at = ?
WHERE name = ? AND next_run_at = ? AND NOT paused

-- name: fire
UPDATE docket_schedules SET next_run_at = ?, last_run_at = ?, updated_at = ?
    WHERE name = ? AND next_run_at = ? AND paused = FALSE

-- name: pause
UPDATE docket_schedules SET paused = ?, next_run_at = COALESCE(?, next_run_at),
    updated_at = ? WHERE name = ?

-- name: put
INSERT INTO docket_schedules (name, spec, next_run_at, created_at, updated_at)
    VALUES (?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE spec = VALUES(spec),
    next_run_at = VALUES(next_run_at), updated_at = VALUES(updated_at)

-- name: get
SELECT {SCHEDULE_COLS} FROM docket_schedules WHERE name = ?

-- name: list
SELECT {SCHEDULE_COLS} FROM docket_schedules ORDER BY name

-- name: due
SELECT {SCHEDULE_COLS} FROM docket_schedules WHERE paused = FALSE AND next_run_at <= ?
    ORDER BY next_run_at LIMIT ?
