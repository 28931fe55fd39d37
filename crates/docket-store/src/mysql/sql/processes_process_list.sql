SELECT * FROM docket_processes WHERE namespace = ? AND (? IS NULL OR status = ?)
    AND (? IS NULL OR id > ?) ORDER BY id LIMIT ?
