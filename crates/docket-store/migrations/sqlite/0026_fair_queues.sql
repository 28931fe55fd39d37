-- Fair queues (issue 26 item 4): see the PostgreSQL migration 0028.
ALTER TABLE docket_tasks ADD COLUMN partition_key TEXT;
ALTER TABLE docket_queues ADD COLUMN fair INTEGER NOT NULL DEFAULT 0;
ALTER TABLE docket_queues ADD COLUMN partition_weights TEXT;
ALTER TABLE docket_queues ADD COLUMN partition_limit INTEGER;
