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
