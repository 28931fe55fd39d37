-- name: heartbeat
INSERT INTO docket_nodes (name, started_at, heartbeat_at, stopped_at, version, info)
    VALUES (?, ?, ?, NULL, ?, ?) ON DUPLICATE KEY UPDATE
    started_at = VALUES(started_at), heartbeat_at = VALUES(heartbeat_at),
    stopped_at = NULL, version = VALUES(version), info = VALUES(info)
