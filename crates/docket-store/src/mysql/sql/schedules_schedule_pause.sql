UPDATE docket_schedules SET paused = ?, next_run_at = COALESCE(?, next_run_at),
    updated_at = ? WHERE name = ?
