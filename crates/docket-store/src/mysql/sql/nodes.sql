-- name: heartbeat
INSERT INTO docket_nodes (name, started_at, heartbeat_at, stopped_at, version, info)
    VALUES (?, ?, ?, NULL, ?, ?) ON DUPLICATE KEY UPDATE
    started_at = VALUES(started_at), heartbeat_at = VALUES(heartbeat_at),
    stopped_at = NULL, version = VALUES(version), info = VALUES(info)

-- name: drain
UPDATE docket_nodes SET draining_at = CASE WHEN ? THEN COALESCE(draining_at, ?) END
    WHERE name = ?

-- name: hand_over_tasks
UPDATE docket_tasks SET node = ? WHERE node = ?
    AND state IN ('scheduled', 'available', 'retryable')

-- name: worker_report
INSERT INTO docket_workers (name, report, reported_at, interval_ms) VALUES (?, ?, ?, ?)
    ON DUPLICATE KEY UPDATE report = VALUES(report), reported_at = VALUES(reported_at),
    interval_ms = VALUES(interval_ms)
