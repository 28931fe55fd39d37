-- Moves an unpaused schedule's next_run_at from the occurrence read to another, firing nothing.
UPDATE docket_schedules SET next_run_at = ?, updated_at = ?
WHERE name = ? AND next_run_at = ? AND NOT paused
