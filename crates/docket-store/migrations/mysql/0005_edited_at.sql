-- When a task was last changed by hand or by its worker's progress (PATCH, retry, run now, a
-- heartbeat with progress). updated_at is the latest of this and the task's other times.
ALTER TABLE docket_tasks ADD COLUMN edited_at DATETIME(6) NULL;
ALTER TABLE docket_tasks_done ADD COLUMN edited_at DATETIME(6) NULL;
