-- Debounce by key (issue 43), MariaDB: the waiting task of each debounce key in a table of
-- its own, written only by debounced enqueues. 0017 kept it as a stored column with a unique
-- index on docket_tasks, which put an index entry (a NULL) into every task's insert, claim and
-- completion: about 4% of the server's CPU per task in the plain benchmark
-- (bench/results/issue43-mariadb-cpu-20261130.md). A row here may outlive its task's wait
-- (the task was claimed or cancelled); the next debounced enqueue with the key takes it over
-- (MySqlTx::debounce_own), and the task's delete from docket_tasks removes it.
CREATE TABLE docket_debounce_waiting (
    waiting_key VARCHAR(512) NOT NULL PRIMARY KEY,
    task_id BIGINT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
INSERT INTO docket_debounce_waiting (waiting_key, task_id)
    SELECT debounce_waiting, id FROM docket_tasks WHERE debounce_waiting IS NOT NULL;
ALTER TABLE docket_tasks DROP INDEX docket_tasks_debounce_idx, DROP COLUMN debounce_waiting;
-- One trigger for both side tables on a task's delete from docket_tasks (a move to
-- docket_tasks_done included: a finished task waits for nothing), instead of 0017's two.
DROP TRIGGER docket_tasks_tags_delete;
CREATE TRIGGER docket_tasks_delete AFTER DELETE ON docket_tasks FOR EACH ROW
BEGIN
    IF OLD.tags IS NOT NULL THEN
        DELETE FROM docket_task_tags WHERE task_id = OLD.id
            AND NOT EXISTS (SELECT 1 FROM docket_tasks_done WHERE id = OLD.id);
    END IF;
    IF OLD.debounce_key IS NOT NULL THEN
        DELETE FROM docket_debounce_waiting WHERE waiting_key = OLD.debounce_key
            AND task_id = OLD.id;
    END IF;
END;
