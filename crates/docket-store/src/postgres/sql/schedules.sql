-- name: defer
-- Moves an unpaused schedule's next_run_at from the occurrence read ($2) to $3, firing nothing.
UPDATE docket_schedules SET next_run_at = $3, updated_at = $4
WHERE name = $1 AND next_run_at = $2 AND NOT paused

-- name: fire
UPDATE docket_schedules SET next_run_at = $3, last_run_at = $4, updated_at = $4
    WHERE name = $1 AND next_run_at = $2 AND NOT paused
