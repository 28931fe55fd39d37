DELETE FROM docket_audit WHERE id IN (SELECT id FROM docket_audit WHERE at < ?1
    ORDER BY id LIMIT ?2)
