INSERT INTO docket_schedules (name, spec, next_run_at, created_at, updated_at)
    VALUES (?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE spec = VALUES(spec),
    next_run_at = VALUES(next_run_at), updated_at = VALUES(updated_at)
