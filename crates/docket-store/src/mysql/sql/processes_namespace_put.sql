INSERT INTO docket_namespaces (name, config, updated_at) VALUES (?, ?, ?)
    ON DUPLICATE KEY UPDATE config = VALUES(config), updated_at = VALUES(updated_at)
