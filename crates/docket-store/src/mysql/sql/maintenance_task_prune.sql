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
