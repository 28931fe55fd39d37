-- name: heartbeat
INSERT INTO docket_nodes (name, started_at, heartbeat_at, stopped_at, version, info)
    VALUES (?1, ?2, ?3, NULL, ?4, ?5) ON CONFLICT (name) DO UPDATE SET
    started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at,
    stopped_at = NULL, version = excluded.version, info = excluded.info
