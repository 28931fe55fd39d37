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
-- Tags (issue 43): a JSON array on the task (both tables), and a side table (tag, task) the
-- list filters by, kept by triggers on inserts and deletes of either table. A task moved
-- between the tables (archive, unarchive) is inserted into the other one before it is deleted
-- from this one, so its tags stay; a task gone from both loses them. A change of tags (a
-- debounced enqueue's replacement) rewrites them explicitly (no UPDATE trigger: claims and
-- completions update every row).
ALTER TABLE docket_tasks ADD COLUMN tags JSON NULL;
ALTER TABLE docket_tasks_done ADD COLUMN tags JSON NULL;
CREATE TABLE docket_task_tags (
    tag VARCHAR(512) NOT NULL,
    task_id BIGINT NOT NULL,
    PRIMARY KEY (tag, task_id),
    KEY docket_task_tags_task_idx (task_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE TRIGGER docket_tasks_tags_insert AFTER INSERT ON docket_tasks FOR EACH ROW
BEGIN
    IF NEW.tags IS NOT NULL THEN
        INSERT IGNORE INTO docket_task_tags (tag, task_id)
            SELECT j.tag, NEW.id FROM JSON_TABLE(NEW.tags, '$[*]'
                COLUMNS (tag VARCHAR(512) PATH '$')) j;
    END IF;
END;
CREATE TRIGGER docket_tasks_done_tags_insert AFTER INSERT ON docket_tasks_done FOR EACH ROW
BEGIN
    IF NEW.tags IS NOT NULL THEN
        INSERT IGNORE INTO docket_task_tags (tag, task_id)
            SELECT j.tag, NEW.id FROM JSON_TABLE(NEW.tags, '$[*]'
                COLUMNS (tag VARCHAR(512) PATH '$')) j;
    END IF;
END;
CREATE TRIGGER docket_tasks_tags_delete AFTER DELETE ON docket_tasks FOR EACH ROW
BEGIN
    IF OLD.tags IS NOT NULL THEN
        DELETE FROM docket_task_tags WHERE task_id = OLD.id
            AND NOT EXISTS (SELECT 1 FROM docket_tasks_done WHERE id = OLD.id);
    END IF;
END;
CREATE TRIGGER docket_tasks_done_tags_delete AFTER DELETE ON docket_tasks_done FOR EACH ROW
BEGIN
    IF OLD.tags IS NOT NULL THEN
        DELETE FROM docket_task_tags WHERE task_id = OLD.id
            AND NOT EXISTS (SELECT 1 FROM docket_tasks WHERE id = OLD.id);
    END IF;
END;
-- Worker labels: see the PostgreSQL migration 0033.
ALTER TABLE docket_tasks ADD COLUMN affinity JSON NULL;
ALTER TABLE docket_tasks_done ADD COLUMN affinity JSON NULL;
