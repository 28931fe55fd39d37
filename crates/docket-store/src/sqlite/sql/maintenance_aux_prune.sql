DELETE FROM docket_notifications WHERE seq IN (
    SELECT n.seq FROM docket_notifications n
    LEFT JOIN docket_sinks s ON s.name = 'webhook:' || n.namespace
    WHERE n.created_at < ?1 AND (s.name IS NULL OR n.seq <= s.seq)
    ORDER BY n.seq LIMIT ?2)
