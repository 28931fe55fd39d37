SELECT n.seq FROM docket_notifications n
    LEFT JOIN docket_sinks s ON s.name = CONCAT('webhook:', n.namespace)
    WHERE n.created_at < ? AND (s.name IS NULL OR n.seq <= s.seq)
    ORDER BY n.seq LIMIT ?
