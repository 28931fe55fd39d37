-- Queue setting mask_payload (see the PostgreSQL migration of the same number).
ALTER TABLE docket_queues ADD COLUMN mask_payload INTEGER NOT NULL DEFAULT 0;
