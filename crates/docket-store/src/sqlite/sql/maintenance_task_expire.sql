UPDATE docket_tasks SET state = 'discarded', finished_at = ?1,
    errors = json_insert(errors, '$[#]', json_object('attempt', attempt, 'at', ?2,
    'worker', NULL, 'message', 'expired: not started before expires_at'))
    WHERE id IN (SELECT id FROM docket_tasks WHERE expires_at <= ?1
    AND state IN ('scheduled','available','retryable') LIMIT ?3)
