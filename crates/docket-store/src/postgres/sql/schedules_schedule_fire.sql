UPDATE docket_schedules SET next_run_at = $3, last_run_at = $4, updated_at = $4
    WHERE name = $1 AND next_run_at = $2 AND NOT paused
