UPDATE docket_tasks SET state = 'discarded', finished_at = $1,
    errors = errors || jsonb_build_array(jsonb_build_object('attempt', attempt, 'at', $1,
    'worker', NULL, 'message', 'expired: not started before expires_at'))
    WHERE id IN (SELECT id FROM docket_tasks WHERE expires_at <= $1
    AND state IN ('scheduled','available','retryable') LIMIT $2 FOR UPDATE SKIP LOCKED)
