-- nodes: the statements written alike on several backends, with numbered placeholders `?N`
-- (PostgreSQL's `$N` made by the loader, crate::sql). A statement of the same name in a
-- backend's own sql/nodes.sql replaces the one here on that backend.

-- name: heartbeat
INSERT INTO docket_nodes (name, started_at, heartbeat_at, stopped_at, version, info)
    VALUES (?1, ?2, ?3, NULL, ?4, ?5) ON CONFLICT (name) DO UPDATE SET
    started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at,
    stopped_at = NULL, version = excluded.version, info = excluded.info

-- name: stop
UPDATE docket_nodes SET stopped_at = ?2 WHERE name = ?1

-- name: list
SELECT * FROM docket_nodes ORDER BY name

-- name: drain
UPDATE docket_nodes SET draining_at = CASE WHEN ?2 THEN COALESCE(draining_at, ?3) END
    WHERE name = ?1

-- name: pinned_queues
-- The queues of a drained node's waiting tasks pinned to it (woken when they move).
SELECT DISTINCT queue FROM docket_tasks WHERE node = ?1
    AND state IN ('scheduled', 'available', 'retryable')

-- name: hand_over_tasks
UPDATE docket_tasks SET node = ?2 WHERE node = ?1
    AND state IN ('scheduled', 'available', 'retryable')

-- name: worker_report
INSERT INTO docket_workers (name, report, reported_at, interval_ms) VALUES (?1, ?2, ?3, ?4)
    ON CONFLICT (name) DO UPDATE SET report = excluded.report,
    reported_at = excluded.reported_at, interval_ms = excluded.interval_ms

-- name: worker_list
SELECT * FROM docket_workers ORDER BY name
