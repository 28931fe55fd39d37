-- Fair queues (issue 26 item 4): see the PostgreSQL migration 0028.
ALTER TABLE docket_tasks ADD COLUMN partition_key VARCHAR(256) NULL;
ALTER TABLE docket_tasks_done ADD COLUMN partition_key VARCHAR(256) NULL;
ALTER TABLE docket_queues ADD COLUMN fair BOOLEAN NOT NULL DEFAULT FALSE,
    ADD COLUMN partition_weights JSON NULL, ADD COLUMN partition_limit INT NULL;
