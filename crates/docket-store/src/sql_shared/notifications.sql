-- notifications: the statements written alike on several backends, with numbered placeholders `?N`
-- (PostgreSQL's `$N` made by the loader, crate::sql). A statement of the same name in a
-- backend's own sql/notifications.sql replaces the one here on that backend.

-- name: list
SELECT * FROM docket_notifications WHERE seq > ?1 AND (?2 IS NULL OR namespace = ?2)
    ORDER BY seq LIMIT ?3

-- name: sink_ensure
INSERT INTO docket_sinks (name) VALUES (?1) ON CONFLICT DO NOTHING

-- name: sink_lease
-- Takes (or keeps) the sink's delivery lease: free, ours, or run out at ?4.
UPDATE docket_sinks SET owner = ?2, lease_until = ?3 WHERE name = ?1
    AND (owner IS NULL OR owner = ?2 OR lease_until < ?4)

-- name: sink_seq
SELECT seq FROM docket_sinks WHERE name = ?1

-- name: sink_advance
UPDATE docket_sinks SET seq = ?3 WHERE name = ?1 AND owner = ?2

-- name: task_event_list
SELECT * FROM docket_task_events WHERE queue = ?1 ORDER BY seq LIMIT ?2
