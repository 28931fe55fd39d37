-- The user a task is for (see the PostgreSQL migration of the same number).
ALTER TABLE docket_tasks ADD COLUMN user_id TEXT;
CREATE INDEX docket_tasks_user_idx ON docket_tasks (user_id, id) WHERE user_id IS NOT NULL;
