-- Batches (issue 26): see the PostgreSQL migration 0025. MySQL has no partial index: the
-- members' index is on batch_id alone, so a plain task's state changes never touch it.
CREATE TABLE docket_batches (
    id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name VARCHAR(512) NULL,
    sealed BOOLEAN NOT NULL,
    callbacks JSON NOT NULL,
    created_at DATETIME(6) NOT NULL,
    settled_at DATETIME(6) NULL,
    fired JSON NULL,
    KEY docket_batches_settled_idx (settled_at, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
ALTER TABLE docket_tasks ADD COLUMN batch_id BIGINT NULL, ADD KEY docket_tasks_batch_idx (batch_id);
ALTER TABLE docket_tasks_done ADD COLUMN batch_id BIGINT NULL,
    ADD KEY docket_tasks_done_batch_idx (batch_id);
