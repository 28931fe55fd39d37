-- name: prune_notifications
-- Older than retention ($1) and past the cursor of every sink of its namespace (webhook:NS,
-- sink:NAME:NS). A sink whose lease ran out before $1 no longer holds rows back: it was
-- removed from the configuration (or every node is gone, and then nothing prunes).
DELETE FROM docket_notifications WHERE seq IN (
    SELECT n.seq FROM docket_notifications n
    WHERE n.created_at < $1 AND NOT EXISTS (SELECT 1 FROM docket_sinks s
        WHERE (s.name = 'webhook:' || n.namespace OR s.name LIKE 'sink:%:' || n.namespace)
        AND s.seq < n.seq AND s.lease_until >= $1)
    ORDER BY n.seq LIMIT $2)

-- name: prune_audit
DELETE FROM docket_audit WHERE id IN (SELECT id FROM docket_audit WHERE at < $1
    ORDER BY id LIMIT $2)

-- name: expire
UPDATE docket_tasks SET state = 'discarded', finished_at = $1,
    errors = errors || jsonb_build_array(jsonb_build_object('attempt', attempt, 'at', $1,
    'worker', NULL, 'message', 'expired: not started before expires_at'))
    WHERE id IN (SELECT id FROM docket_tasks WHERE expires_at <= $1
    AND state IN ('scheduled','available','retryable') LIMIT $2 FOR UPDATE SKIP LOCKED)

-- name: promote
-- Into the current ring slot (migration 0021) unless its unique_key keeps it in slot 0.
UPDATE docket_tasks SET state = 'available',
    slot = CASE WHEN unique_key IS NULL THEN COALESCE((SELECT current FROM docket_task_slots), 0) ELSE 0 END
    WHERE id IN (
    SELECT id FROM docket_tasks WHERE state IN ('scheduled','retryable') AND run_at <= $1
    AND (expires_at IS NULL OR expires_at > $1)
    ORDER BY run_at LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING queue

-- name: prune
DELETE FROM docket_tasks WHERE id IN (
    SELECT t.id FROM docket_tasks t LEFT JOIN docket_queues q ON q.name = t.queue
    WHERE t.state IN ('completed','discarded','cancelled') AND t.finished_at < $1 -
    CASE WHEN t.state = 'completed'
    THEN COALESCE(q.retention_completed_ms, $2)
    ELSE COALESCE(q.retention_failed_ms, $3) END * interval '1 millisecond'
    AND NOT (t.namespace IS NOT NULL AND EXISTS (SELECT 1 FROM docket_processes p
    WHERE p.namespace = t.namespace AND p.id = t.process_id))
    LIMIT $4 FOR UPDATE OF t SKIP LOCKED)
    RETURNING queue, state, finished_at

-- name: rescue_list
SELECT {COLS} FROM docket_tasks WHERE state = 'running' AND lease_expires_at < $1
    AND namespace IS NULL ORDER BY lease_expires_at LIMIT $2

-- name: ring_move_batch
-- Moves a batch of the tasks left in the next slot ({leaf}) to slot 0, skipping rows a claim
-- or a completion holds.
UPDATE docket_tasks_live SET slot = 0 WHERE slot = $1 AND id IN
    (SELECT id FROM {leaf} LIMIT $2 FOR UPDATE SKIP LOCKED)

-- name: prune_task_events
-- Task events no sink published within the notifications' retention (a sink removed).
DELETE FROM docket_task_events WHERE seq IN (SELECT seq FROM docket_task_events
    WHERE at < $1 ORDER BY seq LIMIT $2)

-- name: prune_nodes
DELETE FROM docket_nodes WHERE COALESCE(stopped_at, heartbeat_at) < $1

-- name: prune_workers
DELETE FROM docket_workers WHERE reported_at < $1
