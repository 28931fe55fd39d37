-- The node registry and worker reports.

-- name: heartbeat
INSERT INTO docket_nodes (name, started_at, heartbeat_at, stopped_at, version, info)
    VALUES (?1, ?2, ?3, NULL, ?4, ?5) ON DUPLICATE KEY UPDATE
    started_at = VALUES(started_at), heartbeat_at = VALUES(heartbeat_at),
    stopped_at = NULL, version = VALUES(version), info = VALUES(info)

-- name: worker_report
INSERT INTO docket_workers (name, report, reported_at, interval_ms) VALUES (?1, ?2, ?3, ?4)
    ON DUPLICATE KEY UPDATE report = VALUES(report), reported_at = VALUES(reported_at),
    interval_ms = VALUES(interval_ms)
