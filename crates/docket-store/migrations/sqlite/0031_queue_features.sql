-- Debounce by key: see the PostgreSQL migration 0033.
ALTER TABLE docket_tasks ADD COLUMN debounce_key TEXT;
ALTER TABLE docket_tasks ADD COLUMN debounce_until INTEGER;
CREATE UNIQUE INDEX docket_tasks_debounce_idx ON docket_tasks (debounce_key)
    WHERE debounce_key IS NOT NULL AND state IN ('scheduled', 'available')
    AND attempted_at IS NULL;
-- Dead-letter queues: see the PostgreSQL migration 0033.
ALTER TABLE docket_queues ADD COLUMN dead_letter TEXT;
ALTER TABLE docket_tasks ADD COLUMN dead_letter_of TEXT;
-- Tags (issue 43): a JSON array on the task, and a side table (tag, task) the list filters by,
-- kept by triggers, so every insert and delete path keeps it without knowing of it.
ALTER TABLE docket_tasks ADD COLUMN tags TEXT;
CREATE TABLE docket_task_tags (
    tag TEXT NOT NULL,
    task_id INTEGER NOT NULL,
    PRIMARY KEY (tag, task_id)
) WITHOUT ROWID;
CREATE INDEX docket_task_tags_task_idx ON docket_task_tags (task_id);
CREATE TRIGGER docket_tasks_tags_insert AFTER INSERT ON docket_tasks
    WHEN new.tags IS NOT NULL BEGIN
    INSERT OR IGNORE INTO docket_task_tags (tag, task_id)
        SELECT value, new.id FROM json_each(new.tags);
END;
CREATE TRIGGER docket_tasks_tags_update AFTER UPDATE OF tags ON docket_tasks BEGIN
    DELETE FROM docket_task_tags WHERE task_id = old.id;
    INSERT OR IGNORE INTO docket_task_tags (tag, task_id)
        SELECT value, new.id FROM json_each(new.tags) WHERE new.tags IS NOT NULL;
END;
CREATE TRIGGER docket_tasks_tags_delete AFTER DELETE ON docket_tasks
    WHEN old.tags IS NOT NULL BEGIN
    DELETE FROM docket_task_tags WHERE task_id = old.id;
END;
-- Worker labels: see the PostgreSQL migration 0033.
ALTER TABLE docket_tasks ADD COLUMN affinity TEXT;
