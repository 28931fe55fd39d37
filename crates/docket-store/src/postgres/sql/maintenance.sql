-- name: expire
UPDATE docket_tasks SET state = 'discarded', finished_at = $1,
    errors = errors || jsonb_build_array(jsonb_build_object('attempt', attempt, 'at', $1,
    'worker', NULL, 'message', 'expired: not started before expires_at'))
    WHERE id IN (SELECT id FROM docket_tasks WHERE expires_at <= $1
    AND state IN ('scheduled','available','retryable') LIMIT $2 FOR UPDATE SKIP LOCKED)

-- name: promote
-- Into the current ring slot (migration 0021) unless its unique_key or debounce_key (0033)
-- keeps it in slot 0, where their unique indexes are.
UPDATE docket_tasks SET state = 'available',
    slot = CASE WHEN unique_key IS NULL AND debounce_key IS NULL THEN COALESCE((SELECT current FROM docket_task_slots), 0) ELSE 0 END
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
