INSERT INTO docket_namespaces (name, config, updated_at) VALUES ($1, $2, $3)
    ON CONFLICT (name) DO UPDATE SET config = excluded.config, updated_at = excluded.updated_at
