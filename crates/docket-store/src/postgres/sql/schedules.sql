-- Schedules. Firing an occurrence is a compare-and-set of next_run_at (fire, defer): of two
-- nodes firing the same occurrence, the second's update matches nothing.

-- name: due
SELECT {SCHEDULE_COLS} FROM docket_schedules WHERE NOT paused AND next_run_at <= $1
    ORDER BY next_run_at LIMIT $2

-- name: next_due
SELECT min(next_run_at) AS t FROM docket_schedules WHERE NOT paused

-- name: fire
UPDATE docket_schedules SET next_run_at = $3, last_run_at = $4, updated_at = $4
    WHERE name = $1 AND next_run_at = $2 AND NOT paused

-- name: defer
-- Moves an unpaused schedule's next_run_at from the occurrence read ($2) to $3, firing nothing.
UPDATE docket_schedules SET next_run_at = $3, updated_at = $4
    WHERE name = $1 AND next_run_at = $2 AND NOT paused
