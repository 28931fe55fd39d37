-- maintenance: the statements written alike on several backends, with numbered placeholders `?N`
-- (PostgreSQL's `$N` made by the loader, crate::sql). A statement of the same name in a
-- backend's own sql/maintenance.sql replaces the one here on that backend.

-- name: prune_notifications
-- Older than retention (?1) and past the cursor of every sink of its namespace (webhook:NS,
-- sink:NAME:NS). A sink whose lease ran out before ?1 no longer holds rows back: it was
-- removed from the configuration (or every node is gone, and then nothing prunes).
DELETE FROM docket_notifications WHERE seq IN (
    SELECT n.seq FROM docket_notifications n
    WHERE n.created_at < ?1 AND NOT EXISTS (SELECT 1 FROM docket_sinks s
        WHERE (s.name = 'webhook:' || n.namespace OR s.name LIKE 'sink:%:' || n.namespace)
        AND s.seq < n.seq AND s.lease_until >= ?1)
    ORDER BY n.seq LIMIT ?2)

-- name: prune_audit
DELETE FROM docket_audit WHERE id IN (SELECT id FROM docket_audit WHERE at < ?1
    ORDER BY id LIMIT ?2)

-- name: rescue_list
SELECT {COLS} FROM docket_tasks WHERE state = 'running' AND lease_expires_at < ?
    AND namespace IS NULL ORDER BY lease_expires_at LIMIT ?

-- name: prune_task_events
-- Task events no sink published within the notifications' retention (a sink removed).
DELETE FROM docket_task_events WHERE seq IN (SELECT seq FROM docket_task_events
    WHERE at < ?1 ORDER BY seq LIMIT ?2)

-- name: prune_nodes
DELETE FROM docket_nodes WHERE COALESCE(stopped_at, heartbeat_at) < ?1

-- name: prune_workers
DELETE FROM docket_workers WHERE reported_at < ?1
