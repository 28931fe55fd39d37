UPDATE docket_schedules SET next_run_at = ?, last_run_at = ?, updated_at = ?
    WHERE name = ? AND next_run_at = ? AND paused = FALSE
