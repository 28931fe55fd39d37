DELETE FROM docket_tasks WHERE id IN (
    SELECT t.id FROM docket_tasks t LEFT JOIN docket_queues q ON q.name = t.queue
    WHERE t.state IN ('completed','discarded','cancelled') AND t.finished_at < ?1 -
    CASE WHEN t.state = 'completed' THEN COALESCE(q.retention_completed_ms, ?2)
    ELSE COALESCE(q.retention_failed_ms, ?3) END * 1000
    AND NOT (t.namespace IS NOT NULL AND EXISTS (SELECT 1 FROM docket_processes p
    WHERE p.namespace = t.namespace AND p.id = t.process_id))
    LIMIT ?4)
