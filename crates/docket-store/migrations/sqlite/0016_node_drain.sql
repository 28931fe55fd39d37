-- Draining a node (see the PostgreSQL migration of the same number). µs since the epoch.
ALTER TABLE docket_nodes ADD COLUMN draining_at INTEGER;
