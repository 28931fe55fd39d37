-- Issue 43's side tables on MariaDB, written by the statements that need them instead of by
-- what every task pays for. Measured (bench/results/issue43-after-0018-20261130.md): 0017's
-- stored column with a unique index and its four triggers cost MariaDB 10-20% more CPU per
-- plain task under load than before issue 43.
--
-- Debounce by key: the waiting task of each key in a table of its own, written only by
-- debounced enqueues. 0017 kept it as a stored column with a unique index on docket_tasks,
-- which put an index entry (a NULL) into every task's insert, claim and completion. A row here
-- may outlive its task's wait (the task was claimed or cancelled): the next debounced enqueue
-- with the key takes it over (MySqlTx::debounce_own); a prune or delete of the task removes it.
CREATE TABLE docket_debounce_waiting (
    waiting_key VARCHAR(512) NOT NULL PRIMARY KEY,
    task_id BIGINT NOT NULL,
    KEY docket_debounce_waiting_task_idx (task_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
INSERT INTO docket_debounce_waiting (waiting_key, task_id)
    SELECT debounce_waiting, id FROM docket_tasks WHERE debounce_waiting IS NOT NULL;
ALTER TABLE docket_tasks DROP INDEX docket_tasks_debounce_idx, DROP COLUMN debounce_waiting;
-- Tags: docket_task_tags stays as 0017 filled it, keyed by task id whichever table holds the
-- task. Its triggers go: a table with triggers makes every INSERT (or DELETE) on it open and
-- lock the triggers' tables too, tagged task or not, and every archive is a DELETE. The
-- inserts of tagged tasks write their tags (MySqlStore::tag), a retag rewrites them, and a
-- prune or delete of tasks removes theirs (MySqlStore::forget). A process's tasks, which
-- carry no tags, are deleted without it.
DROP TRIGGER docket_tasks_tags_insert;
DROP TRIGGER docket_tasks_done_tags_insert;
DROP TRIGGER docket_tasks_tags_delete;
DROP TRIGGER docket_tasks_done_tags_delete;
