-- Debounce by key: see the PostgreSQL migration 0033.
ALTER TABLE docket_tasks ADD COLUMN debounce_key TEXT;
ALTER TABLE docket_tasks ADD COLUMN debounce_until INTEGER;
CREATE UNIQUE INDEX docket_tasks_debounce_idx ON docket_tasks (debounce_key)
    WHERE debounce_key IS NOT NULL AND state IN ('scheduled', 'available')
    AND attempted_at IS NULL;
-- Dead-letter queues: see the PostgreSQL migration 0033.
ALTER TABLE docket_queues ADD COLUMN dead_letter TEXT;
ALTER TABLE docket_tasks ADD COLUMN dead_letter_of TEXT;
