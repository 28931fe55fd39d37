SELECT * FROM docket_notifications WHERE seq > ? AND (? IS NULL OR namespace = ?)
    ORDER BY seq LIMIT ?
