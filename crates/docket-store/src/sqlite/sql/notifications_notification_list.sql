SELECT * FROM docket_notifications WHERE seq > ?1 AND (?2 IS NULL OR namespace = ?2)
    ORDER BY seq LIMIT ?3
