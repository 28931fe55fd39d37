-- Debounce by key: see the PostgreSQL migration 0033. MariaDB has no partial index: the key
-- of a waiting task (scheduled or available, never claimed) is a stored column, NULL for the
-- rest (NULLs never collide), as unique_active is for unique_key.
ALTER TABLE docket_tasks ADD COLUMN debounce_key VARCHAR(512) NULL,
    ADD COLUMN debounce_until DATETIME(6) NULL,
    ADD COLUMN debounce_waiting VARCHAR(512) AS (CASE WHEN state IN ('scheduled', 'available')
        AND attempted_at IS NULL THEN debounce_key END) STORED,
    ADD UNIQUE KEY docket_tasks_debounce_idx (debounce_waiting);
ALTER TABLE docket_tasks_done ADD COLUMN debounce_key VARCHAR(512) NULL;
-- Dead-letter queues: see the PostgreSQL migration 0033.
ALTER TABLE docket_queues ADD COLUMN dead_letter VARCHAR(512) NULL;
ALTER TABLE docket_tasks ADD COLUMN dead_letter_of JSON NULL;
ALTER TABLE docket_tasks_done ADD COLUMN dead_letter_of JSON NULL;
