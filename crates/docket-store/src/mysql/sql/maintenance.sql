-- name: prune_notifications
-- See postgres/sql/maintenance.sql prune_notifications: the same rule. One table changed and
-- only read elsewhere, so a DELETE of its own with ORDER BY … LIMIT.
DELETE FROM docket_notifications
    WHERE created_at < ?1 AND NOT EXISTS (SELECT 1 FROM docket_sinks s
        WHERE (s.name = CONCAT('webhook:', docket_notifications.namespace)
        OR s.name LIKE CONCAT('sink:%:', docket_notifications.namespace))
        AND s.seq < docket_notifications.seq AND s.lease_until >= ?1)
    ORDER BY seq LIMIT ?2

-- name: expirable
-- Without locks: see lock_expirable.
SELECT id FROM docket_tasks WHERE expires_at <= ?
    AND state IN ('scheduled','available','retryable') LIMIT ?

-- name: lock_expirable
-- The expirable rows found, locked by primary key: a locking scan may lock (and at READ
-- COMMITTED release again) every waiting row it looks at, and a claim's SKIP LOCKED would skip
-- those available tasks meanwhile.
SELECT id FROM docket_tasks WHERE expires_at <= ? AND id IN ({ids})
    AND state IN ('scheduled','available','retryable') FOR UPDATE SKIP LOCKED

-- name: promotable
-- Without locks: see lock_promotable.
SELECT id FROM docket_tasks WHERE state IN ('scheduled','retryable') AND run_at <= ?
    AND (expires_at IS NULL OR expires_at > ?) ORDER BY run_at LIMIT ?

-- name: lock_promotable
-- The due rows found, locked by primary key (see lock_expirable).
SELECT id, queue FROM docket_tasks WHERE run_at <= ? AND id IN ({ids})
    AND state IN ('scheduled','retryable') FOR UPDATE SKIP LOCKED

-- name: prunable
SELECT t.id FROM docket_tasks t LEFT JOIN docket_queues q ON q.name = t.queue
    WHERE t.state IN ('completed','discarded','cancelled') AND t.finished_at <
    CASE WHEN t.state = 'completed' THEN
    CASE WHEN q.retention_completed_ms IS NULL THEN ?
    ELSE COALESCE(TIMESTAMPADD(MICROSECOND, -1000 * q.retention_completed_ms, ?), '1000-01-01') END
    ELSE
    CASE WHEN q.retention_failed_ms IS NULL THEN ?
    ELSE COALESCE(TIMESTAMPADD(MICROSECOND, -1000 * q.retention_failed_ms, ?), '1000-01-01') END
    END
    AND NOT (t.namespace IS NOT NULL AND EXISTS (SELECT 1 FROM docket_processes pr
    WHERE pr.namespace = t.namespace AND pr.id = t.process_id))
    LIMIT ?

-- name: finished
SELECT id FROM docket_tasks WHERE state IN ('completed','discarded','cancelled')
    LIMIT ?

-- name: archive
INSERT INTO docket_tasks_done ({COLS}) SELECT {COLS} FROM docket_tasks
    WHERE id IN ({ids})

-- name: expire
UPDATE docket_tasks SET finished_at = ?,
    errors = JSON_ARRAY_APPEND(errors, '$', JSON_OBJECT('attempt', attempt, 'at', ?,
    'worker', NULL, 'message', 'expired: not started before expires_at')),
    state = 'discarded'
    WHERE id IN ({ids})

-- name: prune
-- Deletes the prunable ids found in {table} (docket_tasks or docket_tasks_done), unless retried
-- meanwhile.
DELETE FROM {table} WHERE id IN ({ids})
    AND state IN ('completed','discarded','cancelled')

-- name: prune_lock
-- The prunable rows found, locked, with what the kept counts need (docket_core::counts).
-- Not DELETE … RETURNING: MariaDB's prepared statements describe no columns for it.
SELECT id, queue, state, finished_at FROM {table} WHERE id IN ({ids})
    AND state IN ('completed','discarded','cancelled') FOR UPDATE

-- name: lock_finished
SELECT id FROM docket_tasks WHERE id IN ({ids})
    AND state IN ('completed','discarded','cancelled') FOR UPDATE SKIP LOCKED

-- name: prune_audit
DELETE FROM docket_audit WHERE at < ?1 ORDER BY id LIMIT ?2

-- name: prune_task_events
-- Task events no sink published within the notifications' retention (a sink removed).
DELETE FROM docket_task_events WHERE at < ?1 ORDER BY seq LIMIT ?2
