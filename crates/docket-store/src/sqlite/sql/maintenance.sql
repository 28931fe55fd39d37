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

-- name: expire
UPDATE docket_tasks SET state = 'discarded', finished_at = ?1,
    errors = json_insert(errors, '$[#]', json_object('attempt', attempt, 'at', ?2,
    'worker', NULL, 'message', 'expired: not started before expires_at'))
    WHERE id IN (SELECT id FROM docket_tasks WHERE expires_at <= ?1
    AND state IN ('scheduled','available','retryable') LIMIT ?3)

-- name: promote
UPDATE docket_tasks SET state = 'available' WHERE id IN (
    SELECT id FROM docket_tasks WHERE state IN ('scheduled','retryable') AND run_at <= ?1
    AND (expires_at IS NULL OR expires_at > ?1)
    ORDER BY run_at LIMIT ?2) RETURNING queue

-- name: prune
DELETE FROM docket_tasks WHERE id IN (
    SELECT t.id FROM docket_tasks t LEFT JOIN docket_queues q ON q.name = t.queue
    WHERE t.state IN ('completed','discarded','cancelled') AND t.finished_at < ?1 -
    CASE WHEN t.state = 'completed' THEN COALESCE(q.retention_completed_ms, ?2)
    ELSE COALESCE(q.retention_failed_ms, ?3) END * 1000
    AND NOT (t.namespace IS NOT NULL AND EXISTS (SELECT 1 FROM docket_processes p
    WHERE p.namespace = t.namespace AND p.id = t.process_id))
    LIMIT ?4)
    RETURNING queue, state, finished_at

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
