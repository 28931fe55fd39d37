-- name: heartbeat
INSERT INTO docket_nodes (name, started_at, heartbeat_at, stopped_at, version, info)
    VALUES (?1, ?2, ?3, NULL, ?4, ?5) ON CONFLICT (name) DO UPDATE SET
    started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at,
    stopped_at = NULL, version = excluded.version, info = excluded.info

-- name: drain
UPDATE docket_nodes SET draining_at = CASE WHEN ?2 THEN COALESCE(draining_at, ?3) END
    WHERE name = ?1

-- name: hand_over_tasks
UPDATE docket_tasks SET node = ?2 WHERE node = ?1
    AND state IN ('scheduled', 'available', 'retryable')

-- name: worker_report
INSERT INTO docket_workers (name, report, reported_at, interval_ms) VALUES (?1, ?2, ?3, ?4)
    ON CONFLICT (name) DO UPDATE SET report = excluded.report,
    reported_at = excluded.reported_at, interval_ms = excluded.interval_ms
