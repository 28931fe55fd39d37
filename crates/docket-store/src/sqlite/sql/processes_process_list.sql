SELECT * FROM docket_processes WHERE namespace = ?1 AND (?2 IS NULL OR status = ?2)
    AND (?3 IS NULL OR id > ?3) ORDER BY id LIMIT ?4
