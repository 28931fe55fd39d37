-- The user a task is for (asyncflow's user_id), and its user list: GET /v1/tasks?user_id=U.
ALTER TABLE docket_tasks ADD COLUMN user_id text;
CREATE INDEX docket_tasks_user_idx ON docket_tasks (user_id, id) WHERE user_id IS NOT NULL;
