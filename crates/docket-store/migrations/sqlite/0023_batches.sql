-- Batches (issue 26): see the PostgreSQL migration 0025.
CREATE TABLE docket_batches (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT,
    sealed INTEGER NOT NULL,
    callbacks TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    settled_at INTEGER,
    fired TEXT
);
CREATE INDEX docket_batches_unsettled_idx ON docket_batches (id) WHERE settled_at IS NULL;
ALTER TABLE docket_tasks ADD COLUMN batch_id INTEGER;
CREATE INDEX docket_tasks_batch_idx ON docket_tasks (batch_id, state) WHERE batch_id IS NOT NULL;
